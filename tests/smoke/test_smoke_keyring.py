"""``mcpsync smoke --keyring``: the workers keep OAuth tokens in the system keyring.

The workers get a ``TokenStoreSpec`` (plain data) and open the keyring in their own
process. Against the bundled demo OAuth server (``DemoHTTPServer(auth=True)``, client
credentials): a token obtained once is reused by every entry and every worker, in threads
(keyring's in-process backend set to an in-memory one, as ``tests/auth/test_auth_store_cli.py``
does) and in worker processes (``--executor process``: spawned processes find their
backend through ``PYTHON_KEYRING_BACKEND``, here a file-backed one, so the processes
share it). The authorization server counts the token requests; nothing lands in the file
store. Errors: no keyring package, no keyring backend, ``--no-store``/``--token-store``
given too.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

keyring = pytest.importorskip("keyring")
from keyring.backend import KeyringBackend  # noqa: E402
from keyring.errors import PasswordDeleteError  # noqa: E402

import mcpsync  # noqa: E402
from mcpsync import cli  # noqa: E402
from mcpsync.auth import OAuth, TokenStoreSpec  # noqa: E402
from mcpsync.auth.keyring_store import KeyringTokenStore  # noqa: E402
from mcpsync.auth.storage import FileTokenStore, MemoryTokenStore  # noqa: E402
from mcpsync.demo_server.http import DemoHTTPServer  # noqa: E402
from mcpsync.errors import ConfigError  # noqa: E402

SECRET = "svc-SECRET-k3y"
HERE = Path(__file__).resolve().parent  # processes import the FileKeyring backend from here
ENTRIES = ("a", "b", "c")


class DictKeyring(KeyringBackend):
    """An in-memory keyring backend (this process only)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.entries.pop((service, username), None) is None:
            raise PasswordDeleteError("no such entry")


class FileKeyring(KeyringBackend):
    """A keyring backend in the JSON file ``$MCPSYNC_TEST_KEYRING`` (shared by processes;
    what ``PYTHON_KEYRING_BACKEND=test_smoke_keyring.FileKeyring`` makes every process use)."""

    priority = 1  # type: ignore[assignment]

    @property
    def path(self) -> Path:
        return Path(os.environ["MCPSYNC_TEST_KEYRING"])

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, str]]:
        import fcntl

        with open(str(self.path) + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = json.loads(self.path.read_text()) if self.path.exists() else {}
            before = dict(data)
            yield data
            if data != before:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(data))
                os.replace(tmp, self.path)

    def get_password(self, service: str, username: str) -> str | None:
        with self._locked() as data:
            return data.get(f"{service} {username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        with self._locked() as data:
            data[f"{service} {username}"] = password

    def delete_password(self, service: str, username: str) -> None:
        with self._locked() as data:
            if data.pop(f"{service} {username}", None) is None:
                raise PasswordDeleteError("no such entry")


@pytest.fixture
def ring() -> Iterator[DictKeyring]:
    saved = keyring.get_keyring()
    backend = DictKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(saved)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No file store of the user's is touched: the cache directory is the test's."""
    monkeypatch.delenv("MCPSYNC_TOKEN_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SVC_SECRET", SECRET)
    return tmp_path


def write_config(home: Path, url: str) -> Path:
    """Three HTTP entries for the one demo server, each authorizing as client ``svc``."""
    auth = {"grant": "client_credentials", "client_id": "svc", "client_secret": "${env:SVC_SECRET}"}
    servers = {name: {"type": "http", "url": url, "auth": auth} for name in ENTRIES}
    path = home / "mcp.json"
    path.write_text(json.dumps({"servers": servers}))
    return path


def token_requests(server: DemoHTTPServer) -> int:
    assert server.auth_server is not None
    return int(server.auth_server.stats()["tokens"]["client_credentials"])


def smoke_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = cli.main(
        ["smoke", *args, "--call", "echo", "--args", '{"message": "k"}', "--json", "-q"]
    )
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else out.err


def all_ok(report: Any) -> bool:
    servers = report["servers"]
    return [s["name"] for s in servers] == list(ENTRIES) and all(
        s["ok"] and s["call"]["ok"] for s in servers
    )


# -- threads: keyring's in-memory backend -------------------------------------------------------


def test_smoke_keyring_in_threads_reuses_one_token(ring, home, capsys, no_leaks):
    with DemoHTTPServer(auth=True, clients={"svc": SECRET}) as server:
        config = str(write_config(home, server.url))
        # one at a time: the first entry obtains the token, the others take it from the keyring
        code, report = smoke_in_process(capsys, config, "--keyring", "--parallel", "1")
        assert code == 0 and all_ok(report), report
        assert token_requests(server) == 1
        # all at once: every worker thread finds it there
        code, report = smoke_in_process(capsys, config, "--keyring", "--parallel", "3")
        assert code == 0 and all_ok(report), report
        assert token_requests(server) == 1
        names = {user for service, user in ring.entries if service == "mcpsync"}
        assert f"token {server.origin} {server.url} svc" in names
    assert not (home / "cache" / "mcpsync").exists()  # nothing in the file store
    assert all(SECRET not in value for value in ring.entries.values())


# -- worker processes: a backend each spawned process finds by itself -------------------------------


def test_smoke_keyring_in_worker_processes_reuses_one_token(home, tmp_path, no_leaks):
    shared = tmp_path / "keyring.json"
    env = {
        **os.environ,
        "PYTHON_KEYRING_BACKEND": "test_smoke_keyring.FileKeyring",
        "MCPSYNC_TEST_KEYRING": str(shared),
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }

    def smoke(*args: str) -> tuple[int, Any]:
        argv = [sys.executable, "-m", "mcpsync", "smoke", *args, "--keyring"]
        argv += ["--executor", "process", "--call", "echo", "--args", '{"message": "k"}']
        p = subprocess.run(
            [*argv, "--json", "-q"], env=env, capture_output=True, text=True, timeout=120
        )
        return p.returncode, json.loads(p.stdout) if p.stdout.strip() else p.stderr

    with DemoHTTPServer(auth=True, clients={"svc": SECRET}) as server:
        config = str(write_config(home, server.url))
        code, report = smoke(config, "--parallel", "1")  # one worker obtains and stores it
        assert code == 0 and all_ok(report), report
        assert token_requests(server) == 1
        assert f"mcpsync token {server.origin} {server.url} svc" in json.loads(shared.read_text())
        # three worker processes: each opens the keyring and finds it
        code, report = smoke(config, "--parallel", "3")
        assert code == 0 and all_ok(report), report
        assert token_requests(server) == 1
    assert not (home / "cache" / "mcpsync").exists()
    assert SECRET not in shared.read_text()


def test_smoke_keyring_on_dask_workers_reuses_one_token(ring, home, tmp_path, capsys, monkeypatch):
    """``--dask``: the spec travels to the worker processes of a LocalCluster, each opens the
    keyring its environment names (the command itself checks the in-process one). A Dask
    executor takes every entry at once (``--parallel`` bounds only the local pools), so the
    token is obtained here first, into the keyring file the workers use."""
    distributed = pytest.importorskip("distributed")
    shared = tmp_path / "keyring.json"
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "test_smoke_keyring.FileKeyring")
    monkeypatch.setenv("MCPSYNC_TEST_KEYRING", str(shared))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    with (
        DemoHTTPServer(auth=True, clients={"svc": SECRET}) as server,
        distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=2, dashboard_address=None
        ) as cluster,
    ):
        store = KeyringTokenStore(backend=FileKeyring())
        auth = OAuth.client_credentials("svc", SECRET, store=store)
        with mcpsync.Session.connect(server.url, auth=auth, timeout=30) as s:
            assert s.call_tool("echo", {"message": "here"}).content[0].text == "here"
        assert token_requests(server) == 1
        assert f"mcpsync token {server.origin} {server.url} svc" in json.loads(shared.read_text())
        config = str(write_config(home, server.url))
        for _ in range(2):
            code, report = smoke_in_process(
                capsys, config, "--keyring", "--dask", cluster.scheduler_address
            )
            assert code == 0 and all_ok(report), report
            assert token_requests(server) == 1
    assert not ring.entries  # the workers' keyring, not this process's
    assert not (home / "cache" / "mcpsync").exists()


# -- the spec itself ------------------------------------------------------------------------------


def test_a_store_spec_is_plain_data_opened_where_it_is_used(ring, tmp_path):
    spec = TokenStoreSpec.keyring("svc-app")
    assert pickle.loads(pickle.dumps(spec)) == spec
    store = spec.open()
    assert isinstance(store, KeyringTokenStore) and store.service == "svc-app"
    store.set("k", {"v": 1})
    assert ring.entries == {("svc-app", "k"): '{"v": 1}'}
    file_spec = pickle.loads(pickle.dumps(TokenStoreSpec.file(tmp_path / "t.json")))
    opened = file_spec.open()
    assert isinstance(opened, FileTokenStore) and opened.path == tmp_path / "t.json"
    assert isinstance(TokenStoreSpec("memory").open(), MemoryTokenStore)
    with pytest.raises(ConfigError, match="expected file, keyring or memory"):
        TokenStoreSpec("vault")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs a path"):
        TokenStoreSpec("file")


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("other", [["--no-store"], ["--token-store", "t.json"]])
def test_smoke_keyring_contradicts_the_other_stores(ring, home, capsys, other):
    config = write_config(home, "https://example.com/mcp")
    assert cli.main(["smoke", str(config), "--keyring", *other]) == 2
    assert f"{other[0]} and --keyring contradict" in capsys.readouterr().err


def test_smoke_keyring_without_the_package_names_the_install(home, capsys, monkeypatch):
    config = write_config(home, "https://example.com/mcp")
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring -> ImportError
    assert cli.main(["smoke", str(config), "--keyring"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'mcpsync[keyring]'" in err and "--keyring" in err


def test_smoke_keyring_without_a_backend_says_so(home, capsys):
    from keyring.backends import fail

    config = write_config(home, "https://example.com/mcp")
    saved = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        assert cli.main(["smoke", str(config), "--keyring"]) == 2
    finally:
        keyring.set_keyring(saved)
    assert "no system keyring is available" in capsys.readouterr().err


def test_smoke_keyring_is_not_opened_when_no_entry_uses_oauth(home, capsys, monkeypatch):
    """Only stdio entries: the keyring (missing here) is never needed, the run goes on."""
    from servers.launch import demo_argv

    argv = demo_argv()
    config = home / "mcp.json"
    config.write_text(json.dumps({"servers": {"local": {"command": argv[0], "args": argv[1:]}}}))
    monkeypatch.setitem(sys.modules, "keyring", None)
    code = cli.main(["smoke", str(config), "--keyring", "--json", "-q"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["servers"][0]["ok"]
