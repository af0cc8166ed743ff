"""Typed results: the official ``mcp_types`` wire models, imported on first use.

Owns: ``types()`` (the ``mcp_types`` module, imported plainly the first time it is needed),
``validate(model, data)`` with one cached validator per model (content blocks tagged by
their ``type``), typed request handlers for the user's sampling/elicitation callbacks, and
the ``outputSchema`` check (``jsonschema``, imported on first use). Nothing here knows
sessions or eras.

Cold start. ``import mcp_types`` is an ordinary import: it loads pydantic and creates and
builds all of its models. Nothing here touches the import system or pydantic: no entry in
``sys.modules`` is written, no attribute of another library rebound, nothing written to or
read from a file. What moves is only *when* the import happens:
``prefetch()`` starts it in a background thread (``mcpsync-typed[import]``, once per
process) as ``Session.connect`` begins, so it overlaps the server's start-up; the thread
then builds the commonest first result's validator (``WARM_MODELS``) and ends. A thread that
needs the module meanwhile simply imports it: Python's import lock makes it wait for the
import under way. ``warm()``, called right after the handshake, waits for the prefetch
(bounded), so ``connect`` returns with no prefetch thread left and a Ctrl-C in the main
thread never lands in the middle of the import. A fork waits for the import first
(``os.register_at_fork``), so a child never inherits a module lock held by a thread it does
not have. ``warm_schema()`` imports ``jsonschema`` when a tool list first declares an
``outputSchema`` (before any check).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import jsonrpc
from .errors import ProtocolError, RequestTimeout, ServerError

__all__ = [
    "types",
    "validate",
    "prefetch",
    "warm",
    "typed_handler",
    "check_schema",
    "tool_result",
    "plain_tool_result",
    "roots_result",
]

#: bound on waiting for the prefetch thread (its import takes ~0.15 s on an idle machine)
IMPORT_WAIT = 60.0

_module: Any = None  # mcp_types, once imported
_prefetch_lock = threading.Lock()
_prefetcher: threading.Thread | None = None


def types() -> Any:
    """The ``mcp_types`` module (a plain import the first time; another thread importing it
    meanwhile is waited for by Python's own import lock)."""
    global _module
    if _module is None:
        import mcp_types

        jsonrpc.use_fast_codec()  # pydantic is loaded now: the wire codec may use it
        _module = mcp_types
    return _module


def prefetch() -> None:
    """Import ``mcp_types`` and build the common validator in a background thread, once
    per process (``Session.connect`` calls this before it starts the server)."""
    global _prefetcher
    if _module is not None or _prefetcher is not None:
        return
    with _prefetch_lock:
        if _prefetcher is not None:
            return
        thread = threading.Thread(target=_prefetch_run, name="mcpsync-typed[import]")
        if sys.platform != "win32":  # no fork on Windows
            os.register_at_fork(before=_await_prefetch)
        thread.start()
        _prefetcher = thread  # after start(): another thread may join it as soon as it sees it


def _prefetch_run() -> None:
    try:
        _build_warm()
    except Exception:  # noqa: BLE001 - warm() in the connecting thread redoes it and raises
        pass


def _await_prefetch() -> None:
    thread = _prefetcher
    if thread is not None and thread is not threading.current_thread():
        thread.join(IMPORT_WAIT)


_validators: dict[str, Callable[[Any], Any]] = {}  # model name -> its validator
_build_lock = threading.RLock()  # builds one validator at a time (pydantic's lazy builds)


def _validator(model_name: str) -> Callable[[Any], Any]:
    model = getattr(types(), model_name)
    if not _build_lock.acquire(timeout=IMPORT_WAIT):
        raise RequestTimeout(f"building the {model_name} validator took over {IMPORT_WAIT:g} s")
    try:
        found = _validators.get(model_name)
        if found is None:
            found = _tagged_content(model) or model.__pydantic_validator__.validate_python
            _validators[model_name] = found
    finally:
        _build_lock.release()
    return found


def validate(model_name: str, data: Any) -> Any:
    """``data`` as the ``mcp_types`` model ``model_name`` (ProtocolError if it does not fit)."""
    validate = _validators.get(model_name) or _validator(model_name)
    try:
        return validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ProtocolError(f"server sent an invalid {model_name}: {exc}") from None


#: built by the prefetch: the commonest first result (its tagged content validator is
#: mcpsync's own ``TypeAdapter``, built on first use). The other validators are built on
#: first use; bring-up keeps the server's info and capabilities as the wire's dicts
WARM_MODELS = ("CallToolResult",)
_warmed = threading.Event()


def _build_warm() -> None:
    for name in WARM_MODELS:
        if name not in _validators:
            _validator(name)
    # one conversion: pydantic's first-use work for a validation happens here
    validate("CallToolResult", {"content": [{"type": "text", "text": ""}]})
    _warmed.set()


def _fresh_locks_in_child() -> None:
    """After ``os.fork()``: a lock held by a parent thread at the fork (building a validator,
    importing) would be held for ever in the child, whose threads are its own: fresh ones."""
    global _prefetch_lock, _build_lock
    _prefetch_lock, _build_lock = threading.Lock(), threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_fresh_locks_in_child)


def warm() -> None:
    """``mcp_types`` imported and the validators of ``WARM_MODELS`` built: by the prefetch
    thread if it runs (waited for, bounded), else here. Cheap once done."""
    if _warmed.is_set():
        return
    thread = _prefetcher
    if thread is not None and thread is not threading.current_thread():
        thread.join(IMPORT_WAIT)
    if not _warmed.is_set():  # no prefetch, or it failed: do it here (errors surface)
        _build_warm()


_schema_warmed = threading.Event()


def schema_warm() -> bool:
    """True once ``warm_schema()`` has run."""
    return _schema_warmed.is_set()


def warm_schema() -> None:
    """Import ``jsonschema`` for the ``outputSchema`` check (0.05 s the first time, more on
    a busy machine): done in the caller's thread when ``list_tools()`` first returns a tool
    with an output schema, before a result can need it."""
    import jsonschema

    jsonschema.validate({}, {"type": "object"})
    _schema_warmed.set()


def _tagged_content(model: Any) -> Callable[[Any], Any] | None:
    """A faster validator for a model with a ``content: list[<content block union>]`` field.

    ``mcp_types`` declares the content-block union without a discriminator, so pydantic
    tries every member for every block (measured: 4.6 us for a one-block CallToolResult,
    20 us for five). Here the blocks are validated first through the same union tagged by
    their ``type``; the model then receives ready instances, which it accepts as they are
    (2.6 us and 4.5 us). The result is the same plain ``mcp_types`` model. None when the
    model has no such field, or the union cannot be tagged.
    """
    parts = _tagged_parts(model)
    if parts is None:
        return None
    blocks, whole = parts

    def validate(data: Any) -> Any:
        if type(data) is dict and type(data.get("content")) is list:
            try:
                return whole({**data, "content": blocks(data["content"])})
            except ValueError:
                pass  # invalid: let the model itself say where (content.0.text, ...)
        return whole(data)

    return validate


_parts: dict[Any, tuple[Callable[[Any], Any], Callable[[Any], Any]] | None] = {}


def _tagged_parts(model: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]] | None:
    """``(blocks, whole)`` for ``_tagged_content``: the tagged content-list validator and the
    model's own; None when the model has no such field or its union cannot be tagged."""
    if model in _parts:
        return _parts[model]
    import typing

    from pydantic import Field, TypeAdapter

    found: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None
    field = model.model_fields.get("content")
    if field is not None and typing.get_origin(field.annotation) is list:
        (union,) = typing.get_args(field.annotation)
        try:
            adapter = TypeAdapter(list[typing.Annotated[union, Field(discriminator="type")]])  # type: ignore[valid-type]
            # the core validators: one Python frame less each
            found = (
                adapter.validator.validate_python,
                model.__pydantic_validator__.validate_python,
            )
        except Exception:  # noqa: BLE001 - a member without a literal "type": keep pydantic's way
            found = None
    _parts[model] = found
    return found


def typed_handler(handler: Callable[[Any], Any], model: str) -> Callable[[dict[str, Any]], Any]:
    """Give a user's handler the typed params; it may return a model or a dict."""

    def run(params: dict[str, Any]) -> Any:
        from pydantic import TypeAdapter, ValidationError

        target = getattr(types(), model)
        try:
            typed = TypeAdapter(target).validate_python(params)
        except ValidationError as exc:
            raise ServerError(-32602, f"invalid params: {exc}") from None
        return handler(typed)

    return run


def check_schema(instance: Any, schema: dict[str, Any], what: str) -> None:
    import jsonschema  # imported on first use: ~0.15 s

    try:
        jsonschema.validate(instance, schema)
    except jsonschema.ValidationError as exc:
        raise ProtocolError(f"{what} does not match its outputSchema: {exc.message}") from None
    except jsonschema.SchemaError as exc:
        raise ProtocolError(
            f"{what}: the tool's outputSchema is not a valid JSON Schema: {exc.message}"
        ) from None


#: ``(blocks, whole)`` of ``CallToolResult`` once built (``_tagged_parts``), for the hot path
_tool_parts: tuple[Callable[[Any], Any] | None, Callable[[Any], Any]] | None = None


def _build_tool_parts() -> tuple[Callable[[Any], Any] | None, Callable[[Any], Any]]:
    global _tool_parts
    _validator("CallToolResult")  # built under the build lock (and _tagged_parts with it)
    model = types().CallToolResult
    parts = _parts.get(model)
    _tool_parts = (
        parts if parts is not None else (None, model.__pydantic_validator__.validate_python)
    )
    return _tool_parts


def plain_tool_result(raw: Any) -> Any:
    """A ``CallToolResult`` of a tool without an ``outputSchema`` (the hot path).

    What ``validate("CallToolResult", raw)`` does, with two frames and a dict copy less:
    ``raw`` is the decoded result of one call, converted once, so its content list is
    replaced in place by the validated blocks (put back if the model then refuses it, so
    the error names the wire's values)."""
    blocks, whole = _tool_parts or _build_tool_parts()
    try:
        if blocks is not None and type(raw) is dict:
            content = raw.get("content")
            if type(content) is list:
                try:
                    raw["content"] = blocks(content)
                except ValueError:
                    return whole(raw)  # invalid: the model itself says where (content.0.text)
                try:
                    return whole(raw)
                except ValueError:
                    raw["content"] = content  # so the error below names the wire's values
        return whole(raw)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ProtocolError(f"server sent an invalid CallToolResult: {exc}") from None


def tool_result(tool: Any, raw: Any) -> Any:
    """A ``CallToolResult``; checked against the tool's ``outputSchema`` when it has one."""
    result = plain_tool_result(raw)
    if tool is None or not tool.output_schema or result.is_error:
        return result
    if result.structured_content is None:
        raise ProtocolError(
            f"tool {tool.name!r} declares an outputSchema but returned no structuredContent"
        )
    where = f"structured result of tool {tool.name!r}"
    check_schema(result.structured_content, tool.output_schema, where)
    return result


def roots_result(roots: Any) -> dict[str, Any]:
    """A ``roots/list`` result from the roots given (URIs, dicts or ``Root`` models)."""
    out = []
    for root in roots or ():
        if isinstance(root, str):
            root = {"uri": root}
        elif hasattr(root, "model_dump"):
            root = root.model_dump(by_alias=True, exclude_none=True, mode="json")
        out.append(root)
    return {"roots": out}
