"""Pages from templates, and articles from Markdown, both escaping by default.

Templates are Jinja2 with autoescape on, so every value is HTML-escaped unless a view marks it
safe; the only markup marked safe is what ``markdown`` makes: CommonMark with raw HTML off
(``<script>`` in an article is shown as text), and links and images limited to http(s),
mailto and relative addresses (a ``javascript:`` link stays text).
"""

import os
import re
import threading
from collections import OrderedDict
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")

# Versions whose rendered HTML a process keeps (a version's text never changes): the articles
# people are reading now, a few MiB at most.
RENDERED_VERSIONS = 512

# The schemes an article's link may use; one with none is relative to the page.
LINK_SCHEMES = ("http", "https", "mailto")

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
# Browsers ignore these inside a scheme ("java\tscript:"), so they are dropped before looking.
_IGNORED = re.compile(r"[\x00-\x20\x7f]")


def link_allowed(url):
    """Whether an article may link (or embed an image) to ``url``."""
    found = _SCHEME.match(_IGNORED.sub("", url))
    return found is None or found.group(1).lower() in LINK_SCHEMES


def _markdown():
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = link_allowed
    return md


# The search tool's snippets mark the words that matched as **word**.
_MARKED = re.compile(r"\*\*(.+?)\*\*")


def marked(snippet):
    """A snippet escaped, its matched words (``**word**``) in ``<mark>``."""
    return Markup(_MARKED.sub(r"<mark>\1</mark>", str(escape(snippet))))


def when(version):
    """A version as a person reads it in a list: ``2026-12-01 22:01:36 UTC`` (the exact
    version stays in the page's ``datetime`` attribute and in its links)."""
    text = str(version)
    return "%s %s UTC" % (text[:10], text[11:19]) if len(text) >= 19 and text[10] == "T" \
        else text


def url_part(value):
    """A value as one path segment or query value of a URL (everything else escaped)."""
    return quote(str(value), safe=":")


class Renderer:
    """The template environment and the Markdown renderer, made once a process."""

    def __init__(self):
        self.env = Environment(loader=FileSystemLoader(TEMPLATES),
                               autoescape=select_autoescape(default=True, default_for_string=True),
                               trim_blocks=True, lstrip_blocks=True,
                               # The templates are the package's files: never looked at again.
                               auto_reload=False)
        self.env.filters["u"] = url_part
        self.env.filters["marked"] = marked
        self.env.filters["when"] = when
        self.md = _markdown()
        self._rendered = OrderedDict()  # (kb, article, version) -> HTML, least recent first
        self._lock = threading.Lock()

    def compile_all(self):
        """Compile every template now, before the first page waits for it."""
        for name in self.env.list_templates():
            self.env.get_template(name)

    def page(self, template, **values):
        """A whole page as bytes."""
        return self.env.get_template(template).render(**values).encode("utf-8")

    def markdown(self, text):
        """An article's Markdown as safe HTML."""
        return Markup(self.md.render(text))

    def version(self, kb_id, article_id, version, text):
        """The Markdown ``text`` of an article's version as safe HTML, rendered once while it
        is among the last ``RENDERED_VERSIONS`` asked for."""
        key = (kb_id, article_id, version)
        with self._lock:
            html = self._rendered.get(key)
            if html is not None:
                self._rendered.move_to_end(key)
                return html
        html = self.markdown(text)
        with self._lock:
            self._rendered[key] = html
            if len(self._rendered) > RENDERED_VERSIONS:
                self._rendered.popitem(last=False)
        return html
