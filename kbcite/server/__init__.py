"""kb-server, the MCP server of the knowledge-base store: stdio or Streamable HTTP, both eras.

Layers, each ignorant of the ones above it: ``jsonrpc`` (framing); ``session`` (requests in
flight, cancellation), ``approval`` (a person approves an edit) and ``pool`` (store
connections); ``protocol`` (eras and methods, no I/O); the transports ``stdio`` and ``http``;
``cli`` on top. Run it as ``kb-server`` or ``python -m kbcite.server``.
"""
