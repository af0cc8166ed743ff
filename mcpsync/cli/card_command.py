"""``mcpsync inspect --card URL``: a server's Server Card, read before any session.

Owns: ``run_card`` (read the card with ``mcpsync.cards.server_card``, print its identity,
remotes — transport, URL template, protocol versions, headers with required/secret marks
and variables — and icons, or the card as JSON with ``-o json``). No session is opened and
nothing is asked: secret inputs are only named, never requested. The card is advisory.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .. import display
from .arguments import EXIT_OK, UsageError

if TYPE_CHECKING:
    from .output import _Out

__all__ = ["card_report", "run_card"]


def card_report(card: Any) -> dict[str, Any]:
    """What ``inspect --card`` shows, as JSON-ready data."""
    remotes = []
    for r in card.remotes:
        remotes.append({
            "type": r.transport,
            "url": r.url,
            "protocolVersions": list(r.protocol_versions),
            "variables": {n: {"required": v.required, "secret": v.secret, "default": v.default}
                          for n, v in r.variables.items()},
            "headers": [{"name": h.name, "required": h.required, "secret": h.secret,
                         "variables": sorted(h.variables)} for h in r.headers],
        })  # fmt: skip
    return {
        "source": card.source,
        "name": card.name,
        "title": card.title,
        "version": card.version,
        "description": card.description,
        "websiteUrl": card.website_url,
        "icons": [display.icon_text([i]) for i in display.safe_icons(list(card.icons))],
        "remotes": remotes,
        "card": card.raw,
    }


def run_card(ns: argparse.Namespace, out: _Out) -> int:
    if len(ns.words) != 1 or "://" not in ns.words[0]:
        raise UsageError("inspect --card takes one http(s) URL (an MCP endpoint or a domain)")
    from ..cards import server_card
    from ..elicitation import clean_text

    card = server_card(ns.words[0], timeout=ns.connect_timeout or 10.0)
    report = card_report(card)
    if out.json:
        out.emit_json(report)
        return EXIT_OK
    c = clean_text
    out.print(f"server card  {c(report['source'])}")
    out.print(
        f"name         {c(card.name)}  {c(card.version)}"
        + (f"  ({c(card.title)})" if card.title else "")
    )
    if card.description:
        out.print(f"description  {c(card.description, 200)}")
    if card.website_url:
        out.print(f"website      {c(card.website_url)}")
    if report["icons"]:
        out.print(f"icons        {', '.join(c(i) for i in report['icons'])}")
    if not card.remotes:
        out.print("remotes      (none)")
    for i, r in enumerate(report["remotes"]):
        versions = ", ".join(r["protocolVersions"]) or "any version"
        out.print(f"remote {i + 1}     {r['type']}  {c(r['url'])}  [{c(versions)}]")
        for name, v in r["variables"].items():
            marks = [m for m, on in (("required", v["required"]), ("secret", v["secret"])) if on]
            default = f" default {c(v['default'])}" if v["default"] is not None else ""
            out.print(f"  variable   {{{c(name)}}} {' '.join(marks)}{default}".rstrip())
        for h in r["headers"]:
            marks = [m for m, on in (("required", h["required"]), ("secret", h["secret"])) if on]
            out.print(f"  header     {c(h['name'])} {' '.join(marks)}".rstrip())
    out.print("(advisory: the server's own answers win once connected)")
    return EXIT_OK
