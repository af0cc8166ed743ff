"""Typed results: the official ``mcp_types`` wire models, imported on first use.

Owns: ``types()`` (the lazily imported ``mcp_types`` module: ~0.2 s of pydantic model
building, paid only when a typed result is needed), ``validate(model, data)`` with one
cached validator per model (content blocks tagged by their ``type``), typed request
handlers for the user's sampling/elicitation callbacks, and the ``outputSchema`` check
(``jsonschema``, imported on first use). Nothing here knows sessions or eras.

``warm()`` does the ``mcp_types`` import and builds the common validators up front, once per
process: ``Session.connect`` calls it right after the handshake, so a Ctrl-C during the
first typed result never interrupts an import half-done (another thread converting its own
result would then wait on Python's import locks). ``warm_schema()`` does the same for
``jsonschema`` when a tool list first declares an ``outputSchema`` (before any check).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import ProtocolError, ServerError

__all__ = [
    "types",
    "validate",
    "warm",
    "typed_handler",
    "check_schema",
    "tool_result",
    "roots_result",
]


def types() -> Any:
    import mcp_types  # ~0.2 s of pydantic model building: only when a typed result is needed

    return mcp_types


_validators: dict[str, Callable[[Any], Any]] = {}  # model name -> its pydantic validator


def _validator(model_name: str) -> Callable[[Any], Any]:
    model = getattr(types(), model_name)
    validate = _validators[model_name] = (
        _tagged_content(model) or model.__pydantic_validator__.validate_python
    )
    return validate


def validate(model_name: str, data: Any) -> Any:
    """``data`` as the ``mcp_types`` model ``model_name`` (ProtocolError if it does not fit)."""
    validate = _validators.get(model_name) or _validator(model_name)
    try:
        return validate(data)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise ProtocolError(f"server sent an invalid {model_name}: {exc}") from None


#: the results every session may convert: their validators are built by ``warm()``
WARM_MODELS = ("Implementation", "ServerCapabilities", "CallToolResult", "ReadResourceResult",
               "GetPromptResult", "CompleteResult", "LoggingMessageNotificationParams")  # fmt: skip
_warmed = False


def warm() -> None:
    """Import ``mcp_types`` (with pydantic) and build the validators of ``WARM_MODELS`` now;
    cheap once done (about 0.15 s the first time in a process)."""
    global _warmed
    if _warmed:
        return
    for name in WARM_MODELS:
        if name not in _validators:
            _validator(name)
    # one conversion of each kind a session makes: pydantic's first-use work happens here
    validate("CallToolResult", {"content": [{"type": "text", "text": ""}]})
    types().Tool.model_validate({"name": "warm", "inputSchema": {"type": "object"}})
    _warmed = True


def warm_schema() -> None:
    """Import ``jsonschema`` for the ``outputSchema`` check (about 0.05 s the first time):
    done when a tool list declares an output schema, before a result can need it."""
    import jsonschema

    jsonschema.validate({}, {"type": "object"})


def _tagged_content(model: Any) -> Callable[[Any], Any] | None:
    """A faster validator for a model with a ``content: list[<content block union>]`` field.

    ``mcp_types`` declares the content-block union without a discriminator, so pydantic
    tries every member for every block (measured: 4.6 us for a one-block CallToolResult,
    20 us for five). Here the blocks are validated first through the same union tagged by
    their ``type``; the model then receives ready instances, which it accepts as they are
    (2.6 us and 4.5 us). The result is the same plain ``mcp_types`` model. None when the
    model has no such field, or the union cannot be tagged.
    """
    import typing

    from pydantic import Field, TypeAdapter

    field = model.model_fields.get("content")
    if field is None or typing.get_origin(field.annotation) is not list:
        return None
    (union,) = typing.get_args(field.annotation)
    try:
        adapter = TypeAdapter(list[typing.Annotated[union, Field(discriminator="type")]])  # type: ignore[valid-type]
        blocks = adapter.validator.validate_python  # the core validator: one Python frame less
    except Exception:  # noqa: BLE001 - a member without a literal "type": keep pydantic's way
        return None
    whole = model.__pydantic_validator__.validate_python

    def validate(data: Any) -> Any:
        if type(data) is dict and type(data.get("content")) is list:
            try:
                return whole({**data, "content": blocks(data["content"])})
            except ValueError:
                pass  # invalid: let the model itself say where (content.0.text, ...)
        return whole(data)

    return validate


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


def tool_result(tool: Any, raw: Any) -> Any:
    """A ``CallToolResult``; checked against the tool's ``outputSchema`` when it has one."""
    result = validate("CallToolResult", raw)
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
