"""Auth at full speed: mcpsync's OAuth rides the fast HTTP pool (it declares RequestAuth and
adds its own header); a 401 still runs the whole flow and re-sends once, once for all
threads; a caller's own requests auth object keeps going through requests."""

from __future__ import annotations

import threading
from typing import Any

import requests

import mcpsync
from mcpsync.auth import OAuth
from mcpsync.demo_server.http import DemoHTTPServer
from mcpsync.transports.http.requestauth import RequestAuth

CLIENTS = {"svc": "s3cret"}


def _echo(s: mcpsync.Session, text: str) -> str:
    return s.call_tool("echo", {"message": text}).content[0].text


def test_oauth_rides_the_fast_path_and_a_401_reauthorizes_once(no_leaks):
    with DemoHTTPServer(auth=True, clients=CLIENTS) as server:
        auth = OAuth.client_credentials("svc", "s3cret")
        assert isinstance(auth, RequestAuth)
        with mcpsync.Session.connect(server.url, auth=auth, timeout=30) as s:
            assert s.transport._http.fast  # type: ignore[attr-defined]
            assert _echo(s, "one") == "one"
            before = len(server.requests)
            server.auth_server.revoke_all()  # the server forgets the token mid-session
            assert _echo(s, "two") == "two"
            after = server.requests[before:]
            # the call: one 401, the same request re-sent once with the new token (200)
            assert [r["status"] for r in after if r["method"] == "tools/call"] == [401, 200]
            assert s.transport._http.fast  # type: ignore[attr-defined]
        assert server.auth_server.stats()["tokens"] == {"client_credentials": 2}


def test_threads_share_one_reauthorization(no_leaks):
    with DemoHTTPServer(auth=True, clients=CLIENTS) as server:
        auth = OAuth.client_credentials("svc", "s3cret")
        with mcpsync.Session.connect(server.url, auth=auth, timeout=30) as s:
            _echo(s, "warm")
            server.auth_server.revoke_all()
            start = threading.Barrier(8, timeout=30)
            errors: list[BaseException] = []

            def worker(i: int) -> None:
                try:
                    start.wait()
                    for j in range(5):
                        assert _echo(s, f"{i}-{j}") == f"{i}-{j}"
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [
                threading.Thread(target=worker, args=(i,), name=f"test-auth-fast[{i}]")
                for i in range(8)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors and not any(t.is_alive() for t in threads)
        # the 401s all waited for one flow: one new token for eight threads
        assert server.auth_server.stats()["tokens"] == {"client_credentials": 2}


def test_a_callers_own_requests_auth_goes_through_requests(no_leaks):
    with DemoHTTPServer(auth=True, clients=CLIENTS) as server:
        token = requests.post(
            f"{server.origin}/token",
            data={"grant_type": "client_credentials", "resource": server.url},
            auth=("svc", "s3cret"),
            timeout=10,
        ).json()["access_token"]
        calls: list[str] = []

        class Static(requests.auth.AuthBase):
            def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
                calls.append(r.method or "")
                r.headers["Authorization"] = f"Bearer {token}"
                return r

        with mcpsync.Session.connect(server.url, auth=Static(), timeout=30) as s:
            assert not s.transport._http.fast  # type: ignore[attr-defined]
            assert _echo(s, "via requests") == "via requests"
        assert "POST" in calls  # requests called it for every request
        assert all(r["token"] and r["status"] != 401 for r in server.requests)


def test_request_auth_contract_on_a_plain_object(no_leaks):
    """Any RequestAuth gets the fast path: headers per send, its answer decides a re-send."""

    class Counting(RequestAuth):
        def __init__(self) -> None:
            self.token: str | None = None
            self.answers: list[int] = []

        def request_headers(self, method: str, url: str, state: dict[str, Any]) -> dict[str, str]:
            return {"Authorization": f"Bearer {self.token}"} if self.token else {}

        def answer(self, method, url, status, headers, sent, state) -> bool:  # type: ignore[no-untyped-def]
            self.answers.append(status)
            if status != 401 or state.get("tried"):
                return False
            state["tried"] = True
            self.token = requests.post(
                f"{server.origin}/token",
                data={"grant_type": "client_credentials", "resource": server.url},
                auth=("svc", "s3cret"),
                timeout=10,
            ).json()["access_token"]
            return True

    with DemoHTTPServer(auth=True, clients=CLIENTS) as server:
        auth = Counting()
        with mcpsync.Session.connect(server.url, auth=auth, timeout=30) as s:  # type: ignore[arg-type]
            assert s.transport._http.fast  # type: ignore[attr-defined]
            assert _echo(s, "x") == "x"
        assert auth.answers == [401]  # asked once, on the first request; re-sent once


def test_request_sent_runs_once_per_attempt_after_its_headers(no_leaks):
    """The fast path calls ``request_sent`` once per attempt, after the request went out
    with the headers ``request_headers`` gave, with the same ``state``, before the reply."""
    events: list[tuple[str, int]] = []

    class Watching(RequestAuth):
        def request_headers(self, method: str, url: str, state: dict[str, Any]) -> dict[str, str]:
            state["n"] = len(events)
            events.append(("headers", state["n"]))
            return {}

        def answer(self, method, url, status, headers, sent, state) -> bool:  # type: ignore[no-untyped-def]
            return False

        def request_sent(self, method: str, url: str, state: dict[str, Any]) -> None:
            events.append(("sent", state["n"]))

    with DemoHTTPServer() as server:
        with mcpsync.Session.connect(server.url, auth=Watching(), timeout=30) as s:  # type: ignore[arg-type]
            events.clear()
            for text in ("x", "y", "z"):
                assert _echo(s, text) == text
        # three calls, then the session's DELETE at close: each a (headers, sent) pair
        assert events[:6] == [(k, n) for n in (0, 2, 4) for k in ("headers", "sent")]
        assert events[6::2] == [("headers", n) for n in range(6, len(events), 2)]
        assert events[7::2] == [("sent", n) for n in range(6, len(events), 2)]
