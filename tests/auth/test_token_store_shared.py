"""One token store shared by threads, processes and workers (issue 31, point 10).

Against :mod:`auth_peers.rotating_as`: rotating refresh tokens, the whole family revoked
when a rotated refresh token comes back, access tokens good for one epoch (the test starts
the next one: expiry is driven by the server's counter, never by a clock racing threads).
Every thread has its own ``OAuth``, its own ``FileTokenStore`` object over the one file and
its own ``Session``; they call in lock-step rounds with the test (a barrier), so each round
is exactly one expiry for every one of them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from auth_peers import shared_store_worker
from auth_peers.rotating_as import FamilyAuthorizationServer, serve

import mcpsync
from mcpsync.auth import FileTokenStore, OAuth
from mcpsync.errors import LockTimeout

BARRIER = shared_store_worker.BARRIER_SECONDS


def _seed(url: str, store_path: Path) -> None:
    """One authorization (the only one of the test), its token left in the file."""
    auth = OAuth(client_name="shared", redirect="headless", store=FileTokenStore(store_path))
    with mcpsync.Session.connect(url, auth=auth) as s:
        assert s.call_tool("echo", {"message": "seed"}).content[0].text == "seed"


def _drive_rounds(auth_server: FamilyAuthorizationServer, barrier: Any, rounds: int) -> None:
    """The test's side of the rounds: start an epoch, let everyone call, wait for them."""
    barrier.wait(BARRIER)  # everyone connected with the seeded token (epoch 0)
    for _ in range(rounds):
        auth_server.expire()
        barrier.wait(BARRIER)
        barrier.wait(BARRIER)


def _collect(results: Any, n: int, seconds: float) -> list[tuple[str, int, list[str]]]:
    """Up to ``n`` thread results, waiting at most ``seconds`` in all."""
    got: list[tuple[str, int, list[str]]] = []
    deadline = time.monotonic() + seconds
    while len(got) < n:
        try:
            got.append(results.get(timeout=max(0.0, deadline - time.monotonic())))
        except queue.Empty:
            break
    return got


def _check(results: list[tuple[str, int, list[str]]], counts: dict[str, Any], *, workers: int,
           rounds: int, calls: int, auth_server: FamilyAuthorizationServer) -> None:  # fmt: skip
    errors = [f"{name}: {e}" for name, _, errs in results for e in errs]
    seen = f"AS counts {counts}; {len(results)} of {workers} threads reported"
    assert not errors, seen + "\n" + "\n".join(errors[:10])
    assert len(results) == workers, seen
    assert all(ok == rounds * calls for _, ok, _ in results), (seen, results)
    # exactly one refresh per expiry, no rotated refresh token sent again, no family revoked
    assert counts["refreshes"] == dict.fromkeys(range(1, rounds + 1), 1), seen
    assert counts["reuses"] == 0 and counts["revoked_families"] == 0, seen
    assert auth_server.stats()["authorizations"] == 1, seen  # nobody authorized again


def test_threads_of_one_process_refresh_once_per_expiry(tmp_path: Path, no_leaks: None) -> None:
    threads, rounds, calls = 8, 4, 2
    store = tmp_path / "tokens.json"
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        _seed(server.url, store)
        barrier = threading.Barrier(threads + 1)
        results: queue.Queue[tuple[str, int, list[str]]] = queue.Queue()
        runner = threading.Thread(
            target=shared_store_worker.run,
            args=(0, server.url, str(store), threads, rounds, calls, barrier, results),
        )
        runner.start()
        try:
            _drive_rounds(auth_server, barrier, rounds)
        except threading.BrokenBarrierError:
            pass  # a thread failed or stalled: the reports say which (checked below)
        except BaseException:
            barrier.abort()  # a thread still waiting ends now
            raise
        finally:
            runner.join(BARRIER)
        got = _collect(results, threads, 1.0)
        assert not runner.is_alive()
        _check(got, auth_server.counts(), workers=threads, rounds=rounds, calls=calls,
               auth_server=auth_server)  # fmt: skip


def test_threads_sharing_one_keyring_service_refresh_once_per_expiry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """The keyring store: 8 threads, each its own ``KeyringTokenStore`` over one backend;
    its lock file is in the per-user folder (0700, 0600)."""
    pytest.importorskip("keyring")
    from keyring.backend import KeyringBackend

    from mcpsync.auth.keyring_store import KeyringTokenStore

    class DictKeyring(KeyringBackend):
        priority = 1  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.data: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.data.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.data[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.data.pop((service, username), None)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    ring = DictKeyring()
    threads, rounds, calls = 8, 3, 2
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        seed = OAuth(client_name="shared", redirect="headless",
                     store=KeyringTokenStore("shared-test", backend=ring))  # fmt: skip
        with mcpsync.Session.connect(server.url, auth=seed) as s:
            assert s.call_tool("echo", {"message": "seed"}).content[0].text == "seed"
        barrier = threading.Barrier(threads + 1)
        results: queue.Queue[tuple[str, int, list[str]]] = queue.Queue()
        runner = threading.Thread(
            target=shared_store_worker.run,
            args=(0, server.url, lambda: KeyringTokenStore("shared-test", backend=ring),
                  threads, rounds, calls, barrier, results),
        )  # fmt: skip
        runner.start()
        try:
            _drive_rounds(auth_server, barrier, rounds)
        except threading.BrokenBarrierError:
            pass  # a thread failed or stalled: the reports say which (checked below)
        except BaseException:
            barrier.abort()
            raise
        finally:
            runner.join(BARRIER)
        got = _collect(results, threads, 1.0)
        _check(got, auth_server.counts(), workers=threads, rounds=rounds, calls=calls,
               auth_server=auth_server)  # fmt: skip
    folder = tmp_path / "xdg" / "mcpsync"
    (lock,) = folder.glob("keyring-*.lock")
    assert os.stat(folder).st_mode & 0o777 == 0o700 and os.stat(lock).st_mode & 0o777 == 0o600


@pytest.fixture
def resource_tracker() -> None:
    """multiprocessing's resource tracker, started before ``no_leaks`` looks: it is the
    interpreter's helper (for the barrier's semaphores), lives until exit, and is not ours."""
    from multiprocessing import resource_tracker as tracker

    tracker.ensure_running()


def test_8_threads_x_4_processes_share_one_token_file_one_refresh_per_expiry(
    tmp_path: Path, resource_tracker: None, no_leaks: None
) -> None:
    processes, threads, rounds, calls = 4, 8, 3, 2
    store = tmp_path / "tokens.json"
    ctx = multiprocessing.get_context("spawn")
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        _seed(server.url, store)
        barrier = ctx.Barrier(processes * threads + 1)
        results = ctx.Queue()
        procs = [
            ctx.Process(
                target=shared_store_worker.run,
                args=(i, server.url, str(store), threads, rounds, calls, barrier, results),
                name=f"token-store-worker-{i}",
            )
            for i in range(processes)
        ]
        for p in procs:
            p.start()
        try:
            try:
                _drive_rounds(auth_server, barrier, rounds)
            except threading.BrokenBarrierError:
                pass  # a worker failed or stalled: the reports say which (checked below)
            got = _collect(results, processes * threads, BARRIER)
        except BaseException:
            barrier.abort()  # a worker still waiting ends now
            raise
        finally:
            for p in procs:
                p.join(BARRIER)
            alive = [p for p in procs if p.is_alive()]
            for p in alive:
                p.kill()
                p.join(5)
            results.close()
            results.join_thread()
        _check(got, auth_server.counts(), workers=processes * threads, rounds=rounds,
               calls=calls, auth_server=auth_server)  # fmt: skip
        assert not alive and all(p.exitcode == 0 for p in procs)


def test_dask_workers_in_2_processes_share_one_token_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaks: None
) -> None:
    """A ``LocalCluster`` with 2 worker processes (4 threads each): every task a fresh
    ``OAuth`` over the one file; one refresh per expiry across both processes."""
    distributed = pytest.importorskip("dask.distributed")
    rounds, tasks = 3, 8
    store = tmp_path / "tokens.json"
    tests_dir = str(Path(__file__).resolve().parents[1])  # the workers import auth_peers from here
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))
    )
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        _seed(server.url, store)
        with (
            distributed.LocalCluster(
                n_workers=2, processes=True, threads_per_worker=4, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            assert len(set(client.run(os.getpid).values())) == 2  # two worker processes
            for r in range(1, rounds + 1):
                auth_server.expire()
                futures = [
                    client.submit(
                        shared_store_worker.one_call,
                        server.url,
                        str(store),
                        f"r{r}-{i}",
                        pure=False,
                    )  # fmt: skip
                    for i in range(tasks)
                ]
                distributed.wait(futures, timeout=BARRIER)
                assert client.gather(futures) == [f"r{r}-{i}" for i in range(tasks)]
        counts = auth_server.counts()
        assert counts["refreshes"] == dict.fromkeys(range(1, rounds + 1), 1), counts
        assert counts["reuses"] == 0 and counts["revoked_families"] == 0, counts
        assert auth_server.stats()["authorizations"] == 1


def test_a_token_about_to_expire_is_refreshed_once_for_8_threads(
    tmp_path: Path, no_leaks: None
) -> None:
    """The path before a request (a stored token within ``refresh_skew`` of its expiry),
    not the 401 one: 8 threads with their own ``OAuth`` start at once; one refreshes, the
    others take its token from the store. The expiry is written into the file (no clock)."""
    store_path = tmp_path / "tokens.json"
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        _seed(server.url, store_path)
        data = json.loads(store_path.read_text())
        (token_key,) = (k for k in data if k.startswith("token "))
        data[token_key]["expires_at"] = time.time() + 5  # within the 60 s skew
        store_path.write_text(json.dumps(data))
        start = threading.Barrier(8)
        outcome: list[str] = []

        def one(i: int) -> None:
            auth = OAuth(client_name="shared", redirect=shared_store_worker._never_authorize,
                         store=FileTokenStore(store_path))  # fmt: skip
            try:
                start.wait(BARRIER)
                with mcpsync.Session.connect(server.url, auth=auth, connect_timeout=60) as s:
                    outcome.append(s.call_tool("echo", {"message": f"t{i}"}).content[0].text)
            except Exception as exc:  # noqa: BLE001 - reported below
                outcome.append(f"{type(exc).__name__}: {exc}")

        workers = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(BARRIER)
        assert sorted(outcome) == sorted(f"t{i}" for i in range(8))
        counts = auth_server.counts()
        assert counts["refreshes"] == {0: 1}, counts  # epoch 0: no 401 drove it
        assert counts["reuses"] == 0 and counts["revoked_families"] == 0, counts
        assert json.loads(store_path.read_text())[token_key]["expires_at"] > time.time() + 600


def test_a_refresh_token_used_by_a_process_without_the_lock_falls_back_to_its_token(
    tmp_path: Path, no_leaks: None
) -> None:
    """Another program (no lock) refreshes first and stores its token; our refresh with
    the refresh token it rotated gets invalid_grant: the store is read again and its token
    used, so the call succeeds without a new authorization."""
    store_path = tmp_path / "tokens.json"
    with serve(revoke_on_reuse=False) as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        auth = OAuth(client_name="shared", redirect="headless", store=FileTokenStore(store_path))
        with mcpsync.Session.connect(server.url, auth=auth) as s:
            assert s.call_tool("echo", {"message": "one"}).content[0].text == "one"
            data = json.loads(store_path.read_text())
            (client,) = (v for k, v in data.items() if k.startswith("client "))
            (token_key,) = (k for k in data if k.startswith("token "))
            other: dict[str, Any] = {}

            def another_program_refreshes_first(refresh_token: str) -> None:
                form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
                secret = client.get("client_secret")
                if secret is None:  # a public client (token_endpoint_auth_method "none")
                    form["client_id"] = client["client_id"]
                r = requests.post(
                    f"{server.origin}/token",
                    data=form,
                    auth=(client["client_id"], secret) if secret is not None else None,
                    timeout=10,
                )
                other.update(r.json())
                # written the way a program without the lock would: straight over the file
                now = json.loads(store_path.read_text())
                now[token_key].update(
                    access_token=other["access_token"], refresh_token=other["refresh_token"]
                )
                tmp = store_path.with_suffix(".other")
                tmp.write_text(json.dumps(now))
                os.chmod(tmp, 0o600)
                os.replace(tmp, store_path)

            auth_server.expire()
            auth_server.before_refresh = another_program_refreshes_first
            assert s.call_tool("echo", {"message": "two"}).content[0].text == "two"
        counts = auth_server.counts()
        assert "access_token" in other  # the other program did refresh first
        assert counts["refreshes"] == {1: 1} and counts["refused"] == {"reused": 1}, counts
        assert auth_server.stats()["authorizations"] == 1
        stored = json.loads(store_path.read_text())[token_key]
        assert stored["refresh_token"] == other["refresh_token"]  # not dropped, not replaced


def test_a_rotated_refresh_token_is_never_sent_again_by_a_stale_holder(
    tmp_path: Path, no_leaks: None
) -> None:
    """Two OAuth objects over one file; the first refreshes (rotation); the second, whose
    memory still holds the old token, must take the new one from the store, not send its
    old refresh token (which would revoke the family)."""
    store_path = tmp_path / "tokens.json"
    with serve() as server:
        auth_server = server.auth_server
        assert isinstance(auth_server, FamilyAuthorizationServer)
        _seed(server.url, store_path)
        a = OAuth(client_name="shared", redirect="headless", store=FileTokenStore(store_path))
        b = OAuth(client_name="shared", redirect="headless", store=FileTokenStore(store_path))
        with (
            mcpsync.Session.connect(server.url, auth=a) as sa,
            mcpsync.Session.connect(server.url, auth=b) as sb,
        ):
            for n in range(3):
                auth_server.expire()
                assert sa.call_tool("echo", {"message": f"a{n}"}).content[0].text == f"a{n}"
                assert sb.call_tool("echo", {"message": f"b{n}"}).content[0].text == f"b{n}"
        counts = auth_server.counts()
        assert counts["refreshes"] == {1: 1, 2: 1, 3: 1}, counts
        assert counts["reuses"] == 0 and counts["revoked_families"] == 0
        assert auth_server.stats()["authorizations"] == 1


_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
    """
)


def test_a_lock_held_by_another_process_is_waited_for_within_the_bound(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path / "tokens.json", lock_timeout=0.5)
    store.set("k", {"v": 1})
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(store.path) + ".lock"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        for op in (lambda: store.get("k"), lambda: store.set("k", {"v": 2})):
            started = time.monotonic()
            with pytest.raises(LockTimeout) as info:
                op()
            elapsed = time.monotonic() - started
            assert 0.5 <= elapsed < 0.5 + 0.5, elapsed
            assert str(store.path) + ".lock" in str(info.value)
            assert info.value.path == str(store.path) + ".lock" and info.value.timeout == 0.5
        with pytest.raises(LockTimeout):
            with store.locked(timeout=0.2):
                pass
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(10)
        assert holder.stdout is not None
        holder.stdout.close()
    assert store.get("k") == {"v": 1}  # the lock is free again: nothing was written


def test_a_lock_held_by_another_thread_is_waited_for_within_the_bound(tmp_path: Path) -> None:
    """Threads of one process (separate store objects over one file) wait on the thread
    lock, bounded too; the holder itself re-enters without waiting."""
    path = tmp_path / "tokens.json"
    holder_store = FileTokenStore(path)
    waiter_store = FileTokenStore(path, lock_timeout=0.3)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder_store.locked():
            holder_store.set("k", {"v": 1})  # re-entered: no wait
            assert holder_store.get("k") == {"v": 1}
            taken.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert taken.wait(10)
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="tokens.json.lock"):
            waiter_store.get("k")
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 0.3 + 0.5, elapsed
    finally:
        release.set()
        t.join(10)
    assert waiter_store.get("k") == {"v": 1}


def test_the_keyring_store_lock_wait_is_bounded_and_names_its_lock_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("keyring")
    from keyring.backends import null

    from mcpsync.auth.keyring_store import KeyringTokenStore

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    holder = KeyringTokenStore("svc", backend=null.Keyring())
    waiter = KeyringTokenStore("svc", backend=null.Keyring(), lock_timeout=0.3)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with holder.locked():
            taken.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert taken.wait(10)
        started = time.monotonic()
        with pytest.raises(LockTimeout) as info:
            with waiter.locked():
                pass
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 0.3 + 0.5, elapsed
        assert str(tmp_path / "xdg" / "mcpsync" / "keyring-") in str(info.value)
    finally:
        release.set()
        t.join(10)
    with waiter.locked():  # free again
        pass
