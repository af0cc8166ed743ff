"""Testing MCP servers with mcpsync: in-process servers and drift checks.

Owns nothing itself: re-exports :func:`serve` (``mcpsync.testing.serve``: run an ``mcp`` SDK
or ``fastmcp`` server object on a private event-loop thread and get a connected
:class:`~mcpsync.Session` over the in-memory transport) and the snapshot helpers
(:func:`snapshot`, :func:`assert_matches_snapshot`, :func:`snapshot_data`,
:func:`diff_snapshots`) and the recorded sessions (:class:`Cassette`, :class:`CassetteMismatch`,
:class:`CassetteError`: ``Session.connect(target, cassette=Cassette(path))``). The pytest fixtures live in :mod:`mcpsync.testing.pytest_plugin`.
"""

from __future__ import annotations

from typing import Any

from ._snapshot import assert_matches_snapshot, diff_snapshots, snapshot, snapshot_data
from .cassette import Cassette, CassetteError, CassetteMismatch

__all__ = [
    "Cassette",
    "CassetteError",
    "CassetteMismatch",
    "serve",
    "snapshot",
    "snapshot_data",
    "assert_matches_snapshot",
    "diff_snapshots",
]


def __getattr__(name: str) -> Any:
    if name == "serve":  # late: serving needs anyio and the SDK, the snapshots do not
        from ._serve import serve

        return serve
    raise AttributeError(f"module 'mcpsync.testing' has no attribute {name!r}")
