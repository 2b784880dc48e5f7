"""kb-server, the MCP server of the knowledge-base store: stdio or Streamable HTTP, both eras.

Three layers, each ignorant of the ones above it. Bytes to messages: ``stdio`` and the
``http`` package (an ASGI app with handshake sessions kept in the store, run by
``http.serve`` on uvicorn with a guarded protocol, ``http.httptools_guard`` or
``http.h11_guard``; ``asgi`` re-exports what a deployment names). Messages to decisions:
``inbound`` (each message judged once, no I/O), ``dispatch`` (one admission for both
transports), ``protocol`` (eras and methods, no I/O), ``approval`` (a person approves an
edit), ``resources`` and ``subscriptions``. The ground: ``jsonrpc`` (framing), ``calls``
(the caller, requests in flight, cancellation) and ``pool``
(store connections: reads apart from edits). ``cli`` on top. Run it as ``kb-server`` or
``python -m kbcite.server``; stdio needs the standard library alone, HTTP the ``[http]`` extra.
"""
