"""A conformance-harness client for the negative ``auth/wif-jwt-bearer`` cases (test helper).

Owns: presenting the scenario context's JWT named on the command line (``valid_jwt``,
``wrong_audience_jwt``, ``expired_jwt``) with ``OAuth.workload_identity`` through
``mcpsync.Session.connect``, and writing what happened as JSON to the report file:

    python tests/auth_peers/wif_client.py KEY REPORT.json SERVER_URL

(the harness appends SERVER_URL). Exit 0 when the session worked or failed with a typed
``TokenError``; 1 for anything else.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

import mcpsync  # noqa: E402
from mcpsync.auth import OAuth  # noqa: E402
from mcpsync.errors import MCPSyncError, TokenError  # noqa: E402


def main() -> int:
    key, report, url = sys.argv[1], Path(sys.argv[2]), sys.argv[-1]
    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    assertion = ctx[key]
    out: dict[str, object] = {}
    code = 0
    try:
        auth = OAuth.workload_identity(assertion, client_id=ctx.get("client_id"))
        with mcpsync.Session.connect(url, auth=auth, timeout=20, connect_timeout=20) as s:
            out["tools"] = [t.name for t in s.list_tools()]
    except MCPSyncError as exc:
        chain = [exc, *([exc.__cause__] if exc.__cause__ is not None else [])]
        typed = next((e for e in chain if isinstance(e, TokenError)), None)
        out["type"] = type(exc).__name__
        out["message"] = str(exc)
        out["assertion_shown"] = assertion in str(exc) or assertion in repr(exc)
        if typed is not None:
            out.update(token_error=type(typed).__name__, error=typed.error, step=typed.step)
        else:
            code = 1
    report.write_text(json.dumps(out))
    return code


if __name__ == "__main__":
    sys.exit(main())
