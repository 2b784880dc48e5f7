"""kb-server's Streamable HTTP transport, an ASGI application in rooms of its own.

``app`` (the ASGI entry: lifespan, paths, the request's checks in order), ``request`` (one
request's scope and the replies to it), ``guards`` (Origin, Host, CORS), ``threads`` (the
worker threads), ``exchange`` (one POST), ``streams`` (server-sent events), ``sessions``
(handshake sessions kept in the store), ``settings`` (``Settings``, ``create_app``,
``app_from_env``), ``h11_guard`` (uvicorn's h11 protocol, guarded) and ``serve`` (uvicorn:
listening, workers). ``kbcite.server.asgi`` re-exports what a deployment names.
"""
