"""The two HTTP transports and the HTTP plumbing they share.

Owns, one concern per module:

- ``client``: ``HTTPClient`` (requests path | fast path), ``Target``, error translation;
- ``fastpool``: the measured keep-alive ``http.client`` pool behind the fast path;
- ``requestauth``: ``RequestAuth``, what an auth object declares to ride the fast path;
- ``headers``: the ``Mcp-*`` header rules (the Base64 value form, ``Mcp-Name``);
- ``sse``: the ``text/event-stream`` parser, and whose reply a too-large event was;
- ``streamable``: Streamable HTTP (2025-03-26 on, and the 2026-07-28 wire);
- ``session``: its ``Mcp-Session-Id`` lifecycle (expiry, one re-initialization, DELETE),
  an object the transport holds;
- ``streams``: its SSE stream records and GET back-channel, an object the transport holds;
- ``legacy_sse``: the 2024-11-05 HTTP+SSE transport.

Nothing is imported here (``requests`` is paid for only when HTTP is used).
"""

__all__: list[str] = []
