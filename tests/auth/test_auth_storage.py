"""Token stores: protocol, 0600 file, atomic rewrite, no secrets in errors or repr."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from mcpsync.auth import FileTokenStore, MemoryTokenStore, TokenStore
from mcpsync.errors import ConfigError


@pytest.mark.parametrize(
    "make", [lambda p: MemoryTokenStore(), lambda p: FileTokenStore(p / "t.json")]
)
def test_protocol_roundtrip(tmp_path, make):
    store = make(tmp_path)
    assert isinstance(store, TokenStore)
    assert store.get("k") is None
    store.set("k", {"access_token": "A", "n": [1, 2]})
    v = store.get("k")
    assert v == {"access_token": "A", "n": [1, 2]}
    v["access_token"] = "changed"  # callers get copies
    assert store.get("k")["access_token"] == "A"
    store.delete("k")
    store.delete("k")  # idempotent
    assert store.get("k") is None


def test_file_store_permissions_and_persistence(tmp_path):
    path = tmp_path / "deep" / "dir" / "tokens.json"
    FileTokenStore(path).set("token https://as https://rs", {"access_token": "SECRET-A"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert FileTokenStore(path).get("token https://as https://rs") == {"access_token": "SECRET-A"}
    assert [
        p.name for p in path.parent.iterdir() if p.name.startswith(".tokens-")
    ] == []  # no temp files left


def test_file_store_tightens_loose_permissions(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{}")
    os.chmod(path, 0o644)
    FileTokenStore(path).set("k", {"v": 1})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_file_store_expands_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    s = FileTokenStore("~/.cache/mcpsync/tokens.json")
    s.set("k", {"v": 1})
    assert (tmp_path / ".cache" / "mcpsync" / "tokens.json").exists()


def test_corrupt_file_error_does_not_echo_content(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text('{"k": {"access_token": "SECRET-XYZ"')  # truncated JSON
    with pytest.raises(ConfigError) as ei:
        FileTokenStore(path).get("k")
    assert "SECRET-XYZ" not in str(ei.value)


def test_repr_shows_no_values(tmp_path):
    m = MemoryTokenStore()
    m.set("k", {"access_token": "SECRET-M"})
    f = FileTokenStore(tmp_path / "t.json")
    f.set("k", {"access_token": "SECRET-F"})
    assert "SECRET" not in repr(m) and "SECRET" not in repr(f)


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "t.json"
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            s = FileTokenStore(path)  # separate instances: the file lock must serialize them
            for j in range(10):
                s.set(f"k{i}-{j}", {"v": j})
        except BaseException as exc:  # noqa: BLE001  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,), name=f"test-store-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(FileTokenStore(path).keys()) == 40
