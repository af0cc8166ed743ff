"""The mcpsync client program the official conformance suite drives.

Run by ``conformance client --command "python tests/conformance/client.py"``: the suite
appends the server URL and sets MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION
and MCP_CONFORMANCE_CONTEXT. It uses only the public API; exit code 0 means the client did
its part without error. The wire version is pinned from MCP_CONFORMANCE_PROTOCOL_VERSION
(which also pins the era); with MCPSYNC_CONFORMANCE_AUTO=1 ``era="auto"`` decides alone.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for auth_peers

import mcpsync  # noqa: E402
from mcpsync.handlers import schema_defaults  # noqa: E402
from mcpsync.skills import EXTENSION_ID as SKILLS  # noqa: E402
from mcpsync.skills import SkillError  # noqa: E402

DUMMY = {
    "string": "us-west1",
    "integer": 1,
    "number": 1.5,
    "boolean": True,
    "object": {},
    "array": [],
}


def accept(params: Any) -> dict[str, Any]:
    """Accept an elicitation: the schema's defaults, else a plausible value per type."""
    schema = getattr(params, "requested_schema", None) or {}
    content = schema_defaults(schema)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in content:
            content[name] = prop["enum"][0] if "enum" in prop else DUMMY.get(prop.get("type"), "x")
    return {"action": "accept", "content": content}


def sample(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "none"}


def dummy_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    return {
        name: DUMMY.get(prop.get("type"), "x")
        for name, prop in (schema.get("properties") or {}).items()
    }


def run(url: str, scenario: str, version: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null") or {}
    state: dict[str, Any] = {}

    def elicitation(params: Any) -> dict[str, Any]:
        if (
            scenario == "sep-2322-client-request-state"
            and "session" in state
            and not state.get("unrelated")
        ):
            state["unrelated"] = True  # a call in the middle of the MRTR flow carries none of it
            state["session"].call_tool("test_mrtr_unrelated", {})
        return accept(params)

    kwargs: dict[str, Any] = {}
    if scenario.startswith("auth/"):
        from auth_peers.conformance_auth import auth_for_conformance

        kwargs["auth"] = auth_for_conformance(scenario, context)
    if scenario.startswith("sep-2640-"):
        kwargs["extensions"] = [SKILLS]
    if version and not os.environ.get("MCPSYNC_CONFORMANCE_AUTO"):
        kwargs["protocol_version"] = version
    with mcpsync.Session.connect(
        url, timeout=30, connect_timeout=30, elicitation_handler=elicitation, sampling_handler=sample,
        roots=["file:///conformance"], **kwargs,
    ) as s:  # fmt: skip
        state["session"] = s
        print(f"era={s.era} version={s.protocol_version} reason={s.era_reason}", file=sys.stderr)
        if scenario.startswith("sep-2640-"):
            skills(s, load=scenario != "sep-2640-client-no-prefetch")
            return
        if s.server_capabilities.tools is None:  # strict contracts: nothing more to ask
            return
        tools = {t.name: t for t in s.list_tools()}
        if scenario == "tools_call":
            s.call_tool("add_numbers", {"a": 2, "b": 3})
        elif scenario == "elicitation-sep1034-client-defaults":
            s.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            s.call_tool("test_reconnection", {})
        elif scenario == "json-schema-2020-12-preservation":
            s.call_tool(
                "json_schema_echo", {"schema": tools["json_schema_2020_12_tool"].input_schema}
            )
        elif scenario == "sep-2322-client-request-state":
            for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_no_result_type"):
                s.call_tool(name, {})
        elif scenario == "http-standard-headers":
            for name in tools:
                s.call_tool(name, {})
            if s.server_capabilities.resources is not None:
                for resource in s.list_resources():
                    s.read_resource(str(resource.uri))
            if s.server_capabilities.prompts is not None:
                for prompt in s.list_prompts():
                    s.get_prompt(prompt.name)
        elif scenario == "http-custom-headers":
            for call in context.get("toolCalls", []):
                s.call_tool(call["name"], call.get("arguments") or {})
        elif scenario == "http-invalid-tool-headers":
            for name, tool in tools.items():  # invalid declarations were already dropped
                s.call_tool(name, dummy_arguments(tool.input_schema))
        elif scenario.startswith("auth/") and "test-tool" in tools:
            s.call_tool("test-tool", {})


def skills(s: mcpsync.Session, *, load: bool) -> None:
    """List the server's skills; with ``load``, load each and read every file it lists
    (a refused skill is reported and the rest go on: refusing is the client's job)."""
    for entry in s.list_skills():
        print(f"skill {entry.name}: {entry.description}", file=sys.stderr)
        if not load:
            continue
        try:
            skill = s.load_skill(entry.uri)
            for path in skill.files():
                skill.read_bytes(path)
        except SkillError as exc:
            print(f"skill {entry.name} refused: {type(exc).__name__}: {exc}", file=sys.stderr)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        run(sys.argv[-1], scenario, os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", ""))
    except mcpsync.MCPSyncError as exc:
        print(f"conformance client: {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
