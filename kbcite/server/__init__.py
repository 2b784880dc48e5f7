"""kb-server, the MCP server of the knowledge-base store: stdio or Streamable HTTP, both eras.

Layers, each ignorant of the ones above it: ``jsonrpc`` (framing); ``session`` (requests in
flight, cancellation), ``approval`` (a person approves an edit) and ``pool`` (store
connections: reads apart from edits); ``protocol`` (eras and methods, no I/O); the transports:
``stdio``, and HTTP as an ASGI app (``asgi``, with ``http_sessions`` for handshake sessions
kept in the store) that ``serve_http`` runs on uvicorn with the ``h11_guard`` protocol;
``cli`` on top. Run it as ``kb-server`` or ``python -m kbcite.server``; stdio needs the
standard library alone, HTTP the ``[http]`` extra.
"""
