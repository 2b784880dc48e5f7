"""The pages' URLs, the web twins of the ``kb://`` resources: a table of patterns and views.

``/kb/{kb}/articles/{id}`` is ``kb://{kb}/articles/{id}`` and ``.../{id}@{updated_at}`` its
pinned version, so a citation's link and its URI name the same thing.
"""

import re
from .views import articles, listing, live, review, signin, writing

# One path segment: anything but a slash (the server decoded the path's escapes already).
_SEGMENT = r"(?P<%s>[^/]+)"


class Route:
    """A URL pattern, its view, the methods it answers, whether it needs a signed-in person,
    and whether it is an event stream."""

    __slots__ = ("pattern", "view", "methods", "signed_in", "stream")

    def __init__(self, pattern, view, methods=("GET",), signed_in=True, stream=False):
        self.pattern = re.compile("^" + pattern % {"kb": _SEGMENT % "kb", "id": _SEGMENT % "id",
                                                   "proposal": _SEGMENT % "proposal"} + "$")
        self.view = view
        self.methods = methods
        self.signed_in = signed_in
        self.stream = stream


ROUTES = [
    Route(r"/", listing.home),
    Route(r"/login", signin.login, ("GET", "POST"), signed_in=False),
    Route(r"/login/link", signin.link, ("GET", "POST"), signed_in=False),
    Route(r"/login/oidc", signin.issuer_start, signed_in=False),
    Route(r"/login/oidc/callback", signin.issuer_callback, signed_in=False),
    Route(r"/logout", signin.logout, ("POST",), signed_in=False),
    Route(r"/kb/%(kb)s", listing.knowledge_base),
    Route(r"/kb/%(kb)s/search", listing.search),
    Route(r"/kb/%(kb)s/events", live.page),
    Route(r"/kb/%(kb)s/review", review.queue),
    Route(r"/kb/%(kb)s/review/%(proposal)s", review.proposal),
    Route(r"/kb/%(kb)s/review/%(proposal)s/decide", review.decide, ("POST",)),
    Route(r"/kb/%(kb)s/review/%(proposal)s/edit", review.edit_then_approve, ("GET", "POST")),
    Route(r"/kb/%(kb)s/events/stream", None, stream=True),
    Route(r"/kb/%(kb)s/articles/%(id)s/history", articles.history),
    Route(r"/kb/%(kb)s/articles/%(id)s/diff", articles.diff),
    Route(r"/kb/%(kb)s/articles/%(id)s/edit", writing.edit, ("GET", "POST")),
    Route(r"/kb/%(kb)s/articles/%(id)s/revert", writing.revert, ("POST",)),
    Route(r"/kb/%(kb)s/articles/%(id)s", articles.article),
]


def match(path):
    """``(route, its parameters)`` for a path, or ``(None, None)``."""
    for route in ROUTES:
        found = route.pattern.match(path)
        if found is not None:
            return route, found.groupdict()
    return None, None
