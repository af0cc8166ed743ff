"""Many threads on one session: every reply reaches the thread that asked, none is lost,
over stdio (callers park while one reads for them) and HTTP (a pooled connection each),
with notifications (progress) arriving in between."""

from __future__ import annotations

import threading

from servers.launch import demo_argv

import mcpsync
from mcpsync.demo_server.http import DemoHTTPServer

THREADS = 8
CALLS = 150


def _hammer(session: mcpsync.Session) -> list[str]:
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            start.wait(10)
            for n in range(CALLS):
                message = f"thread {i} call {n}"
                if n % 50 == 7:  # now and then a call with progress reports in between
                    seen: list[mcpsync.Progress] = []
                    result = session.call_tool(
                        "long_running", {"duration": 0.01, "steps": 2}, on_progress=seen.append,
                        timeout=30,
                    )  # fmt: skip
                    if "2 steps" not in result.content[0].text:
                        errors.append(f"{message}: {result.content[0].text!r}")
                    if [p.progress for p in seen] != [1, 2]:
                        errors.append(f"{message}: progress {seen}")
                    continue
                got = session.call_tool("echo", {"message": message}, timeout=30).content[0].text
                if got != message:
                    errors.append(f"sent {message!r}, got {got!r}")
        except Exception as exc:  # noqa: BLE001 - collected: the test fails on it
            errors.append(f"thread {i}: {exc!r}")

    threads = [
        threading.Thread(target=run, args=(i,), name=f"test-caller[{i}]") for i in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_eight_threads_share_one_stdio_session(no_leaks):
    with mcpsync.Session.connect(demo_argv(), name="crowd") as s:
        assert _hammer(s) == []
        assert not s.connection._pending  # noqa: SLF001 - nothing left waiting


def test_eight_threads_share_one_http_session(no_leaks):
    with DemoHTTPServer() as server, mcpsync.Session.connect(server.url, name="crowd-http") as s:
        assert _hammer(s) == []
