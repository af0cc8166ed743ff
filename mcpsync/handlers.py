"""Ready-made handlers for the reverse calls a server can make (give them to ``connect``).

Owns: small, dependency-free handlers for scripts and tests: accept a form elicitation
with the defaults its schema declares (URL requests declined), decline every elicitation.
Handlers that ask a person are in ``mcpsync.elicitation`` (terminal, notebook).

    s = mcpsync.Session.connect(argv, elicitation_handler=mcpsync.handlers.accept_defaults)
"""

from __future__ import annotations

from typing import Any

__all__ = ["accept_defaults", "decline", "schema_defaults"]


def schema_defaults(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The ``default`` of every property of a flat elicitation schema that declares one."""
    out: dict[str, Any] = {}
    for name, prop in ((schema or {}).get("properties") or {}).items():
        if isinstance(prop, dict) and "default" in prop:
            out[name] = prop["default"]
    return out


def _params_dict(params: Any) -> dict[str, Any]:
    if hasattr(params, "model_dump"):
        return params.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dict(params)


def accept_defaults(params: Any) -> dict[str, Any]:
    """Accept a form elicitation with the schema's defaults. A URL request is declined:
    accepting it would claim a person opened a link nobody was shown (for people, use
    ``mcpsync.elicitation.TerminalElicitation`` or ``NotebookElicitation``)."""
    data = _params_dict(params)
    if data.get("mode") == "url":
        return {"action": "decline"}
    return {"action": "accept", "content": schema_defaults(data.get("requestedSchema"))}


def decline(params: Any) -> dict[str, Any]:
    """Decline every elicitation (the safe answer for unattended scripts)."""
    return {"action": "decline"}
