"""A page's answer, a redirect, and a refusal that carries its answer."""


class Response:
    """A page's answer: status, body bytes, headers (the security headers are added)."""

    __slots__ = ("status", "body", "headers")

    def __init__(self, status, body=b"", headers=None, content_type=b"text/html; charset=utf-8"):
        self.status = status
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.headers = list(headers or [])
        if content_type is not None:
            self.headers.append((b"Content-Type", content_type))


def redirect(location, headers=()):
    """303 See Other to ``location`` (a path of this server)."""
    return Response(303, b"", [(b"Location", location.encode("utf-8"))] + list(headers),
                    content_type=None)


class Refused(Exception):
    """A page refused: its response is ready."""

    def __init__(self, response):
        super().__init__(response.status)
        self.response = response
