#!/bin/sh
# Run the conformance auth scenarios one at a time (--scenario) with the throwaway client
# in this folder, then score them. Usage: tests/auth_peers/run_conformance_auth.sh [OUTDIR] [SCENARIO...]
# SPEC=2026-07-28 forces that wire version for every scenario (--spec-version).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-/tmp/conf-auth}
[ $# -gt 0 ] && shift
SCENARIOS=${*:-"auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
 auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported
 auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
 auth/token-endpoint-auth-basic auth/token-endpoint-auth-post auth/token-endpoint-auth-none
 auth/pre-registration auth/2025-03-26-oauth-metadata-backcompat auth/2025-03-26-oauth-endpoint-fallback
 auth/client-credentials-basic auth/client-credentials-jwt
 auth/resource-mismatch auth/offline-access-scope auth/offline-access-not-supported
 auth/authorization-server-migration auth/iss-supported auth/iss-not-advertised
 auth/iss-supported-missing auth/iss-wrong-issuer auth/iss-unexpected auth/iss-normalized
 auth/metadata-issuer-mismatch"}
cd "$ROOT/tests/node" || exit 2
PATH=$PWD/node_modules/.bin:$PATH
export PATH
rm -rf "$OUT"
for s in $SCENARIOS; do
  if conformance client --command "$ROOT/.venv/bin/python $HERE/conformance_client.py" \
      --scenario "$s" ${SPEC:+--spec-version "$SPEC"} --timeout 60000 -o "$OUT" >"$OUT.$(echo "$s" | tr / _).log" 2>&1; then
    echo "exit 0  $s"
  else
    echo "exit $?  $s"
  fi
done
python3 /work/shared/tools/conformance_score.py "$OUT"
