"""Helpers for the adapter tests: a strict TypedDict checker and scripted servers.

``fits(value, SomeParam)`` checks a plain dict against a provider SDK's TypedDict the
way the SDK's type checker would: no unknown keys, every ``Required`` key present,
literals, unions and nested TypedDicts followed; then pydantic validates it too.
``app_server(tools)`` is a FakeServer offering ``tools`` that records every tools/call.
"""

from __future__ import annotations

import collections.abc
import threading
import types
import typing
from typing import Any

import typing_extensions
from fakes import FakeServer
from pydantic import TypeAdapter

_WRAPPERS = {typing_extensions.Required, typing_extensions.NotRequired}
for _name in ("Required", "NotRequired", "ReadOnly"):
    for _mod in (typing, typing_extensions):
        if hasattr(_mod, _name):
            _WRAPPERS.add(getattr(_mod, _name))


_REQUIRED = {typing_extensions.Required} | (
    {typing.Required} if hasattr(typing, "Required") else set()
)


class Misfit(AssertionError):
    pass


def _check(value: Any, tp: Any, path: str) -> None:
    if tp is Any or tp is object:
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in _WRAPPERS or origin is typing.Annotated:
        return _check(value, args[0], path)
    if isinstance(tp, typing.TypeAliasType if hasattr(typing, "TypeAliasType") else ()):
        return _check(value, tp.__value__, path)
    if origin is typing.Union or origin is types.UnionType:
        errors = []
        for option in args:
            try:
                _check(value, option, path)
                return
            except Misfit as exc:
                errors.append(str(exc))
        raise Misfit(f"{path}: fits none of the union: {errors}")
    if origin is typing.Literal or origin is typing_extensions.Literal:
        if value not in args:
            raise Misfit(f"{path}: {value!r} not one of {args}")
        return
    if typing_extensions.is_typeddict(tp):
        if not isinstance(value, dict):
            raise Misfit(f"{path}: expected a dict for {tp.__name__}, got {type(value).__name__}")
        hints = typing.get_type_hints(tp, include_extras=True)
        extra = set(value) - set(hints)
        if extra:
            raise Misfit(f"{path}: keys {sorted(extra)} not in {tp.__name__}")
        required = {
            k
            for k, h in hints.items()
            if typing.get_origin(h) in _REQUIRED
            or (tp.__total__ and typing.get_origin(h) not in _WRAPPERS - _REQUIRED)
        }
        missing = (required | set(tp.__required_keys__)) - set(value)
        if missing:
            raise Misfit(f"{path}: {tp.__name__} needs {sorted(missing)}")
        for key, item in value.items():
            _check(item, hints[key], f"{path}.{key}")
        return
    if tp is type(None):
        if value is not None:
            raise Misfit(f"{path}: expected None")
        return
    if origin in (dict, collections.abc.Mapping) or tp in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            raise Misfit(f"{path}: expected a dict")
        return
    if origin is not None and isinstance(origin, type) and issubclass(origin, str):
        origin = None
    if origin is not None and (
        origin in (list, tuple, collections.abc.Iterable, collections.abc.Sequence)
        or getattr(origin, "__name__", "") == "SequenceNotStr"
    ):
        if not isinstance(value, list | tuple):
            raise Misfit(f"{path}: expected a list, got {type(value).__name__}")
        for i, item in enumerate(value):
            _check(item, args[0] if args else Any, f"{path}[{i}]")
        return
    if tp is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise Misfit(f"{path}: expected a number")
        return
    if tp in (str, int, bool, bytes):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise Misfit(f"{path}: expected {tp.__name__}, got {type(value).__name__}")
        return
    try:
        TypeAdapter(tp).validate_python(value)
    except Exception as exc:  # noqa: BLE001 - any validation failure is a misfit
        raise Misfit(f"{path}: {exc}") from None


def fits(value: Any, tp: Any) -> Any:
    """Assert ``value`` is exactly a ``tp`` (a TypedDict or a union of them); return it."""
    _check(value, tp, "$")
    TypeAdapter(tp).validate_python(value)
    return value


def app_server(tools: list[dict[str, Any]], results: dict[str, Any] | None = None) -> FakeServer:
    """A FakeServer listing ``tools``; tools/call answers ``results[name]`` (or echoes the
    arguments as text) and is recorded in ``server.calls``."""
    results = results or {}
    calls: list[dict[str, Any]] = []
    lock = threading.Lock()

    def call(message: dict[str, Any]) -> Any:
        params = message["params"]
        with lock:
            calls.append(params)
        answer = results.get(params["name"])
        if callable(answer):
            return answer(params)
        if answer is not None:
            return answer
        import json

        return {"content": [{"type": "text", "text": json.dumps(params.get("arguments") or {})}]}

    server = FakeServer(
        handlers={"tools/list": lambda m: {"tools": tools}, "tools/call": call},
    )
    server.calls = calls  # type: ignore[attr-defined]
    return server
