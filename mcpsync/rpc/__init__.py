"""The JSON-RPC engine: requests as futures or blocking calls over any transport.

Owns the step between a transport's messages and the protocol: ids and the pending table
(``connection``), one request in flight, its options and its future (``calls``), what the
protocol era plugs in at construction (``hooks``), the ordered notification dispatch
(``dispatch``), server-to-client requests (``served``), sending a future's request
(``sending``) and the threads the process's connections share (``shared``). Knows nothing of
MCP beyond ping, progress and cancellation. May import ``errors``, ``jsonrpc``,
``transports.base`` and ``runtime``; never ``protocol``, ``session`` or anything above.
"""
