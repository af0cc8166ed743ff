"""A token store of one's own: ``get``/``set``/``delete`` is all ``OAuth`` needs
(:class:`~mcpsync.auth.storage.TokenStore`); ``locked(timeout)`` is an optional, declared
capability (:class:`~mcpsync.auth.storage.LockableTokenStore`) that ``OAuth`` holds across a
refresh when the store has it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from auth_peers.mock_world import World, post

from mcpsync.auth import OAuth, TokenStore
from mcpsync.auth.storage import LockableTokenStore


class DictStore:
    """A store of one's own, inheriting nothing and without ``locked``."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value

    def delete(self, key: str) -> None:
        self.data.pop(key, None)


class LockingDictStore(DictStore):
    """The same with ``locked``: records each hold and its timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.holds: list[float | None] = []
        self.held = False

    @contextlib.contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        self.holds.append(timeout)
        self.held = True
        try:
            yield
        finally:
            self.held = False


def _grant_types(w: World) -> list[str]:
    return [t["form"]["grant_type"] for t in w.as_.token_requests]


def test_a_store_without_locked_is_a_token_store_and_refreshes(rsps, http):
    store = DictStore()
    assert isinstance(store, TokenStore)
    assert not isinstance(store, LockableTokenStore)
    w = World(rsps)
    w.as_.expires_in = 30  # inside the 60 s refresh window
    auth = OAuth(redirect=w.approve, store=store)
    post(http, auth)
    assert post(http, auth, rid=2).status_code == 200
    assert _grant_types(w) == ["authorization_code", "refresh_token"]
    assert any(k.startswith("token ") for k in store.data)


def test_a_store_with_locked_is_held_across_the_refresh(rsps, http):
    store = LockingDictStore()
    assert isinstance(store, LockableTokenStore)
    w = World(rsps)
    w.as_.expires_in = 30
    auth = OAuth(redirect=w.approve, store=store, timeout=7.0)
    post(http, auth)
    assert store.holds == []  # an authorization does not hold the store
    token_endpoint = w._token
    held_during: list[bool] = []

    def watched(a: Any, req: Any) -> Any:
        held_during.append(store.held)
        return token_endpoint(a, req)

    w._token = watched  # type: ignore[method-assign]
    assert post(http, auth, rid=2).status_code == 200
    assert _grant_types(w) == ["authorization_code", "refresh_token"]
    assert held_during == [True]  # the refresh ran under the hold
    assert store.holds == [2 * 7.0 + 5.0]  # one hold, bounded by what the refresh may take
