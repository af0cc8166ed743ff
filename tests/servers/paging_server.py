"""A stdio MCP server (2025-11-25, no SDK) whose paged lists misbehave, for tests/protocol/test_paging_hostile.py.

``python paging_server.py MODE [DELAY]``; every list (tools, resources, resource templates,
prompts) pages the same way:

- ``repeat``: every page is empty and names the same ``nextCursor``;
- ``cycle``: the cursors go A -> B -> A (each page holds one item);
- ``fresh``: every page is empty and names a cursor never sent before;
- ``slow``: every page holds one item and a new cursor, after ``DELAY`` seconds.

Requests are answered one at a time, in order (a slow page holds up the next request). The
number of list requests answered is written to stderr at exit (``pages=N``).
"""

from __future__ import annotations

import json
import sys
import time

KEYS = {
    "tools/list": ("tools", {"name": "t", "inputSchema": {"type": "object"}}),
    "resources/list": ("resources", {"uri": "file:///r", "name": "r"}),
    "resources/templates/list": ("resourceTemplates", {"uriTemplate": "file:///{x}", "name": "x"}),
    "prompts/list": ("prompts", {"name": "p"}),
}


def page(mode: str, cursor: str | None, served: int) -> tuple[bool, str]:
    """(whether the page holds an item, its nextCursor)."""
    if mode == "repeat":
        return False, "same"
    if mode == "cycle":
        return True, "B" if cursor == "A" else "A"
    return mode == "slow", f"c{served}"


def main() -> None:
    mode = sys.argv[1]
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    served = 0
    out = sys.stdout
    try:
        for line in sys.stdin:
            message = json.loads(line)
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                continue  # notifications (initialized, cancelled)
            params = message.get("params") or {}
            if method == "initialize":
                result: dict = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "resources": {}, "prompts": {}},
                    "serverInfo": {"name": "paging", "version": "1"},
                }
            elif method in KEYS:
                served += 1
                if mode == "slow":
                    time.sleep(delay)
                key, item = KEYS[method]
                full, cursor = page(mode, params.get("cursor"), served)
                result = {key: [item] if full else [], "nextCursor": cursor}
            elif method == "ping":
                result = {}
            else:
                out.write(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}}
                    )
                    + "\n"
                )
                out.flush()
                continue
            out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
            out.flush()
    except (BrokenPipeError, KeyboardInterrupt):
        pass
    finally:
        print(f"pages={served}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
