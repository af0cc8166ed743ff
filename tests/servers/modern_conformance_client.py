"""A throwaway conformance client for the 2026-07-28 scenarios (the modern-era helper's check).

Not the project's conformance client (that is tests/conformance/client.py); this one shows
what each modern scenario needs from ``Session.connect`` and the calls after it. Run by
``conformance client --command "python tests/servers/modern_conformance_client.py"``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # tests/

import mcpsync  # noqa: E402


def elicit_accept(params: Any) -> dict[str, Any]:
    """Accept with every property's default, or a plausible value for its type."""
    schema = getattr(params, "requested_schema", None) or {}
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            content[name] = prop["default"]
        elif prop.get("type") == "boolean":
            content[name] = True
        elif prop.get("type") in ("integer", "number"):
            content[name] = 1
        elif "enum" in prop:
            content[name] = prop["enum"][0]
        else:
            content[name] = "x"
    return {"action": "accept", "content": content}


def sample(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "none"}


def dummy_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    values = {
        "string": "us-west1",
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "object": {},
        "array": [],
    }
    return {
        name: values.get(prop.get("type"), "x")
        for name, prop in (schema.get("properties") or {}).items()
    }


def run(url: str, scenario: str, version: str) -> None:
    state: dict[str, Any] = {}

    def elicitation(params: Any) -> dict[str, Any]:
        if (
            scenario == "sep-2322-client-request-state"
            and "session" in state
            and not state.get("unrelated")
        ):
            state["unrelated"] = True  # a call in the middle of the MRTR flow carries none of it
            state["session"].call_tool("test_mrtr_unrelated", {})
        return elicit_accept(params)

    kwargs: dict[str, Any] = {}
    if scenario.startswith("auth/"):
        from auth_peers.conformance_auth import auth_for_conformance

        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "null")
        kwargs["auth"] = auth_for_conformance(scenario, context)
    if version and not os.environ.get("MCPSYNC_CONFORMANCE_AUTO"):  # set: era="auto" decides alone
        kwargs["protocol_version"] = version
    with mcpsync.Session.connect(
        url, timeout=30, connect_timeout=30, elicitation_handler=elicitation, sampling_handler=sample,
        roots=["file:///conformance"], **kwargs,
    ) as s:  # fmt: skip
        state["session"] = s
        print(f"era={s.era} version={s.protocol_version} reason={s.era_reason}", file=sys.stderr)
        # strict capability contracts: a server that lists no tools capability is not asked
        tools = (
            {t.name: t for t in s.list_tools()} if s.server_capabilities.tools is not None else {}
        )
        if scenario == "tools_call":
            s.call_tool("add_numbers", {"a": 2, "b": 3})
        elif scenario == "sep-2322-client-request-state":
            s.call_tool("test_mrtr_echo_state", {})
            s.call_tool("test_mrtr_no_state", {})
            s.call_tool("test_mrtr_no_result_type", {})
        elif scenario == "http-standard-headers":
            for name in tools:
                s.call_tool(name, {})
            for resource in s.list_resources():
                s.read_resource(str(resource.uri))
            for prompt in s.list_prompts():
                s.get_prompt(prompt.name)
        elif scenario == "http-custom-headers":
            context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
            for call in context.get("toolCalls", []):
                s.call_tool(call["name"], call.get("arguments") or {})
        elif scenario == "http-invalid-tool-headers":
            for name, tool in tools.items():
                s.call_tool(name, dummy_arguments(tool.input_schema))
        elif scenario == "json-schema-2020-12-preservation":
            s.call_tool(
                "json_schema_echo", {"schema": tools["json_schema_2020_12_tool"].input_schema}
            )
        elif scenario == "elicitation-sep1034-client-defaults":
            s.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "sse-retry":
            s.call_tool("test_reconnection", {})
        elif scenario.startswith("auth/") and "test-tool" in tools:
            s.call_tool("test-tool", {})


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        run(sys.argv[-1], scenario, os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", ""))
    except mcpsync.MCPSyncError as exc:
        print(
            f"modern conformance client: {scenario}: {type(exc).__name__}: {exc}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
