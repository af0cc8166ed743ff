"""Tokens that last: the command line's default file store under the user's cache
directory (0600 file, 0700 folder; ``--no-store`` opts out), keys bound to issuer +
resource + client, and ``KeyringTokenStore`` over a keyring backend set up here."""

from __future__ import annotations

import argparse
import io
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpsync
from mcpsync import cli
from mcpsync.auth import FileTokenStore, MemoryTokenStore, OAuth
from mcpsync.auth.storage import default_store_path
from mcpsync.config import parse_entry
from mcpsync.demo_server.http import DemoHTTPServer
from mcpsync.errors import ConfigError

SVC_SECRET = "svc-SECRET-4b1d"
OTHER_SECRET = "other-SECRET-77aa"


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("MCPSYNC_TOKEN_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="the XDG layout")
def test_default_store_path_per_platform(cache_home, monkeypatch):
    assert default_store_path() == cache_home / "mcpsync" / "tokens.json"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # XDG: only absolute paths count
    assert default_store_path() == Path.home() / ".cache" / "mcpsync" / "tokens.json"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_store_path() == Path.home() / ".cache" / "mcpsync" / "tokens.json"
    monkeypatch.setenv("MCPSYNC_TOKEN_STORE", "~/elsewhere.json")
    assert default_store_path() == Path.home() / "elsewhere.json"
    monkeypatch.delenv("MCPSYNC_TOKEN_STORE")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert default_store_path() == Path.home() / "Library" / "Caches" / "mcpsync" / "tokens.json"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", "/appdata/local")
    assert default_store_path() == Path("/appdata/local/mcpsync/Cache/tokens.json")


def _ns(**options: Any) -> argparse.Namespace:
    base = {"oauth": True, "device": False, "no_store": False}
    return argparse.Namespace(**{**base, **options})


def test_cli_keeps_tokens_in_the_cache_file_and_reuses_them(
    cache_home, no_leaks, capsys, monkeypatch
):
    """A token obtained once lands in the per-user file (0600 in a 0700 folder); the next
    ``mcpsync`` run uses it without asking anybody (stdin is closed: a prompt would fail);
    with ``--no-store`` nothing is read or written there."""
    with DemoHTTPServer(auth=True) as server:
        # the first run's OAuth, as the CLI builds it, but approving unattended
        from mcpsync.cli.targets import _auth_factory

        entry = parse_entry("demo", {"url": server.url})
        first = _auth_factory(_ns())(entry)
        assert isinstance(first._store, FileTokenStore)  # the CLI's default store
        assert first._store.path == default_store_path()
        first._redirect_spec = "headless"
        with mcpsync.Session.connect(server.url, auth=first) as s:
            assert s.call_tool("echo", {"message": "one"}).content[0].text == "one"
        path = cache_home / "mcpsync" / "tokens.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        keys = FileTokenStore(path).keys()
        assert any(k.startswith(f"token {server.origin} {server.url} ") for k in keys), keys
        assert server.auth_server is not None
        authorizations = server.auth_server.stats()["authorizations"]

        code = cli.main(["call", server.url, "echo", "message=two", "--oauth"])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert "two" in out.out
        assert server.auth_server.stats()["authorizations"] == authorizations  # none more

        before = path.read_bytes()
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nobody at the terminal
        code = cli.main(["call", server.url, "echo", "message=three", "--oauth", "--no-store"])
        out = capsys.readouterr()
        assert code == 3 and "no authorization response was pasted" in out.err  # asked, nobody
        assert path.read_bytes() == before


def test_no_store_gives_a_memory_store(cache_home):
    entry = parse_entry("demo", {"url": "https://example.com/mcp"})
    from mcpsync.cli.targets import _auth_factory

    auth = _auth_factory(_ns(no_store=True))(entry)
    assert isinstance(auth._store, MemoryTokenStore)
    assert not (cache_home / "mcpsync").exists()


def test_tokens_are_bound_to_the_client(no_leaks, tmp_path):
    """Two pre-registered clients of one server share a store file: each gets and keeps
    its own token; a later process of either finds its own again (no new token)."""
    clients = {"svc": SVC_SECRET, "other": OTHER_SECRET}
    path = tmp_path / "tokens.json"
    with DemoHTTPServer(auth=True, clients=clients) as server:
        assert server.auth_server is not None

        def call(client: str, secret: str) -> OAuth:
            auth = OAuth.client_credentials(client, secret, store=FileTokenStore(path))
            with mcpsync.Session.connect(server.url, auth=auth) as s:
                assert s.call_tool("echo", {"message": client}).content[0].text == client
            return auth

        call("svc", SVC_SECRET)
        call("other", OTHER_SECRET)
        assert server.auth_server.stats()["tokens"]["client_credentials"] == 2
        keys = sorted(k for k in FileTokenStore(path).keys() if k.startswith("token "))
        assert keys == [
            f"token {server.origin} {server.url} other",
            f"token {server.origin} {server.url} svc",
        ]
        call("svc", SVC_SECRET)  # "the next process": a fresh OAuth over the same file
        call("other", OTHER_SECRET)
        assert server.auth_server.stats()["tokens"]["client_credentials"] == 2  # reused
        text = path.read_text()
        assert SVC_SECRET not in text and OTHER_SECRET not in text  # secrets are not stored


# -- keyring ---------------------------------------------------------------------------

keyring = pytest.importorskip("keyring")
from keyring.backend import KeyringBackend  # noqa: E402
from keyring.errors import PasswordDeleteError, PasswordSetError  # noqa: E402

from mcpsync.auth.keyring_store import KeyringTokenStore  # noqa: E402


class DictKeyring(KeyringBackend):
    """An in-memory keyring backend (what the test configures keyring with)."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}
        self.refuse_writes = False

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        if self.refuse_writes:
            raise PasswordSetError("locked")
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.entries:
            raise PasswordDeleteError("no such entry")
        del self.entries[(service, username)]


@pytest.fixture
def ring() -> Any:
    saved = keyring.get_keyring()
    backend = DictKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(saved)


def test_keyring_store_round_trip(ring):
    store = KeyringTokenStore()
    assert store.get("token a b c") is None
    store.set("token a b c", {"access_token": "AT-SECRET", "n": 1})
    assert ring.entries[("mcpsync", "token a b c")]  # in the configured backend
    assert store.get("token a b c") == {"access_token": "AT-SECRET", "n": 1}
    store.delete("token a b c")
    store.delete("token a b c")  # deleting what is not there is fine
    assert store.get("token a b c") is None
    assert "AT-SECRET" not in repr(store)
    ring.entries[("mcpsync", "garbage")] = "not json"
    assert store.get("garbage") is None


def test_keyring_failure_is_a_config_error_without_the_value(ring):
    ring.refuse_writes = True
    with pytest.raises(ConfigError, match=r"keyring \(DictKeyring\): cannot write") as info:
        KeyringTokenStore().set("token a b c", {"access_token": "AT-SECRET"})
    assert "AT-SECRET" not in str(info.value)


def test_oauth_with_a_keyring_store(ring, no_leaks):
    """A token kept in the keyring is used again by a new OAuth object (a new process)."""
    with DemoHTTPServer(auth=True, clients={"svc": SVC_SECRET}) as server:
        assert server.auth_server is not None
        for _ in range(2):
            auth = OAuth.client_credentials("svc", SVC_SECRET, store=KeyringTokenStore())
            with mcpsync.Session.connect(server.url, auth=auth) as s:
                assert s.call_tool("echo", {"message": "k"}).content[0].text == "k"
        assert server.auth_server.stats()["tokens"]["client_credentials"] == 1
        names = {user for service, user in ring.entries if service == "mcpsync"}
        assert f"token {server.origin} {server.url} svc" in names
        assert all(SVC_SECRET not in v for v in ring.entries.values())


def test_keyring_store_with_an_explicit_backend():
    backend = DictKeyring()
    store = KeyringTokenStore("my-app", backend=backend)
    store.set("k", {"v": 1})
    assert backend.entries == {("my-app", "k"): '{"v": 1}'}


# -- the command line's --keyring --------------------------------------------------------


def test_cli_keyring_keeps_tokens_in_the_keyring(ring, cache_home, no_leaks, capsys, monkeypatch):
    """``--keyring``: the token lands in the keyring (not the cache file) and the next run
    uses it without asking anybody."""
    clients = {"svc": SVC_SECRET}
    with DemoHTTPServer(auth=True, clients=clients) as server:
        assert server.auth_server is not None
        config = cache_home.parent / "mcp.json"
        auth = {
            "grant": "client_credentials",
            "client_id": "svc",
            "client_secret": "${env:SVC_SECRET}",
        }
        config.write_text(json.dumps({"servers": {"demo": {"url": server.url, "auth": auth}}}))
        monkeypatch.setenv("SVC_SECRET", SVC_SECRET)
        for word in ("one", "two"):
            code = cli.main(["call", f"{config}:demo", "echo", f"message={word}", "--keyring"])
            out = capsys.readouterr()
            assert code == 0, out.err
            assert word in out.out
        assert server.auth_server.stats()["tokens"]["client_credentials"] == 1  # reused
        names = {user for service, user in ring.entries if service == "mcpsync"}
        assert f"token {server.origin} {server.url} svc" in names
        assert not (cache_home / "mcpsync").exists()  # nothing in the file store
        assert all(SVC_SECRET not in v for v in ring.entries.values())


def test_cli_keyring_and_no_store_contradict(ring, capsys):
    code = cli.main(["tools", "https://example.com/mcp", "--oauth", "--keyring", "--no-store"])
    assert code == 2 and "--no-store and --keyring contradict" in capsys.readouterr().err


def test_cli_keyring_without_the_extra_names_the_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "keyring", None)  # import keyring -> ImportError
    code = cli.main(["tools", "https://example.com/mcp", "--oauth", "--keyring"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'mcpsync[keyring]'" in err and "--keyring" in err


def test_cli_keyring_without_a_backend_says_so(capsys):
    from keyring.backends import fail

    saved = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        code = cli.main(["tools", "https://example.com/mcp", "--oauth", "--keyring"])
    finally:
        keyring.set_keyring(saved)
    err = capsys.readouterr().err
    assert code == 2 and "no system keyring is available" in err


# smoke --keyring (threads and worker processes): tests/smoke/test_smoke_keyring.py


def test_keyring_store_is_made_only_when_oauth_is_needed(monkeypatch):
    from mcpsync.cli.targets import _auth_factory

    monkeypatch.setitem(sys.modules, "keyring", None)
    factory = _auth_factory(_ns(oauth=False, keyring=True))
    assert factory(parse_entry("local", {"command": "srv"})) is None  # no keyring asked
    assert factory(parse_entry("web", {"url": "https://example.com/mcp"})) is None
