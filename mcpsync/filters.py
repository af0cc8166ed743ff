"""Which tools a session, a host or a model gets to see.

Owns: tool filters. Name globs (``include`` / ``exclude``, ``fnmatch`` style, case
sensitive) are what ``Session.connect(include_tools=, exclude_tools=)``, ``Host`` and the
``includeTools`` / ``excludeTools`` keys of a config entry use: a tool hidden by them is
not listed and calling it raises :class:`ToolExcluded` (nothing is sent). The adapters
(``mcpsync.adapters``) add filters by annotation (``readOnlyHint``, ``destructiveHint``,
with the MCP defaults: not read-only, destructive) and drop tools an MCP Apps server
marks as app-only (``_meta.ui.visibility`` present without ``"model"``).

    from mcpsync.filters import ToolFilter
    f = ToolFilter(include=["get-*", "echo"], exclude=["*-env"], destructive=False)
    [t.name for t in f.apply(session.list_tools())]
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .errors import ConfigError, MCPSyncError

__all__ = [
    "ToolFilter",
    "NameFilter",
    "ToolExcluded",
    "globs",
    "is_read_only",
    "is_destructive",
    "is_model_visible",
    "tool_of",
]

T = TypeVar("T")


class ToolExcluded(MCPSyncError, LookupError):
    """The tool is hidden by this session's (or adapter's) tool filters; nothing was sent."""


def globs(value: Any, what: str = "include_tools") -> tuple[str, ...]:
    """A tuple of glob strings from None, one string, or a sequence of strings (ConfigError else)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence | set | frozenset) or isinstance(value, bytes | Mapping):
        raise ConfigError(f"{what}: expected a glob string or a list of them, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{what}: expected non-empty glob strings, got {item!r}")
        out.append(item)
    return tuple(out)


def _match(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class _Frozen:
    """What ``@dataclass(frozen=True)`` gives a record (equality and hash by value, a repr,
    no assignment, pickling), without its class-creation cost at import (0.3-0.5 ms a class,
    paid on every cold start: ``Session`` imports this module). The fields: ``__slots__``."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Frozen)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__qualname__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), self._values()

    def __setattr__(self, name: str, value: Any) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")


class NameFilter(_Frozen):
    """Include/exclude by tool name. Empty ``include`` means every name; exclude wins."""

    __slots__ = ("include", "exclude")
    include: tuple[str, ...]
    exclude: tuple[str, ...]

    def __init__(self, include: tuple[str, ...] = (), exclude: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "exclude", exclude)

    @classmethod
    def of(cls, include: Any = None, exclude: Any = None) -> NameFilter | None:
        """A filter, or None when both lists are empty (nothing to filter)."""
        inc, exc = globs(include, "include_tools"), globs(exclude, "exclude_tools")
        return cls(inc, exc) if inc or exc else None

    def allows(self, *names: str) -> bool:
        """True if any of ``names`` (bare, exposed, qualified ...) is included and none excluded."""
        names = tuple(n for n in names if n)
        if self.include and not any(_match(n, self.include) for n in names):
            return False
        return not any(_match(n, self.exclude) for n in names)

    def describe(self) -> str:
        parts = []
        if self.include:
            parts.append("include " + ", ".join(self.include))
        if self.exclude:
            parts.append("exclude " + ", ".join(self.exclude))
        return "; ".join(parts)


def tool_of(item: Any) -> Any:
    """The ``mcp_types.Tool`` (or tool dict) inside a ``HostTool``, or the item itself."""
    inner = getattr(item, "tool", None)
    return inner if inner is not None and not isinstance(item, Mapping) else item


def _get(obj: Any, attr: str, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, attr, None)


def _annotation(tool: Any, attr: str, key: str) -> Any:
    return _get(_get(tool_of(tool), "annotations", "annotations"), attr, key)


def is_read_only(tool: Any) -> bool:
    """``annotations.readOnlyHint`` (MCP default: False)."""
    return _annotation(tool, "read_only_hint", "readOnlyHint") is True


def is_destructive(tool: Any) -> bool:
    """Whether the tool may destroy data: MCP says ``destructiveHint`` defaults to True and
    only matters when the tool is not read-only."""
    if is_read_only(tool):
        return False
    return _annotation(tool, "destructive_hint", "destructiveHint") is not False


def is_model_visible(tool: Any) -> bool:
    """False for an MCP Apps tool whose ``_meta.ui.visibility`` lists no ``"model"``."""
    meta = _get(tool_of(tool), "meta", "_meta")
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    if visibility is None:
        return True
    if isinstance(visibility, str):
        visibility = [visibility]
    return isinstance(visibility, list) and "model" in visibility


def _names(item: Any) -> tuple[str, ...]:
    tool = tool_of(item)
    bare = _get(tool, "name", "name") or ""
    if tool is item:
        return (bare,)
    return (getattr(item, "name", "") or "", getattr(item, "qualified", "") or "", bare)


class ToolFilter(_Frozen):
    """What the adapters offer a model.

    ``include`` / ``exclude``: name globs, matched against the exposed name, the qualified
    ``server__tool`` name and the server's own name of the tool (any may match).
    ``read_only``: True keeps only tools with ``readOnlyHint: true``; False only the others.
    ``destructive``: False drops tools that may be destructive (see :func:`is_destructive`);
    True keeps only those. ``app_only``: keep tools an MCP Apps server hides from the model
    (default False: they are not offered).
    """

    __slots__ = ("include", "exclude", "read_only", "destructive", "app_only")
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    read_only: bool | None
    destructive: bool | None
    app_only: bool

    def __init__(
        self,
        include: tuple[str, ...] = (),
        exclude: tuple[str, ...] = (),
        read_only: bool | None = None,
        destructive: bool | None = None,
        app_only: bool = False,
    ) -> None:
        object.__setattr__(self, "include", include)
        object.__setattr__(self, "exclude", exclude)
        object.__setattr__(self, "read_only", read_only)
        object.__setattr__(self, "destructive", destructive)
        object.__setattr__(self, "app_only", app_only)

    @classmethod
    def of(
        cls,
        include: Any = None,
        exclude: Any = None,
        read_only: bool | None = None,
        destructive: bool | None = None,
        app_only: bool = False,
    ) -> ToolFilter:
        return cls(
            globs(include, "include"), globs(exclude, "exclude"), read_only, destructive, app_only
        )

    def allows(self, item: Any) -> bool:
        """Whether a ``Tool``, ``HostTool`` or tool dict passes every rule."""
        if not self.app_only and not is_model_visible(item):
            return False
        if (self.include or self.exclude) and not NameFilter(self.include, self.exclude).allows(
            *_names(item)
        ):
            return False
        if self.read_only is not None and is_read_only(item) != self.read_only:
            return False
        return self.destructive is None or is_destructive(item) == self.destructive

    def why_not(self, item: Any) -> str | None:
        """None if allowed, else a short reason (for the error a model reads)."""
        if not self.app_only and not is_model_visible(item):
            return "it is an app-only tool (not offered to the model)"
        if (self.include or self.exclude) and not NameFilter(self.include, self.exclude).allows(
            *_names(item)
        ):
            return "it is filtered out by name"
        if self.read_only is not None and is_read_only(item) != self.read_only:
            return "it is read-only" if is_read_only(item) else "it is not read-only"
        if self.destructive is not None and is_destructive(item) != self.destructive:
            return "it may be destructive" if is_destructive(item) else "it is not destructive"
        return None

    def apply(self, items: Iterable[T]) -> list[T]:
        """The items that pass, in order."""
        return [item for item in items if self.allows(item)]
