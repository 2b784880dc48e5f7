"""The people's web pages, served by ``kb-server --http`` beside ``/mcp`` under the same tokens.

``serves`` says which paths are the pages' (the HTTP app's one seam); ``WebPages`` is made
on the first page asked for, so that a server without the ``[http]`` extra's Jinja2 and
markdown-it-py still serves ``/mcp`` and answers a page with one line naming the extra.
"""

# The paths the pages own; everything else stays the MCP endpoint's.
PREFIXES = ("/kb/", "/static/", "/login", "/logout")

MISSING_EXTRA = ("the web pages need the [http] extra's Jinja2 and markdown-it-py: "
                 "pip install 'kbcite[http]'\n")


def serves(path):
    """Whether ``path`` is one of the web pages'."""
    return path == "/" or path == "/kb" or path.startswith(PREFIXES)


class Missing:
    """What answers every page when the extra is not installed: one line, 501."""

    def __init__(self, reason):
        self.reason = reason

    async def __call__(self, req, receive, send):
        body = MISSING_EXTRA.encode("utf-8")
        await send({"type": "http.response.start", "status": 501,
                    "headers": [(b"Content-Type", b"text/plain; charset=utf-8"),
                                (b"Content-Length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


def pages_for(mcp):
    """The pages' ASGI handler for the MCP app ``mcp`` (its store pools, threads, checks)."""
    try:
        from .app import WebPages
    except ImportError as exc:  # the [http] extra is not installed
        return Missing(str(exc))
    return WebPages(mcp)
