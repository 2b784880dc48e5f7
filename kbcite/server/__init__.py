"""kb-server, the MCP server of the knowledge-base store: stdio or Streamable HTTP, both eras.

Layers, each ignorant of the ones above it: ``jsonrpc`` (framing); ``session`` (requests in
flight, cancellation), ``approval`` (a person approves an edit) and ``pool`` (store
connections: reads apart from edits); ``protocol`` (eras and methods, no I/O); the transports:
``stdio``, and HTTP as an ASGI app (the ``http`` package, with handshake sessions kept in
the store; ``asgi`` re-exports what a deployment names) that ``http.serve`` runs on uvicorn
with the ``http.h11_guard`` protocol; ``cli`` on top. Run it as ``kb-server`` or ``python -m kbcite.server``; stdio needs the
standard library alone, HTTP the ``[http]`` extra.
"""
