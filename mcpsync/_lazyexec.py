"""A module whose top-level statements run when a name they bind is first used.

Owns: ``load(name, around)``, which creates the module ``name`` as the import system would
(its spec, ``__file__``, ``__path__``, in ``sys.modules``) but runs none of its statements
yet; the statement plan (``Plan``) and its cache file. ``_typesimport`` uses it for
``mcp_types`` and ``mcp_types._types``: a plain import creates all of their ~155 pydantic
model classes (~100 ms of a cold start), while a session's first result needs ~15.

How. The source is split into its top-level statements (an import of several names
becomes one statement per name), each compiled on its own, with the file's name, its line
numbers and the module's ``__future__`` flags. For each, the plan keeps the names it binds
and the names it mentions (in its code and in its annotations, quoted ones included). On
the first use of a name not bound yet, the module's ``__getattr__`` runs the statements it
needs: those binding it, then those binding every name they mention, transitively, **in
the file's order**. That is what a plain import does, with the statements nobody needs
left out: each statement still finds every name its own run uses bound already (those are
bound earlier in the file, and are in the set), and a name mentioned only in an
annotation (a forward reference) is bound before any model is built, since pydantic
resolves it from the module's namespace then. A statement that binds nothing (an
``X.model_rebuild()`` call) runs, in its place in the file's order, in the first set after
which every name of the module it mentions is bound (one that mentions none runs at load).

Only a source this can split is loaded so: top-level statements that are imports (no
``*``), assignments to plain names, classes, functions and expressions, each name bound
by one statement. Anything else (an ``if`` or ``try`` at top level, a name bound twice)
makes ``load`` return ``None``, and the caller imports the module as usual.

Cache. Splitting and compiling costs ~25 ms (``ast``), so the plan is kept in a file in
the per-user cache folder (``_cachedir``: ``~/.cache/mcpsync/lazyplan/`` on Linux; not in
an installed package's folder, which ``pip uninstall`` would leave behind), one per
interpreter, module and source path; not written under ``PYTHONDONTWRITEBYTECODE`` (it
holds compiled code). It is written atomically and used only while the source's size and
modification time, the interpreter's bytecode magic and this module's format are the ones
it records; reading it costs ~1 ms. An unwritable folder only means the plan is made again
next time.

Threads. All lazy modules share one re-entrant lock: a name is bound by one thread while
another that needs it waits. ``around`` (a context-manager factory) is entered around each
run, in the running thread (``_typesimport`` defers pydantic's model builds there).

What differs from a plain import: ``vars(module)`` holds the names used so far
(``dir(module)`` lists all of them); the statements of names never used never run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import marshal
import os
import sys
import threading
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ._cachedir import check_private_dir, private_dir, user_cache_dir

__all__ = ["load", "LazyModule", "Plan", "make_plan"]

#: changes whenever the cache file's layout or the plan's meaning changes
FORMAT = 2

#: bound on waiting for another thread's run (one takes milliseconds)
WAIT = 60.0

_lock = threading.RLock()  # one lazy run at a time, in any lazy module
_held_for_fork: list[bool] = []


def _before_fork() -> None:
    _held_for_fork.append(_lock.acquire(timeout=WAIT))


def _after_fork_in_parent() -> None:
    if _held_for_fork.pop():
        _lock.release()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.RLock()  # the parent's is held (by the forking thread) in the copy
    _held_for_fork.clear()


if sys.platform != "win32":  # a fork waits for a run under way, as logging's locks do
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )

Around = Callable[[], AbstractContextManager[Any]]


class Plan:
    """A module's statements: ``codes[i]`` binds ``binds[i]`` and mentions ``mentions[i]``;
    ``eager`` are the indexes run at load (docstrings, ``__future__`` imports)."""

    def __init__(
        self,
        codes: list[types.CodeType],
        binds: list[tuple[str, ...]],
        mentions: list[tuple[str, ...]],
        eager: list[int],
        doc: str | None,
    ) -> None:
        self.codes, self.binds, self.mentions, self.doc = codes, binds, mentions, doc
        self.done = [False] * len(codes)
        self.binder: dict[str, int] = {}  # name -> the statement binding it
        for index, names in enumerate(binds):
            for name in names:
                self.binder[name] = index
        # statements that bind nothing -> the module's names they mention
        self.riders: list[tuple[int, tuple[str, ...]]] = []
        self.eager = sorted(eager)
        for index, names in enumerate(binds):
            if not names and index not in eager:
                of_module = tuple(n for n in mentions[index] if n in self.binder)
                if of_module:
                    self.riders.append((index, of_module))
                else:
                    self.eager.append(index)  # mentions no name of the module: run at load
        self.eager.sort()
        for index in self.eager:
            self.done[index] = True

    def needed(self, name: str) -> list[int]:
        """The statements not run yet that binding ``name`` takes, in the file's order:
        those binding it and every name they mention, transitively, and each statement
        that binds nothing once every module name it mentions is bound."""
        wanted: set[int] = set()
        stack = [name]
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            index = self.binder.get(current)
            if index is not None and index not in wanted and not self.done[index]:
                wanted.add(index)
                stack.extend(self.mentions[index])
        if wanted:
            for index, names in self.riders:
                if not self.done[index] and all(
                    self.done[self.binder[n]] or self.binder[n] in wanted for n in names
                ):
                    wanted.add(index)
        return sorted(wanted)


class LazyModule(types.ModuleType):
    """A module whose names are bound on first use (see the module docstring)."""

    _lazy_plan: Plan
    _lazy_around: Around | None

    def __getattr__(self, name: str) -> Any:
        plan: Plan | None = self.__dict__.get("_lazy_plan")
        if plan is None or name not in plan.binder:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        namespace = self.__dict__
        lock = _lock
        if not lock.acquire(timeout=WAIT):
            raise TimeoutError(f"{self.__name__}.{name}: another thread's run took over {WAIT:g} s")
        try:
            if name not in namespace:
                _run(self, plan, plan.needed(name))
        finally:
            lock.release()
        try:
            return namespace[name]
        except KeyError:  # (bound by a statement that deleted it again)
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:
        plan: Plan | None = self.__dict__.get("_lazy_plan")
        names = set(self.__dict__) | (set(plan.binder) if plan is not None else set())
        return sorted(names - {"_lazy_plan", "_lazy_around"})


def _run(module: LazyModule, plan: Plan, indexes: list[int]) -> None:
    """Run ``indexes`` in order. A statement that raises (an error, or a Ctrl-C landing in
    it) is not marked run: the next use of a name that needs it runs it again, so that
    caller sees the error too, and an interrupted class is made whole (a plain import that
    fails is likewise run again by the next import)."""
    around = module.__dict__.get("_lazy_around")
    namespace = module.__dict__
    with around() if around is not None else contextlib.nullcontext():
        for index in indexes:
            if not plan.done[index]:
                plan.done[index] = True  # (a statement that uses its own name does not loop)
                try:
                    exec(plan.codes[index], namespace)
                except BaseException:
                    plan.done[index] = False
                    raise


def load(name: str, around: Around | None = None) -> LazyModule | None:
    """The module ``name``, created and put in ``sys.modules`` with no statement run
    (``None`` when its source cannot be loaded so, or when another thread imported it
    meanwhile: import it as usual then, which finds that one)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    plan = _cached_plan(name, spec.origin)
    if plan is None:
        return None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = LazyModule
    assert isinstance(module, LazyModule)
    module._lazy_plan = plan
    module._lazy_around = around
    module.__doc__ = plan.doc
    for index in plan.eager:  # docstrings, flags, statements that need no name of the module
        exec(plan.codes[index], module.__dict__)
    if sys.modules.setdefault(name, module) is not module:
        return None  # imported meanwhile: never two copies of one module's classes
    parent, _, child = name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, module)
    return module


# -- the plan and its cache file --------------------------------------------------------


def make_plan(source: str, filename: str) -> Plan | None:
    """Split ``source`` into its statements (``None`` if it has a kind this cannot split)."""
    import __future__

    import ast

    tree = ast.parse(source, filename)
    flags = 0
    statements: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return None
            if node.module == "__future__":
                for alias in node.names:
                    flags |= getattr(__future__, alias.name).compiler_flag
            for alias in node.names:
                one = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
                statements.append(ast.copy_location(one, node))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                statements.append(ast.copy_location(ast.Import(names=[alias]), node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ClassDef, ast.FunctionDef)):
            statements.append(node)
        elif isinstance(node, ast.Expr):
            statements.append(node)
        else:
            return None  # if/try/for/with/del/global... at top level: not split here
    codes: list[types.CodeType] = []
    binds: list[tuple[str, ...]] = []
    mentions: list[tuple[str, ...]] = []
    eager: list[int] = []
    bound: set[str] = set()
    doc = ast.get_docstring(tree, clean=False)
    for index, node in enumerate(statements):
        names = _binds(node)
        if names is None or bound & set(names):
            return None  # a target that is not a plain name, or a name bound twice
        bound.update(names)
        prose = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        # a lone string compiled as a module would be its docstring: a docstring is a no-op
        body = ast.copy_location(ast.Pass(), node) if prose else node
        module = ast.Module(body=[body], type_ignores=[])
        codes.append(compile(module, filename, "exec", flags=flags, dont_inherit=True))
        binds.append(names)
        # ``__all__`` lists names as strings: they are not what its statement needs
        needs = () if prose or names == ("__all__",) else _mentions(node) - set(names)
        mentions.append(tuple(sorted(needs)))
        if prose or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            eager.append(index)  # a docstring (a no-op), a compiler flag's import
    return Plan(codes, binds, mentions, eager, doc)


def _binds(node: Any) -> tuple[str, ...] | None:
    import ast

    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return (node.name,)
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        alias = node.names[0]
        return ((alias.asname or alias.name).partition(".")[0],)
    if isinstance(node, ast.AnnAssign):
        if not isinstance(node.target, ast.Name):
            return None
        return (node.target.id,) if node.value is not None else ()
    if isinstance(node, ast.Assign):
        if not all(isinstance(target, ast.Name) for target in node.targets):
            return None
        return tuple(target.id for target in node.targets)  # type: ignore[attr-defined]
    return ()  # an expression


def _mentions(node: Any) -> set[str]:
    """Every name ``node`` loads, and those of the string annotations and forward
    references in it (a quoted annotation, or a string that is one name)."""
    import ast

    found: set[str] = set()
    for each in ast.walk(node):
        if isinstance(each, ast.Name):
            found.add(each.id)
        elif isinstance(each, ast.Constant) and isinstance(each.value, str):
            text = each.value
            if text.isidentifier():
                found.add(text)
            elif len(text) < 500 and "\n" not in text:
                try:
                    found |= _mentions(ast.parse(text.strip(), mode="eval"))
                except SyntaxError:
                    pass  # prose (a docstring, a description): no names
    return found


def _cache_path(name: str, origin: str) -> str | None:
    """The plan file of module ``name`` loaded from ``origin``: in the per-user cache
    folder (``_cachedir``), one per interpreter, module and source file."""
    import hashlib  # (on a session's cold path anyway: the era cache's keys use it)

    tag = sys.implementation.cache_tag
    if tag is None:
        return None  # an interpreter that keeps no bytecode
    key = hashlib.sha256(origin.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(user_cache_dir(), "lazyplan", f"{name}.{tag}.{key}.bin")


def _cached_plan(name: str, origin: str) -> Plan | None:
    try:
        stat = os.stat(origin)
    except OSError:
        return None
    stamp = (FORMAT, importlib.util.MAGIC_NUMBER, origin, stat.st_size, stat.st_mtime_ns)
    path = _cache_path(name, origin)
    if path is not None:
        try:
            check_private_dir(os.path.dirname(os.path.dirname(path)))  # else: ValueError
            with open(path, "rb") as f:
                kept = marshal.loads(f.read())
            if kept[0] == stamp:
                return Plan(*kept[1:])
        except (OSError, EOFError, ValueError, TypeError, IndexError):
            pass  # missing, partial or of another layout: made again below
    try:
        with open(origin, encoding="utf-8") as f:
            source = f.read()
        plan = make_plan(source, origin)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    if plan is not None and path is not None and not sys.dont_write_bytecode:
        _write(path, (stamp, plan.codes, plan.binds, plan.mentions, plan.eager, plan.doc))
    return plan


def _write(path: str, value: Any) -> None:
    """``value`` marshalled into ``path`` atomically (nothing when the folder is not
    writable: the plan is made again next time)."""
    import tempfile  # (~8 ms of imports a cold start with the file made does without)

    folder = os.path.dirname(path)
    try:
        private_dir(os.path.dirname(folder))  # 0700, or refused (a ValueError)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".lazyplan-")
    except (OSError, ValueError):
        return
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(marshal.dumps(value))
        os.replace(temporary, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(temporary)
