"""The folders and files mcpsync keeps per-user data in (issue 31, point 9).

Folders are made 0700 whatever the umask and refused (UnsafePathError, nothing read or
written) when another user owns them or group/others can write them; the token file and
its ``.lock`` are never opened through a symbolic link (the link's target is untouched).
Driven through the public store API (``FileTokenStore``, ``default_store_path``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mcpsync.auth import FileTokenStore
from mcpsync.auth.storage import default_store_path
from mcpsync.errors import ConfigError, MCPSyncError, UnsafePathError

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX modes and owners")

ENTRY = {"access_token": "A", "refresh_token": "R"}


def mode(p: Path | str) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """XDG_CACHE_HOME in a folder that does not exist yet (made by the store)."""
    monkeypatch.delenv("MCPSYNC_TOKEN_STORE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg"


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o002, 0o077], ids=oct)
def test_the_per_user_folder_and_token_files_are_private_whatever_the_umask(
    cache_home: Path, mask: int
) -> None:
    with umask(mask):
        store = FileTokenStore(default_store_path())
        store.set("k", ENTRY)
        assert store.get("k") == ENTRY
    folder = cache_home / "mcpsync"
    assert store.path == folder / "tokens.json"
    assert mode(cache_home) == 0o700  # a missing parent made too, as private
    assert mode(folder) == 0o700
    assert mode(folder / "tokens.json") == 0o600
    assert mode(folder / "tokens.json.lock") == 0o600


def test_a_custom_token_file_gets_a_private_folder(tmp_path: Path) -> None:
    with umask(0):
        store = FileTokenStore(tmp_path / "a" / "b" / "tokens.json")
        store.set("k", ENTRY)
    assert mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
    assert mode(tmp_path / "a" / "b" / "tokens.json") == 0o600


def _unsafe_folder_case(folder: Path) -> tuple[FileTokenStore, bytes]:
    """A store in ``folder`` that already holds a token file; returns it and the bytes."""
    folder.mkdir(mode=0o700)
    data = json.dumps({"k": ENTRY}).encode()
    (folder / "tokens.json").write_bytes(data)
    os.chmod(folder / "tokens.json", 0o600)
    return FileTokenStore(folder / "tokens.json"), data


def _assert_refused_and_untouched(store: FileTokenStore, data: bytes, why: str) -> None:
    folder = store.path.parent
    before = sorted(os.listdir(folder))
    for op in (
        lambda: store.get("k"),
        lambda: store.set("k", {"access_token": "NEW"}),
        lambda: store.delete("k"),
        lambda: store.keys(),
    ):
        with pytest.raises(UnsafePathError) as info:
            op()
        err = info.value
        assert isinstance(err, MCPSyncError) and isinstance(err, ConfigError)
        assert str(folder) in str(err) and why in str(err)
        assert "A" not in err.reason and "nothing was read or written" in str(err)
    assert sorted(os.listdir(folder)) == before  # no .lock, no temporary file
    assert (folder / "tokens.json").read_bytes() == data


@pytest.mark.parametrize("bits", [0o777, 0o770, 0o702], ids=oct)
def test_a_folder_others_can_write_is_refused_nothing_read_or_written(
    tmp_path: Path, bits: int
) -> None:
    store, data = _unsafe_folder_case(tmp_path / "shared")
    os.chmod(tmp_path / "shared", bits)
    _assert_refused_and_untouched(store, data, "group or others can write")
    assert mode(tmp_path / "shared") == bits  # not silently "fixed" either


def test_the_default_folder_pre_existing_0777_is_refused(cache_home: Path) -> None:
    (cache_home / "mcpsync").mkdir(parents=True)
    os.chmod(cache_home / "mcpsync", 0o777)
    store = FileTokenStore(default_store_path())
    with pytest.raises(UnsafePathError, match="mode 0777"):
        store.set("k", ENTRY)
    assert os.listdir(cache_home / "mcpsync") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_folder_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    store, data = _unsafe_folder_case(tmp_path / "theirs")
    os.chown(tmp_path / "theirs", 65534, 65534)
    _assert_refused_and_untouched(store, data, "owned by uid 65534")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_token_file_owned_by_another_user_is_not_read(tmp_path: Path) -> None:
    store, data = _unsafe_folder_case(tmp_path / "mine")
    os.chown(store.path, 65534, 65534)
    with pytest.raises(UnsafePathError, match="owned by uid 65534"):
        store.get("k")
    with pytest.raises(UnsafePathError):
        store.set("k", {"access_token": "NEW"})
    assert store.path.read_bytes() == data


def test_a_symlinked_token_file_is_not_followed_and_its_target_untouched(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"k": {"access_token": "planted"}}))
    os.chmod(target, 0o644)
    before = (target.read_bytes(), mode(target), os.stat(target).st_mtime_ns)
    (folder / "tokens.json").symlink_to(target)
    store = FileTokenStore(folder / "tokens.json")
    for op in (lambda: store.get("k"), lambda: store.set("k", ENTRY), lambda: store.keys()):
        with pytest.raises(UnsafePathError, match="symbolic link") as info:
            op()
        assert str(folder / "tokens.json") in str(info.value)
    assert (folder / "tokens.json").is_symlink()
    assert (target.read_bytes(), mode(target), os.stat(target).st_mtime_ns) == before


def test_a_symlinked_lock_file_is_not_followed_and_its_target_untouched(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o700)
    target = tmp_path / "victim"
    target.write_text("precious\n")
    os.chmod(target, 0o644)
    before = (target.read_bytes(), mode(target), os.stat(target).st_mtime_ns)
    (folder / "tokens.json.lock").symlink_to(target)
    store = FileTokenStore(folder / "tokens.json")
    for op in (lambda: store.get("k"), lambda: store.set("k", ENTRY)):
        with pytest.raises(UnsafePathError, match="symbolic link") as info:
            op()
        assert "tokens.json.lock" in str(info.value)
    assert not (folder / "tokens.json").exists()
    assert (target.read_bytes(), mode(target), os.stat(target).st_mtime_ns) == before
    # a dangling link (target absent) is not created through either
    target.unlink()
    with pytest.raises(UnsafePathError, match="symbolic link"):
        store.set("k", ENTRY)
    assert not target.exists()


def test_an_old_token_file_readable_by_others_is_narrowed_to_0600(tmp_path: Path) -> None:
    store, _ = _unsafe_folder_case(tmp_path / "old")
    os.chmod(store.path, 0o644)
    assert store.get("k") == ENTRY
    assert mode(store.path) == 0o600
