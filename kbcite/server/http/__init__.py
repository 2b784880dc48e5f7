"""kb-server's Streamable HTTP transport, an ASGI application in rooms of its own.

``app`` (the ASGI entry: lifespan, paths, each method to its room), ``request`` (one request's
scope and the replies to it), ``guards`` (framing, Origin, Host, CORS), ``auth`` (the bearer
token, the 401 challenge, RFC 9728 metadata), ``exchange`` (one POST), ``streams``
(server-sent events), ``sessions`` (handshake sessions kept in the store), ``threads`` (the
worker threads), ``settings`` (``Settings``, ``create_app``), ``guard``, ``h11_guard`` and
``httptools_guard`` (uvicorn's protocols, guarded alike) and ``serve`` (uvicorn: listening,
workers).
``kbcite.server.asgi`` re-exports what a deployment names.
"""
