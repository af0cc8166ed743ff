"""Importing ``mcp_types`` at the least cost a cold start can pay.

Owns: ``import_types()``: ``mcp_types`` loaded by ``_lazyexec`` (each model class created
on the first use of a name that needs it: a session's first result needs ~15 of its ~155),
under ``lean_import()``, the context ``_typed`` imports it in (in the prefetch thread, or
the first thread that needs a typed result). Its three parts leave the models,
their validation and pydantic's behaviour as they are: only *when* work is done moves, or
work whose outcome is known already is skipped. A part whose pydantic or Python layout is
not the one it expects is left out (the import then costs what it costs without it).

- ``deferred_builds()``: pydantic's ``defer_build`` for the threads inside the block (the
  importing one, and whichever runs ``mcp_types``' statements later), so each of its
  models is built on its first validation (a session builds only
  the model graphs its results need).
- ``metadata_later()``: ``pydantic.networks`` (``mcp_types`` needs it for ``FileUrl``)
  runs ``from importlib.metadata import version`` at import, for a check made when an
  ``EmailStr`` is first used, and pydantic's plugin loader imports ``entry_points`` from
  it; ``importlib.metadata`` and what it imports (``email``, ``zipfile``, ``csv``,
  ``importlib.resources``...) cost ~11 ms of a ~150 ms cold start. While the import runs,
  ``importlib.metadata`` is a stand-in module whose ``version`` and ``entry_points``
  import the real module when called; any other attribute imports it at once (so another
  thread that imports it meanwhile gets a module that works). The stand-in leaves
  ``sys.modules`` as the block ends.
- ``settle_plugins()``, run at the end of the block: pydantic looks for plugins (the
  ``pydantic`` entry-point group) when it builds its first validator, with
  ``importlib.metadata.entry_points()``, which reads every installed distribution's
  metadata (7-18 ms with the ~200 distributions of this project's environment). The same
  answer is found here by reading only the ``entry_points.txt`` files of the
  ``*.dist-info`` / ``*.egg-info`` folders on ``sys.path`` (~1 ms); when none declares a
  ``[pydantic]`` group, pydantic's plugin cache is given the empty result it would have
  computed. Anything else leaves pydantic to look itself: a plugin installed, a
  ``sys.path`` entry that is a zip or an egg, a finder on ``sys.meta_path`` that finds
  distributions its own way, ``PYDANTIC_DISABLE_PLUGINS`` set, a plugin search already
  made.

Measured with ``benchmarks/coldstart.py`` (figures in ``benchmarks/README.md``).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import _lazyexec

__all__ = ["import_types", "lean_import", "deferred_builds", "metadata_later", "settle_plugins"]

#: loaded by ``_lazyexec`` (their statements run on first use of a name): the package, which
#: re-exports the names of ``_types``, and ``_types``, which defines the models
LAZY_MODULES = ("mcp_types", "mcp_types._types")


def import_types(first: Sequence[str] = ()) -> Any:
    """``mcp_types``, imported under ``lean_import()``; the names ``first`` bound in it.

    Its package and ``_types`` module are loaded by ``_lazyexec`` when their sources are
    ones it can split (each model class is then created on the first use of a name that
    needs it); otherwise, or when either is imported already, it is a plain import.
    """
    with lean_import():
        module = _lazy_types()
        if module is None:
            import mcp_types as module
        for name in first:
            getattr(module, name)  # bound while importlib.metadata is stood in for
    return module


def _lazy_types() -> Any:
    """The package loaded by ``_lazyexec``, and its ``_types`` (``None``: import as usual).
    Should ``_types`` not load so, the package's statements import it as usual."""
    if any(name in sys.modules for name in LAZY_MODULES):
        return None  # imported already: the module everyone has is the one to use
    package = _lazyexec.load(LAZY_MODULES[0], around=deferred_builds)
    if package is not None:
        for name in LAZY_MODULES[1:]:
            _lazyexec.load(name, around=deferred_builds)
    return package


@contextlib.contextmanager
def lean_import() -> Iterator[None]:
    """The three parts around one import of ``mcp_types`` (and of pydantic, if not loaded)."""
    with metadata_later():
        with deferred_builds():
            yield
        settle_plugins()  # inside the stand-in: the plugin loader binds its entry_points


class _StandIn(types.ModuleType):
    """``importlib.metadata`` until someone needs more of it than two functions.

    It has the real package's ``__path__``, so a submodule (``importlib.metadata._meta``)
    imports as usual; other dunder names are missing, as on a plain module, so that the
    import system's own look-ups (``__spec__``, ``__file__``...) do not import the module.
    """

    def __init__(self, load: Callable[[], types.ModuleType], path: str) -> None:
        super().__init__("importlib.metadata")
        self.__path__ = [path]
        self._load = load

        def version(distribution_name: str) -> str:
            """``importlib.metadata.version`` (imported on the first call)."""
            return load().version(distribution_name)  # type: ignore[no-any-return]

        def entry_points(**params: Any) -> Any:
            """``importlib.metadata.entry_points`` (imported on the first call)."""
            return load().entry_points(**params)

        self.version = version
        self.entry_points = entry_points

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(self._load(), name)


@contextlib.contextmanager
def metadata_later() -> Iterator[None]:
    """``importlib.metadata`` stood in for while the block runs (see the docstring)."""
    name = "importlib.metadata"
    parent = sys.modules["importlib"]
    path = os.path.join(parent.__path__[0], "metadata")
    if name in sys.modules or "metadata" in vars(parent) or not os.path.isdir(path):
        yield  # imported already (nothing to save), or a layout this does not know
        return
    lock = threading.Lock()

    def load() -> types.ModuleType:
        with lock:
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
                if vars(parent).get("metadata") is stand_in:
                    delattr(parent, "metadata")
        import importlib.metadata as real

        return real

    stand_in = _StandIn(load, path)
    sys.modules[name] = stand_in
    parent.metadata = stand_in  # type: ignore[attr-defined]
    try:
        yield
    finally:
        with lock:
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
            if vars(parent).get("metadata") is stand_in:
                delattr(parent, "metadata")


_deferring: dict[int, int] = {}  # thread ident -> depth of its deferred_builds() blocks
_hooks_lock = threading.Lock()
_unhook: list[Callable[[], None]] = []  # takes the hooks away (while any thread defers)


@contextlib.contextmanager
def deferred_builds() -> Iterator[None]:
    """pydantic's ``defer_build`` for every model and TypeAdapter this thread creates.

    Three pydantic 2 hooks: ``ConfigWrapper.defer_build`` (read by the model metaclass),
    ``TypeAdapter._defer_build``, and ``BaseModel.model_rebuild`` (``mcp_types`` rebuilds
    a few models at import to resolve forward references, and pydantic rebuilds a generic
    model each time it is parametrized: in a deferring thread an unforced rebuild of a
    model not built yet is skipped, as pydantic resolves the same module-level names when
    it builds the model on first use). All are consulted by thread: other threads keep
    their own configuration meanwhile. Blocks nest, and several threads may defer at once
    (the lazily run statements of ``mcp_types`` defer in whichever thread runs them): the
    hooks are put in place by the first block and taken away by the last. Without the
    hooks nothing is changed.
    """
    ident = threading.get_ident()
    with _hooks_lock:
        if not _deferring:
            unhook = _hook()
            if unhook is None:  # another pydantic: build as usual
                ident = 0
            else:
                _unhook.append(unhook)
        if ident:
            _deferring[ident] = _deferring.get(ident, 0) + 1
    try:
        yield
    finally:
        if ident:
            with _hooks_lock:
                depth = _deferring.pop(ident) - 1
                if depth:
                    _deferring[ident] = depth
                elif not _deferring:
                    _unhook.pop()()


def _hook() -> Callable[[], None] | None:
    """The hooks put in place (see ``deferred_builds``); returns what takes them away."""
    try:
        from pydantic import BaseModel, type_adapter
        from pydantic._internal import _config

        wrapper: Any = _config.ConfigWrapper
        adapter: Any = type_adapter.TypeAdapter
        adapter_defer = adapter.__dict__["_defer_build"]
        adapter_getter = adapter_defer.fget if isinstance(adapter_defer, property) else None
        rebuild = BaseModel.__dict__["model_rebuild"]
        if (
            adapter_getter is None
            or "defer_build" in wrapper.__dict__
            or not isinstance(rebuild, classmethod)
        ):
            raise LookupError("unknown pydantic layout")
        wrapper_getattr = wrapper.__getattr__
    except (ImportError, LookupError, AttributeError):
        return None
    rebuild_func = rebuild.__func__
    deferring = _deferring

    def model_rebuild(
        cls: Any,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Any = None,
    ) -> bool | None:
        if not force and threading.get_ident() in deferring and not cls.__pydantic_complete__:
            return None  # built on first use instead
        return rebuild_func(  # type: ignore[no-any-return]
            cls,
            force=force,
            raise_errors=raise_errors,
            _parent_namespace_depth=_parent_namespace_depth + 1,  # this frame
            _types_namespace=_types_namespace,
        )

    def config_defer(self: Any) -> Any:
        if threading.get_ident() in deferring:
            return True
        return wrapper_getattr(self, "defer_build")

    def type_adapter_defer(self: Any) -> Any:
        return True if threading.get_ident() in deferring else adapter_getter(self)

    wrapper.defer_build = property(config_defer)
    adapter._defer_build = property(type_adapter_defer)
    BaseModel.model_rebuild = classmethod(model_rebuild)  # type: ignore[method-assign,assignment]

    def unhook() -> None:
        del wrapper.defer_build
        adapter._defer_build = adapter_defer
        BaseModel.model_rebuild = rebuild  # type: ignore[method-assign,assignment]

    return unhook


def settle_plugins() -> None:
    """Give pydantic its plugin search's empty result when no plugin is installed (see the
    module docstring); otherwise leave the search to pydantic."""
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") is not None:
        return  # pydantic reads it at every build: leave the answer to it
    try:
        from pydantic.plugin import _loader
    except ImportError:
        return
    if vars(_loader).get("_plugins", False) is not None or _loader._loading_plugins:
        return  # looked already (or a layout this does not know)
    if not _only_path_finders() or _any_pydantic_entry_point(sys.path):
        return
    _loader._plugins = {}


def _only_path_finders() -> bool:
    """True when the only finder on ``sys.meta_path`` that finds distributions is the
    standard path finder (whose search ``_any_pydantic_entry_point`` repeats)."""
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder:
            continue
        if "find_distributions" in dir(finder):
            return False
    return True


def _any_pydantic_entry_point(path: list[str]) -> bool:
    """True when a distribution on ``path`` declares a ``pydantic`` entry point, or when the
    answer cannot be told by reading folders (an entry that is a zip or an egg)."""
    for entry in path:
        folder = entry or "."
        if folder.lower().endswith(".egg"):
            return True  # an egg's metadata sits in its EGG-INFO: leave it to importlib
        try:
            names = os.listdir(folder)
        except NotADirectoryError:
            return True  # a zip: leave it to importlib.metadata
        except OSError:
            continue  # missing or unreadable: importlib.metadata finds nothing there either
        for name in names:
            low = name.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as f:
                    text = f.read()
            except (FileNotFoundError, NotADirectoryError):
                continue  # no entry points (or an egg-info file)
            except OSError:
                return True  # unreadable here: let pydantic see for itself
            if _declares_group(text, b"pydantic"):
                return True
    return False


def _declares_group(text: bytes, group: bytes) -> bool:
    """True when the ini-style ``text`` may have a ``[group]`` section: importlib.metadata
    names a section by its stripped line with the brackets stripped; spaces around the
    name are also taken as the group here (a false "yes" only costs pydantic's search)."""
    if group not in text:
        return False
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(b"[") and line.endswith(b"]") and line.strip(b"[]").strip() == group:
            return True
    return False
