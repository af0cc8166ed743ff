"""The transports: how JSON-RPC messages reach a server and come back.

Owns: one module per wire, each a ``Transport`` (the declared contract, ``Features`` and
the optional hooks are in ``base``):

- ``stdio``: a child process speaking newline-delimited JSON over its pipes (with
  ``child``: the process and its shutdown ladder, ``ndjson``: stdout framing,
  ``sigint``: Ctrl-C at a message boundary);
- ``http``: Streamable HTTP (``http.streamable``) and the 2024-11-05 HTTP+SSE wire
  (``http.legacy_sse``), with their shared plumbing (``client``, ``fastpool``,
  ``headers``, ``sse``, ``session``);
- ``memory``: an in-process pair, for tests and embedded servers;
- ``select``: what a connect target names, as the transports to try in order.

``streamable_http``, ``legacy_sse`` and ``_sse`` are the old paths, re-exporting for one
release. Nothing is imported here: ``import mcpsync`` must not pay for ``requests`` when
only stdio is used, so import the module you need (``mcpsync.transports.stdio`` ...).
"""

__all__: list[str] = []
