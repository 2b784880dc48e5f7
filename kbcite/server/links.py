"""Where the people's pages are, seen from outside: the public address (``--public-url``) and
the link of a proposal's page built on it.

The server cannot know the address a person's browser uses (a proxy, a name, a path prefix
may stand between), so it is told; without it no link is made and nothing else changes.
"""

import urllib.parse

# A public address is an origin with at most a path prefix; longer than this is a mistake.
PUBLIC_URL_MAX = 1024


def check_public_url(value):
    """``value`` as a public address: ``http(s)://host[:port][/prefix]``, its trailing slash
    dropped; ValueError saying what is wrong otherwise."""
    expected = ("the address people's browsers reach this server at: http(s)://host[:port] "
                "with an optional path such as https://kb.example.com/team, and no query, "
                "fragment or user; got %r" % (value[:PUBLIC_URL_MAX + 1],))
    if not isinstance(value, str) or not value or len(value) > PUBLIC_URL_MAX or \
            any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError(expected)
    parts = urllib.parse.urlsplit(value)
    try:
        parts.port  # noqa: B018 (a port that is not a number, or out of range, raises)
    except ValueError:
        raise ValueError(expected) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or \
            parts.fragment or "?" in value or "#" in value or parts.username is not None or \
            parts.password is not None:
        raise ValueError(expected)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def proposal_page(public_url, kb_id, number):
    """The URL of proposal ``number``'s page, ``{public}/kb/{kb}/review/{number}``, or None
    where the public address is not known."""
    if not public_url:
        return None
    return "%s/kb/%s/review/%d" % (public_url, urllib.parse.quote(str(kb_id), safe=":"), number)
