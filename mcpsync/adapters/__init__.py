"""MCP tools in an LLM call: provider tool definitions and the dispatch of the model's calls.

Owns the public entry points; each provider has its own module (``openai``,
``anthropic``, ``gemini``, ``langchain``) over a shared ``_core`` (catalog, names,
schemas, results). No provider SDK is imported: definitions and results are the plain
dicts the SDKs accept (their ``...Param`` TypedDicts, ``google.genai.types`` dicts).

    from mcpsync import adapters
    tools = adapters.to_openai(host)                        # chat.completions tools=
    msg = client.chat.completions.create(..., tools=tools).choices[0].message
    messages += [msg, *adapters.dispatch(host, msg.tool_calls)]

``source`` is a ``Session``, a ``Host`` (its flat namespace; ``qualified=True`` for
``server__tool`` everywhere) or a :class:`ToolSet` (a source plus a filter, shared by the
definitions and the dispatch). ``dispatch(source, call)`` takes one tool call as the SDK
returns it (or its dict) and returns that provider's tool-result item; given a list, or a
whole reply (an OpenAI ``ChatCompletionMessage`` or Responses ``Response``, an Anthropic
``Message``, a google-genai ``GenerateContentResponse`` or ``Content``), it runs every call
concurrently and returns a list in the same order. Items of the list that are not tool calls (text blocks, reasoning items) are
skipped. Whatever the model got wrong (bad JSON, an unknown or hidden tool) and whatever
failed on the way (server error, timeout) comes back as an error result the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..filters import ToolExcluded, ToolFilter
from . import anthropic as _anthropic
from . import gemini as _gemini
from . import openai as _openai
from ._core import (
    ANTHROPIC_NAMES,
    GEMINI_NAMES,
    OPENAI_NAMES,
    Call,
    NameRule,
    ToolSet,
    as_dict,
    run_calls,
    toolset,
)
from .anthropic import to_anthropic
from .gemini import to_gemini
from .openai import to_openai

__all__ = [
    "to_openai",
    "to_anthropic",
    "to_gemini",
    "to_langchain",
    "dispatch",
    "parse_call",
    "ToolSet",
    "ToolFilter",
    "ToolExcluded",
    "tools",
]

_PARSERS = (_openai.parse_call, _anthropic.parse_call, _gemini.parse_call)
_RULES: dict[str, NameRule] = {
    "chat": OPENAI_NAMES,
    "responses": OPENAI_NAMES,
    "anthropic": ANTHROPIC_NAMES,
    "gemini": GEMINI_NAMES,
}
_RESULTS = {
    "chat": _openai.results,
    "responses": _openai.results,
    "anthropic": _anthropic.results,
    "gemini": _gemini.results,
}
_PREPARE = {"chat": _openai.prepare, "responses": _openai.prepare, "gemini": _gemini.prepare}


def tools(source: Any, **filters: Any) -> ToolSet:
    """A :class:`ToolSet`: ``source`` with filter keywords (``include``, ``exclude``,
    ``read_only``, ``destructive``, ``app_only``) and ``qualified``."""
    return toolset(source, **filters)


def to_langchain(source: Any, **options: Any) -> list[Any]:
    """LangChain ``StructuredTool``s (needs the ``langchain`` extra); see ``adapters.langchain``."""
    from .langchain import to_langchain as convert

    return convert(source, **options)


def parse_call(tool_call: Any) -> Call | None:
    """A provider's tool call as a neutral :class:`~mcpsync.adapters._core.Call`; None if
    ``tool_call`` is not a tool call any adapter knows."""
    for parse in _PARSERS:
        call = parse(tool_call)
        if call is not None:
            return call
    return None


def _calls_of(tool_call: Any) -> tuple[list[Any], bool]:
    """The tool calls inside ``tool_call`` and whether one result (not a list) is wanted."""
    if isinstance(tool_call, list | tuple):
        return list(tool_call), False
    if getattr(tool_call, "object", None) == "response":  # an OpenAI Responses Response
        return list(getattr(tool_call, "output", None) or ()), False
    if type(tool_call).__name__ == "GenerateContentResponse":  # google-genai
        return list(getattr(tool_call, "function_calls", None) or ()), False
    if type(tool_call).__name__ == "Content" and hasattr(tool_call, "parts"):  # google-genai
        return list(tool_call.parts or ()), False
    kind = (
        tool_call.get("type")
        if isinstance(tool_call, Mapping)
        else getattr(tool_call, "type", None)
    )
    if kind == "message" and (
        isinstance(tool_call, Mapping) or isinstance(getattr(tool_call, "content", None), list)
    ):  # an Anthropic Message (or a Responses output message: no calls in it)
        content = tool_call.get("content") if isinstance(tool_call, Mapping) else tool_call.content
        return list(content if isinstance(content, list) else ()), False
    if hasattr(tool_call, "tool_calls"):  # an OpenAI ChatCompletionMessage (maybe without calls)
        return list(tool_call.tool_calls or ()), False
    if isinstance(tool_call, Mapping) and "role" in tool_call:  # a message dict
        listed = tool_call.get("tool_calls")
        if listed is None and isinstance(tool_call.get("content"), list):
            listed = tool_call["content"]  # {"role": "assistant", "content": [blocks]}
        return list(listed or ()), False
    return [tool_call], True


def dispatch(source: Any, tool_call: Any, *, timeout: float | None = None, **filters: Any) -> Any:
    """Run the model's tool call(s) on the owning session(s); return the tool result(s).

    One call -> one item: a Chat ``{"role": "tool", ...}`` message, a Responses
    ``function_call_output`` item, an Anthropic ``tool_result`` block or a Gemini
    ``function_response`` part. A list (or a Chat assistant message) -> a list in call
    order, the calls run concurrently (``submit_call_tool``); for Chat, images follow in
    one extra ``user`` message at the end. ``timeout`` per call (default: the session's);
    ``filters`` as for ``to_openai`` (the same filter as the definitions: a hidden tool
    is refused).
    """
    items, single = _calls_of(tool_call)
    calls: list[Call] = []
    for item in items:
        call = parse_call(item)
        if call is None:
            if single:
                raise ConfigError(
                    f"not a tool call: {type(item).__name__} {str(as_dict(item))[:200]}"
                )
            continue  # a text block, a reasoning item ... in a list: not ours to run
        calls.append(call)
    if not calls:
        return []
    kinds = {c.provider for c in calls}
    if len(kinds) > 1:
        raise ConfigError(f"tool calls of several APIs in one turn: {', '.join(sorted(kinds))}")
    (kind,) = kinds
    options = {} if timeout is None else {"timeout": timeout}
    outcomes = run_calls(
        toolset(source, **filters),
        calls,
        _RULES[kind],
        prepare=_PREPARE.get(kind),
        call_options=options,
    )
    return _RESULTS[kind](calls, outcomes, single)
