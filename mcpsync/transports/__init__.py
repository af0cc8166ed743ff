"""The transports: how JSON-RPC messages reach a server and come back.

Owns: one module per wire, each a ``Transport`` (the contract is in ``base``):

- ``stdio``: a child process speaking newline-delimited JSON over its pipes;
- ``streamable_http``: Streamable HTTP (one POST per message, JSON or SSE replies), plus
  the HTTP plumbing the legacy transport reuses;
- ``legacy_sse``: the 2024-11-05 HTTP+SSE wire (one GET event stream, POSTs to its endpoint);
- ``memory``: an in-process pair, for tests and embedded servers;
- ``_sse``: the ``text/event-stream`` parser both HTTP transports share.

Nothing is imported here: ``import mcpsync`` must not pay for ``requests`` when only
stdio is used, so import the module you need (``mcpsync.transports.stdio`` ...).
"""

__all__: list[str] = []
