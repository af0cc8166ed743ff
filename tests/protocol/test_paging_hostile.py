"""Paged lists against servers whose cursors never end (issue 31, point 7).

Every paged list (tools, resources, resource templates, prompts) follows ``nextCursor``; a
server that repeats a cursor (with empty pages: the million-item cap never fires), sends
cursors round in a cycle, or sends ever-new cursors with empty pages, must end the list
with a ``ProtocolError`` naming the cursor; and the list's ``timeout`` bounds all of its
pages together (one deadline, not a fresh timeout per page). Over the in-memory pair (both
eras), stdio (a scripted server process) and Streamable HTTP.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
from fakes import FakeServer
from servers.launch import SERVERS_DIR
from test_http_transport import Req, ScriptedServer, json_server

import mcpsync
from mcpsync.errors import ProtocolError, RequestTimeout, TransportError
from mcpsync.protocol.choose import Caches
from mcpsync.protocol.pages import MAX_PAGES
from mcpsync.skills import EXTENSION_ID

MODERN = "2026-07-28"
CAPS = {"tools": {}, "resources": {}, "prompts": {}}
ITEMS = {
    "tools/list": ("tools", {"name": "t", "inputSchema": {"type": "object"}}),
    "resources/list": ("resources", {"uri": "file:///r", "name": "r"}),
    "resources/templates/list": ("resourceTemplates", {"uriTemplate": "file:///{x}", "name": "x"}),
    "prompts/list": ("prompts", {"name": "p"}),
}
LISTS = {
    "tools/list": lambda s, **kw: s.list_tools(**kw),
    "resources/list": lambda s, **kw: s.list_resources(**kw),
    "resources/templates/list": lambda s, **kw: s.list_resource_templates(**kw),
    "prompts/list": lambda s, **kw: s.list_prompts(**kw),
}
#: slack on top of a bound: the issue's "bound + 0.5 s"
SLACK = 0.5


class QuietFake(FakeServer):
    """A FakeServer whose late replies (a slow page answered after close) are dropped."""

    def send(self, message: dict[str, Any]) -> None:
        try:
            super().send(message)
        except TransportError:
            pass


class Pager:
    """What the scripted servers answer to a list request, by mode; counts the pages."""

    def __init__(self, mode: str, delay: float = 0.0, modern: bool = False) -> None:
        self.mode, self.delay, self.modern = mode, delay, modern
        self.served = 0
        self.lock = threading.Lock()

    def __call__(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        with self.lock:
            self.served += 1
            served = self.served
        if self.delay:
            time.sleep(self.delay)
        cursor = (params or {}).get("cursor")
        if self.mode == "repeat":
            full, following = False, "same"
        elif self.mode == "cycle":
            full, following = True, "B" if cursor == "A" else "A"
        else:  # fresh (empty pages), slow (one item a page)
            full, following = self.mode == "slow", f"c{served}"
        key, item = ITEMS[method]
        result: dict[str, Any] = {key: [item] if full else [], "nextCursor": following}
        if self.modern:
            result["resultType"] = "complete"
        return result


def memory_session(pager: Pager, era: str, timeout: float = 20.0) -> mcpsync.Session:
    handlers: dict[str, Any] = {
        method: (lambda m, method=method: pager(method, m.get("params"))) for method in ITEMS
    }
    handlers["ping"] = lambda m: {}
    if era == "modern":
        handlers["server/discover"] = lambda m: {
            "resultType": "complete",
            "supportedVersions": [MODERN],
            "capabilities": CAPS,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "paging", "version": "1"}},
        }
    server = QuietFake(capabilities=CAPS, handlers=handlers)
    return mcpsync.Session.connect(
        server.transport, timeout=timeout, connect_timeout=10, era=era, _caches=Caches()
    )


def stdio_session(mode: str, delay: float = 0.0, timeout: float = 20.0) -> mcpsync.Session:
    argv = [sys.executable, str(SERVERS_DIR / "paging_server.py"), mode, str(delay)]
    return mcpsync.Session.connect(argv, timeout=timeout, connect_timeout=20, era="legacy")


def assert_names_cursor(error: BaseException, cursor: str, problem: str) -> None:
    text = str(error)
    assert problem in text, text
    assert f"nextCursor {cursor!r}" in text, text


# -- the in-memory pair, both eras ---------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("method", list(ITEMS))
def test_repeated_cursor_with_empty_pages_ends_every_list(no_leaks, era, method):
    pager = Pager("repeat", modern=era == "modern")
    with memory_session(pager, era) as s:
        assert s.era == era
        started = time.monotonic()
        with pytest.raises(ProtocolError) as caught:
            LISTS[method](s)
        assert time.monotonic() - started < 5
        assert_names_cursor(caught.value, "same", "already sent")
        assert method in str(caught.value)
        assert pager.served == 2  # the first page, and the one that repeated its cursor
        s.ping()  # the session goes on


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_cursors_going_round_a_cycle_end_the_list(no_leaks, era):
    pager = Pager("cycle", modern=era == "modern")
    with memory_session(pager, era) as s:
        with pytest.raises(ProtocolError) as caught:
            s.list_prompts()
        assert_names_cursor(caught.value, "A", "already sent")
        assert pager.served == 3  # None -> A, A -> B, B -> A again


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_ever_new_cursors_with_empty_pages_stop_at_the_page_limit(no_leaks, era):
    pager = Pager("fresh", modern=era == "modern")
    with memory_session(pager, era, timeout=120) as s:
        with pytest.raises(ProtocolError) as caught:
            s.list_tools()
        assert_names_cursor(caught.value, f"c{MAX_PAGES}", f"more than {MAX_PAGES} pages")
        assert pager.served == MAX_PAGES


@pytest.mark.parametrize("era", ["legacy", "modern"])
@pytest.mark.parametrize("submit", [False, True])
def test_slow_pages_are_bounded_by_one_deadline_for_the_whole_list(no_leaks, era, submit):
    pager = Pager("slow", delay=0.4, modern=era == "modern")
    with memory_session(pager, era) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as caught:
            if submit:
                s.submit_list_resources(timeout=1.5).result(timeout=10)
            else:
                s.list_resources(timeout=1.5)
        elapsed = time.monotonic() - started
        assert elapsed <= 1.5 + SLACK, elapsed
        assert elapsed >= 1.5 - 0.05, elapsed
        assert "resources/list" in str(caught.value) and "timeout=1.5" in str(caught.value)
        assert 3 <= pager.served <= 5  # each page 0.4 s: not a fresh 1.5 s per page
        s.ping()


def test_the_session_timeout_bounds_a_list_called_without_one(no_leaks):
    pager = Pager("slow", delay=0.3)
    with memory_session(pager, "legacy", timeout=1.0) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout):
            s.list_tools()
        elapsed = time.monotonic() - started
        assert 1.0 - 0.05 <= elapsed <= 1.0 + SLACK, elapsed


# -- stdio: a server process ------------------------------------------------------------------------


@pytest.mark.parametrize("method", list(ITEMS))
def test_stdio_repeated_cursor_ends_every_list(no_leaks, method):
    with stdio_session("repeat") as s:
        with pytest.raises(ProtocolError) as caught:
            LISTS[method](s)
        assert_names_cursor(caught.value, "same", "already sent")
        s.ping()


def test_stdio_cycle_and_ever_new_cursors_end_the_list(no_leaks):
    with stdio_session("cycle") as s:
        with pytest.raises(ProtocolError) as caught:
            s.list_tools()
        assert_names_cursor(caught.value, "A", "already sent")
    with stdio_session("fresh", timeout=120) as s:
        with pytest.raises(ProtocolError) as caught:
            s.list_resource_templates()
        assert_names_cursor(caught.value, f"c{MAX_PAGES}", f"more than {MAX_PAGES} pages")
        s.ping()


def test_stdio_slow_pages_are_bounded_by_the_list_timeout(no_leaks):
    with stdio_session("slow", delay=0.4) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as caught:
            s.list_tools(timeout=1.5)
        elapsed = time.monotonic() - started
        assert 1.5 - 0.05 <= elapsed <= 1.5 + SLACK, elapsed
        assert "tools/list" in str(caught.value)
        s.ping(timeout=5)  # answered once the server is through its slow page


# -- Streamable HTTP ---------------------------------------------------------------------------------


def test_http_repeated_cursor_and_slow_pages(no_leaks):
    pagers = {"repeat": Pager("repeat"), "slow": Pager("slow", delay=0.4)}
    current = ["repeat"]

    def lists(req: Req, message: dict[str, Any]) -> bool:
        if message.get("method") in ITEMS:
            result = pagers[current[0]](message["method"], message.get("params"))
            req.send_json({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return True
        if message.get("method") == "initialize":
            req.send_json(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": CAPS,
                        "serverInfo": {"name": "paging", "version": "1"},
                    },
                },
                headers={"Mcp-Session-Id": "s1"},
            )
            return True
        return False

    with ScriptedServer(json_server(lists)) as server:
        with mcpsync.Session.connect(server.url, era="legacy", timeout=20) as s:
            with pytest.raises(ProtocolError) as caught:
                s.list_tools()
            assert_names_cursor(caught.value, "same", "already sent")
            assert pagers["repeat"].served == 2
            current[0] = "slow"
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                s.list_prompts(timeout=1.5)
            elapsed = time.monotonic() - started
            assert 1.5 - 0.05 <= elapsed <= 1.5 + SLACK, elapsed
            assert 3 <= pagers["slow"].served <= 5
            s.ping()


# -- skills/list (the skills extension's paged list) -------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_skills_listing_is_bounded_by_one_deadline_and_ends_at_a_repeated_cursor(no_leaks, era):
    caps = {**CAPS, "extensions": {EXTENSION_ID: {}}}
    served = []
    mode = ["slow"]

    def on_list(message: dict[str, Any]) -> dict[str, Any]:
        served.append(message)
        if mode[0] == "slow":
            time.sleep(0.4)
            result: dict[str, Any] = {"skills": [], "nextCursor": f"c{len(served)}"}
        else:
            result = {"skills": [], "nextCursor": "same"}
        return {**result, "resultType": "complete"} if era == "modern" else result

    handlers: dict[str, Any] = {"skills/list": on_list, "ping": lambda m: {}}
    if era == "modern":
        handlers["server/discover"] = lambda m: {
            "resultType": "complete",
            "supportedVersions": [MODERN],
            "capabilities": caps,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "paging", "version": "1"}},
        }
    server = QuietFake(capabilities=caps, handlers=handlers)
    with mcpsync.Session.connect(
        server.transport, timeout=1.5, connect_timeout=10, era=era, _caches=Caches()
    ) as s:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as caught:
            s.list_skills()
        elapsed = time.monotonic() - started
        assert 1.5 - 0.05 <= elapsed <= 1.5 + SLACK, elapsed
        assert "skills/list" in str(caught.value) and "timeout=1.5" in str(caught.value)
        assert 3 <= len(served) <= 5  # 0.4 s pages: not a fresh 1.5 s per page
        mode[0] = "repeat"
        served.clear()
        with pytest.raises(ProtocolError) as repeated:
            s.list_skills(refresh=True)
        assert "'same'" in str(repeated.value)
        assert len(served) == 2
