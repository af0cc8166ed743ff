"""An HTTP session that expires again while the request that met the first expiry is
re-sent (issue 11's leftover, issue 14's reliability).

The peer is the stdlib server of ``test_http_restart_pool`` (a separate process) run with
``--expire-first K``: its first K ``tools/call`` requests each expire the session they
came on and get 404 (the server did not run them). The rule under test: one request
re-initializes the session at most ``MAX_REINITIALIZATIONS`` (2) times (the connection's
re-initialization, then the transport's), each expiry kept as a reason; one more and it
fails with ``SessionExpired`` listing them, and the next request brings the session up.
"""

from __future__ import annotations

import threading

from servers.launch import free_port
from test_http_restart_pool import own_server, stats

import mcpsync
from mcpsync import RestartEvent, RestartPolicy
from mcpsync.errors import SessionExpired
from mcpsync.protocol.choose import Caches
from mcpsync.transports.http.session import MAX_REINITIALIZATIONS, SessionKeptExpiring

WAIT = 30.0


def connect(url: str, **kwargs: object) -> mcpsync.Session:
    return mcpsync.Session.connect(url, era="legacy", timeout=WAIT, _caches=Caches(), **kwargs)


def sent(port: int) -> list[str]:
    return [c["arguments"]["message"] for c in stats(port)["calls"]]


def test_a_second_expiry_during_the_resend_initializes_again(no_leaks):
    port = free_port()
    with own_server(port, "--expire-first", "2") as server:
        with connect(server.url) as s:
            # 404, re-initialized, re-sent: 404 again, re-initialized again, re-sent: answered
            assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
            assert s.reinitializations == 2
            assert stats(port)["initializes"] == 3
            assert sent(port) == ["x", "x", "x"]  # two of them answered 404: never run
            assert s.call_tool("echo", {"message": "y"}).content[0].text == "y"


def test_with_the_restart_policy_each_expiry_counts_as_a_restart(no_leaks):
    events: list[RestartEvent] = []
    cond = threading.Condition()

    def seen(event: RestartEvent) -> None:
        with cond:
            events.append(event)
            cond.notify_all()

    port = free_port()
    policy = RestartPolicy(backoff=0.05, on_restart=seen)
    with own_server(port, "--expire-first", "2") as server:
        with connect(server.url, restart=policy) as s:
            assert s.call_tool("echo", {"message": "x"}).content[0].text == "x"
            assert s.restarts == 2 and s.reinitializations == 2
            with cond:
                assert cond.wait_for(lambda: len(events) == 2, WAIT), events
            assert all(isinstance(e.reason, SessionExpired) and e.ok for e in events)
            assert sent(port) == ["x", "x", "x"]


def test_expiring_on_every_resend_is_bounded_and_keeps_every_reason(no_leaks):
    port = free_port()
    expiries = MAX_REINITIALIZATIONS + 2
    with own_server(port, "--expire-first", str(expiries)) as server:
        with connect(server.url) as s:
            try:
                s.call_tool("echo", {"message": "x"})
            except SessionKeptExpiring as exc:
                error = exc
            else:
                raise AssertionError("the call went through a session that kept expiring")
            assert isinstance(error, SessionExpired)
            assert len(error.reasons) == MAX_REINITIALIZATIONS + 1
            assert all(isinstance(r, SessionExpired) for r in error.reasons)
            assert f"expired {MAX_REINITIALIZATIONS + 1} times" in str(error)
            assert sent(port) == ["x"] * (MAX_REINITIALIZATIONS + 1)
            # the next request brings the session up again (and meets the last expiry)
            assert s.call_tool("echo", {"message": "y"}).content[0].text == "y"
            assert sent(port)[-2:] == ["y", "y"]
            assert stats(port)["initializes"] == expiries + 1


def test_eight_threads_through_expiries_in_a_row(no_leaks):
    """The first 2 ``tools/call`` requests, whichever threads they come from, each expire
    the session: every call is answered, one re-initialization per expiry (what one call
    alone gets through; 8 callers share it: ``MAX_FRUITLESS`` == ``MAX_REINITIALIZATIONS``)."""
    port = free_port()
    threads, expiries = 8, MAX_REINITIALIZATIONS
    with own_server(port, "--expire-first", str(expiries)) as server:
        with connect(server.url) as s:
            start = threading.Barrier(threads)
            got: list[str] = []
            failures: list[BaseException] = []

            def call(n: int) -> None:
                try:
                    start.wait(WAIT)
                    got.append(s.call_tool("echo", {"message": f"m{n}"}).content[0].text)
                except BaseException as exc:  # noqa: BLE001 - the test looks at it
                    failures.append(exc)

            workers = [
                threading.Thread(target=call, args=(n,), name=f"test-caller-{n}")
                for n in range(threads)
            ]
            for t in workers:
                t.start()
            for t in workers:
                t.join(WAIT * 2)
            assert not any(t.is_alive() for t in workers)
            assert failures == [], failures
            assert sorted(got) == sorted(f"m{n}" for n in range(threads))
            assert s.reinitializations == expiries
            assert stats(port)["initializes"] == expiries + 1
