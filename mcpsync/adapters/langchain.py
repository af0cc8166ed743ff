"""MCP tools as LangChain ``StructuredTool`` objects (the optional ``langchain`` extra).

Owns: one ``StructuredTool`` per tool, with a real synchronous ``func`` (a blocking
``call_tool`` on the owning session) and an async ``coroutine`` that runs the same
blocking call in a worker thread (``asyncio.to_thread``), so an event loop is never
blocked. ``args_schema`` is the tool's JSON Schema. The tool answers in LangChain's
``content_and_artifact`` form: the content is the text (or, with images, a list of
standard ``text`` / ``image`` blocks), the artifact the ``CallToolResult``. A result with
``isError`` raises ``ToolException``, which ``handle_tool_error=True`` turns into the
text the model reads.

``langchain-core`` is imported on first use; without it a ``ConfigError`` says which
extra to install.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ConfigError, MCPSyncError
from ._core import OPENAI_NAMES, Entry, Outcome, object_schema, parts_of, provider_names, toolset

__all__ = ["to_langchain"]


def _import() -> Any:
    try:
        from langchain_core import tools
    except ImportError as exc:
        raise ConfigError(
            "to_langchain needs langchain-core: pip install 'mcpsync[langchain]'"
        ) from exc
    return tools


def _content(outcome: Outcome) -> Any:
    images = [p for p in outcome.parts if p.kind == "image" and p.data]
    text = outcome.text()
    if not images:
        return text
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "image", "base64": p.data, "mime_type": p.mime} for p in images]
    return blocks


def _make(tools_mod: Any, name: str, entry: Entry, timeout: float | None) -> Any:
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}

    def func(**kwargs: Any) -> tuple[Any, Any]:
        try:
            result = entry.session().call_tool(entry.tool_name, kwargs, **options)
        except MCPSyncError as exc:  # the model reads it (handle_tool_error)
            raise tools_mod.ToolException(f"{type(exc).__name__}: {exc}") from exc
        outcome = parts_of(result)
        if outcome.is_error:
            raise tools_mod.ToolException(outcome.text())
        return _content(outcome), result

    async def coroutine(**kwargs: Any) -> tuple[Any, Any]:
        return await asyncio.to_thread(func, **kwargs)

    func.__name__ = coroutine.__name__ = name
    return tools_mod.StructuredTool(
        name=name,
        description=entry.description or name,
        args_schema=object_schema(entry.input_schema),
        func=func,
        coroutine=coroutine,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata={"mcp_tool": entry.tool_name, "mcp_server": entry.server},
    )


def to_langchain(source: Any, *, timeout: float | None = None, **filters: Any) -> list[Any]:
    """``StructuredTool``s for a ``Session``, a ``Host`` or a ``ToolSet``.

    ``filters`` as ``ToolFilter`` and ``qualified``; ``timeout`` per call (default: the
    session's). Names follow OpenAI's rule (the strictest of the providers LangChain
    forwards to), mapped reversibly.
    """
    tools_mod = _import()
    tools = toolset(source, **filters)
    return [
        _make(tools_mod, name, entry, timeout)
        for name, entry in provider_names(tools.entries(), OPENAI_NAMES).items()
    ]
