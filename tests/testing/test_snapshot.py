"""mcpsync.testing.snapshot / assert_matches_snapshot against in-process SDK servers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpsync.testing import assert_matches_snapshot, diff_snapshots, serve, snapshot

pytestmark = pytest.mark.real


def make_server(*, drift: bool = False):
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("calc")
    if drift:

        @app.tool()
        def add(a: int, b: str) -> int:
            """Add two numbers."""
            return a

        @app.prompt()
        def explain(topic: str) -> str:
            return topic

    else:

        @app.tool()
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        @app.tool()
        def negate(x: int) -> int:
            return -x

    @app.resource("note://readme", mime_type="text/plain")
    def readme() -> str:
        return "read me"

    return app


def test_snapshot_is_stable_json_of_tools_resources_prompts(tmp_path: Path, no_leaks):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    with serve(make_server()) as s:
        data = snapshot(s, first)
    with serve(make_server()) as s:
        snapshot(s, second)
    assert first.read_bytes() == second.read_bytes()
    assert json.loads(first.read_text()) == data
    assert [t["name"] for t in data["tools"]] == ["add", "negate"]
    add = data["tools"][0]
    assert add["inputSchema"]["properties"]["b"]["type"] == "integer" and "outputSchema" in add
    assert [r["uri"] for r in data["resources"]] == ["note://readme"]
    assert data["prompts"] == []
    assert first.read_text().endswith("}\n") and '  "tools": [' in first.read_text()


def test_assert_matches_snapshot_reports_each_change(tmp_path: Path, monkeypatch, no_leaks):
    path = tmp_path / "snaps" / "calc.json"
    with serve(make_server()) as s:
        assert_matches_snapshot(s, path)  # first run records
        assert path.exists()
        assert_matches_snapshot(s, path)  # unchanged: passes
    with serve(make_server(drift=True)) as s, pytest.raises(AssertionError) as info:
        assert_matches_snapshot(s, path)
    text = str(info.value)
    assert "tool 'negate': removed" in text
    assert "prompt 'explain': added" in text
    assert "tool 'add': changed" in text
    assert 'inputSchema.properties.b.type: "integer" -> "string"' in text
    assert "MCPSYNC_UPDATE_SNAPSHOTS=1" in text
    monkeypatch.setenv("MCPSYNC_UPDATE_SNAPSHOTS", "1")
    with serve(make_server(drift=True)) as s:
        assert_matches_snapshot(s, path)
    monkeypatch.delenv("MCPSYNC_UPDATE_SNAPSHOTS")
    with serve(make_server(drift=True)) as s:
        assert_matches_snapshot(s, path)


def test_diff_of_offered_sections():
    old = {"tools": [], "resources": None, "resource_templates": None, "prompts": [{"name": "p"}]}
    new = {"tools": [], "resources": [], "resource_templates": None, "prompts": None}
    assert diff_snapshots(old, new) == ["resources: now offered", "prompts: no longer offered"]
    assert diff_snapshots(old, old) == []
