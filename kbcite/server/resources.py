"""Articles as MCP resources, with no I/O of its own: the URI templates, the URIs of articles
and of their versions, the list's cursors, the era's not-found, the contents of a read, the
resource links beside tool results, and completions of the templates' arguments.

An article is ``kb://{knowledge_base_id}/articles/{article_id}`` (its current version) and one
of its versions ``kb://{knowledge_base_id}/articles/{article_id}@{updated_at}``, the version a
citation names. What a caller may read is exactly what the read tool lets it read (the store
decides: a granted knowledge base, a published article, a version it had while published),
and everything else (a missing or ungranted knowledge base, a draft, an unpublished article, a
version it never had, a URI that is not ours) is one not-found error whose bytes differ only
by the URI the client sent.
"""

import base64
import binascii
import json
import re
from typing import Any
from urllib.parse import quote, unquote

from ..errors import InvalidArgument, ToolError
from ..limits import ID_MAX, MAX_ARTICLES_PER_KB, VERSION_MAX
from ..tools import citation
from .jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RpcError

TEMPLATE_CURRENT = "kb://{knowledge_base_id}/articles/{article_id}"
TEMPLATE_VERSION = "kb://{knowledge_base_id}/articles/{article_id}@{updated_at}"
TEMPLATES = (TEMPLATE_CURRENT, TEMPLATE_VERSION)
MIME_TYPE = "text/markdown"

# RFC 3986's unreserved characters, which a URI value keeps as they are, and the colon of a
# version's time, which it escapes.
_UNRESERVED = re.compile(r"[A-Za-z0-9._~:-]*")

# Where a contents item and a list entry carry their citation: SDK clients drop the keys of a
# contents item the schema does not name (``annotations`` is not one), but keep ``_meta``.
META_CITATION = "kbcite/citation"
META_TITLE = "kbcite/title"
META_CURRENT = "kbcite/current"

# The longest URI a real article has, and so the longest looked at or subscribed to: a
# knowledge-base ID of ID_MAX characters, each at most 12 once percent-encoded (4 UTF-8
# bytes), an article ID (art-NNNNNN: MAX_ARTICLES_PER_KB has six digits) and a version of
# VERSION_MAX characters, each at most 3 encoded. 3,278 characters.
ARTICLE_ID_LENGTH = len("art-%06d" % MAX_ARTICLES_PER_KB)
URI_MAX = (len("kb://") + ID_MAX * 12 + len("/articles/") + ARTICLE_ID_LENGTH + len("@")
           + VERSION_MAX * 3)

# Entries of one resources/list page. TypeScript's v2 client walks at most 64 pages at once:
# 64 x 500 articles a token can see fit one walk.
PAGE_SIZE = 500

# 2026-07-28 caching hints (server/utilities/caching.mdx). Everything depends on the caller's
# grants, so all but the templates are private. A pinned version never changes (a day, the TS
# client's cap); the current one may change at any time (0: ask again, the log says when).
TTL_LIST_MS = 60000
TTL_TEMPLATES_MS = 3600000
TTL_CURRENT_MS = 0
TTL_VERSION_MS = 86400000

# resource_link (and annotations.lastModified) first exist in 2025-06-18; the completions
# capability in 2025-03-26.
LINKS_SINCE = "2025-06-18"
COMPLETIONS_SINCE = "2025-03-26"

# Store failures that mean "there is no such resource for this caller": every one is the
# same not-found, so that none tells ungranted from missing.
NOT_FOUND_CODES = ("not_found", "version_not_found", "version_pruned", "invalid_argument")

# An RFC 3986 percent escape must be two hex digits.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")

TEMPLATE_ENTRIES = [
    {"uriTemplate": TEMPLATE_CURRENT, "name": "article",
     "title": "Knowledge-base article (current version)", "mimeType": MIME_TYPE,
     "description": "The current published version of an article, as Markdown; its citation "
                    "is in the contents' _meta (%s)." % META_CITATION},
    {"uriTemplate": TEMPLATE_VERSION, "name": "article-version",
     "title": "Knowledge-base article (one version)", "mimeType": MIME_TYPE,
     "description": "The article as it was at updated_at, the version a citation names (a "
                    "search hit's or a read's); readable while the article is published."},
]


# -- URIs --------------------------------------------------------------------------------------


def _encode(text):
    """RFC 6570 simple expansion of one value: all but the unreserved characters escaped."""
    if _UNRESERVED.fullmatch(text):
        # Nothing to escape but a version's colons (IDs and versions mostly are): a tenth of
        # quote's time.
        return text.replace(":", "%3A")
    return quote(text, safe="")


def format_uri(kb_id, article_id, version=None):
    """The URI of an article (its current version), or of one version of it."""
    uri = "kb://%s/articles/%s" % (_encode(kb_id), _encode(article_id))
    return uri if version is None else "%s@%s" % (uri, _encode(version))


def uri_of(cited):
    """The version-pinned URI of a citation."""
    return format_uri(cited["knowledge_base_id"], cited["article_id"], cited["updated_at"])


def _decode(part):
    """A percent-decoded URI component, or None where it is not one (bad escapes, not UTF-8,
    empty, a NUL)."""
    if not part or _BAD_ESCAPE.search(part):
        return None
    try:
        text = unquote(part, errors="strict")
    except UnicodeDecodeError:
        return None
    return text if text and "\x00" not in text else None


def parse_uri(uri):
    """``(knowledge_base_id, article_id, version or None)`` of one of our URIs, or None.

    Either spelling of a version's colons is taken (SDKs expand the template to ``%3A``)."""
    if not isinstance(uri, str) or len(uri) > URI_MAX or uri[:5].lower() != "kb://":
        return None
    rest = uri[5:]
    if "?" in rest or "#" in rest:
        return None
    authority, _, path = rest.partition("/")
    head, _, segment = path.partition("/")
    if head != "articles" or not segment or "/" in segment:
        return None
    parts = segment.split("@")
    if len(parts) > 2:
        return None
    kb_id, article_id = _decode(authority), _decode(parts[0])
    version = _decode(parts[1]) if len(parts) == 2 else None
    if kb_id is None or article_id is None or (len(parts) == 2 and version is None):
        return None
    return kb_id, article_id, version


def not_found(uri, modern):
    """The era's resource-not-found: -32602 in 2026-07-28, -32002 before (resources.mdx)."""
    return RpcError(INVALID_PARAMS if modern else -32002, "Resource not found", {"uri": uri})


def store_failed(exc):
    """A store failure that is not a not-found (busy, down): -32603, saying whether to retry."""
    return RpcError(INTERNAL_ERROR, "Internal error: the store could not read the resource "
                    "(%s: %s)" % (exc.code, exc.message),
                    {"reason": exc.code, "retryable": bool(exc.details.get("retryable"))})


# -- cursors -----------------------------------------------------------------------------------


def encode_cursor(last):
    """An opaque cursor that resumes a listing after ``last`` (a pair of IDs); it names only
    where to go on, so any server process takes it, and grants are checked page by page."""
    data = json.dumps({"v": 1, "after": list(last)}, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def decode_cursor(cursor):
    """The pair a cursor resumes after; RpcError -32602 for one we did not hand out."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > 4 * URI_MAX:
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor; list again without one")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = data["after"]
        if data.get("v") == 1 and len(after) == 2 and all(isinstance(a, str) for a in after):
            return after[0], after[1]
    except (ValueError, TypeError, KeyError, binascii.Error):
        pass
    raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor; list again without one")


# -- what results hold -------------------------------------------------------------------------


def list_entry(entry):
    """A resources/list entry of a published article (its current version)."""
    cited = citation(entry["knowledge_base_id"], entry["article_id"], entry["updated_at"])
    return {"uri": format_uri(entry["knowledge_base_id"], entry["article_id"]),
            "name": entry["article_id"], "title": entry["title"], "mimeType": MIME_TYPE,
            "size": entry["bytes"], "annotations": {"lastModified": entry["updated_at"]},
            "_meta": {META_CITATION: cited}}


def contents_item(uri, read):
    """The one contents item of a read: the Markdown as stored, its citation in ``_meta``
    (and for a version, the citation of now beside it)."""
    meta = {META_CITATION: read["citation"], META_TITLE: read["title"]}
    if "current" in read:
        meta[META_CURRENT] = read["current"]
    return {"uri": uri, "mimeType": MIME_TYPE, "text": read["content"], "_meta": meta}


def resource_link(cited, title):
    """A resource_link content item for the version a citation names."""
    return {"type": "resource_link", "uri": uri_of(cited), "name": cited["article_id"],
            "title": title, "mimeType": MIME_TYPE,
            "annotations": {"lastModified": cited["updated_at"]}}


def links_for(tool, structured):
    """The resource links of a search's hits or of a read; none for the other tools."""
    if tool == "search_knowledge_base":
        return [resource_link(hit["citation"], hit["title"])
                for hit in structured.get("results", ())]
    if tool == "read_knowledge_article":
        return [resource_link(structured["citation"], structured["title"])]
    return []


def speaks(version, since):
    """Whether a handshake version is ``since`` or later (the versions are dates)."""
    return version is not None and version >= since


# -- the methods -------------------------------------------------------------------------------


def list_resources(store, params, principal, modern):
    """resources/list: a page of the published articles of the caller's knowledge bases."""
    cursor = params.get("cursor")
    after = decode_cursor(cursor) if cursor is not None else None
    try:
        entries, last = store.list_published(granted=principal.grants, after=after,
                                             limit=PAGE_SIZE)
    except ToolError as exc:
        raise store_failed(exc) from None
    result: dict[str, Any] = {"resources": [list_entry(e) for e in entries]}
    if last is not None:
        result["nextCursor"] = encode_cursor(last)
    if modern:
        result.update(ttlMs=TTL_LIST_MS, cacheScope="private")
    return result


def list_templates(params, modern):
    """resources/templates/list: the two templates, on one page."""
    if params.get("cursor") is not None:
        raise RpcError(INVALID_PARAMS, "Invalid params: unknown cursor; the templates fit one "
                       "page")
    result: dict[str, Any] = {"resourceTemplates": [dict(t) for t in TEMPLATE_ENTRIES]}
    if modern:
        result.update(ttlMs=TTL_TEMPLATES_MS, cacheScope="public")
    return result


def check_uri_param(params):
    """The ``uri`` of a request's params; -32602 where it is not a string."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "Invalid params: uri must be a string (a kb:// URI "
                       "from resources/list or a resource link)")
    return uri


def read_resource(store, params, principal, modern):
    """resources/read: the article (or its version) as Markdown, through the read tool, so
    that exactly what an agent may read is readable."""
    uri = check_uri_param(params)
    parsed = parse_uri(uri)
    if parsed is None:
        raise not_found(uri, modern)
    kb_id, article_id, version = parsed
    arguments = {"knowledge_base_id": kb_id, "article_id": article_id}
    if version is not None:
        arguments["version"] = version
    try:
        read = store.call_tool("read_knowledge_article", arguments, granted=principal.grants,
                               actor=principal.name)
    except ToolError as exc:
        if exc.code in NOT_FOUND_CODES:
            raise not_found(uri, modern) from None
        raise store_failed(exc) from None
    result: dict[str, Any] = {"contents": [contents_item(uri, read)]}
    if modern:
        result.update(ttlMs=TTL_CURRENT_MS if version is None else TTL_VERSION_MS,
                      cacheScope="private")
    return result


def _completion_argument(params):
    argument = params.get("argument")
    if not isinstance(argument, dict) or not isinstance(argument.get("name"), str) \
            or not isinstance(argument.get("value"), str):
        raise RpcError(INVALID_PARAMS, "Invalid params: argument must be {name, value}, both "
                       "strings")
    return argument["name"], argument["value"]


def complete(store, params, principal):
    """completion/complete for the templates' arguments: granted knowledge bases; article IDs
    by prefix, then by title words; an article's current version."""
    ref = params.get("ref")
    if not isinstance(ref, dict) or ref.get("type") != "ref/resource":
        raise RpcError(INVALID_PARAMS, "Invalid params: this server completes the arguments of "
                       "its resource templates only (ref {type: ref/resource, uri: one of %s}); "
                       "it has no prompts" % ", ".join(TEMPLATES))
    if ref.get("uri") not in TEMPLATES:
        raise RpcError(INVALID_PARAMS, "Invalid params: ref.uri must be one of the resource "
                       "templates: %s" % ", ".join(TEMPLATES))
    name, value = _completion_argument(params)
    context = params.get("context") if isinstance(params.get("context"), dict) else {}
    given: dict[str, Any] = context["arguments"] if isinstance(context.get("arguments"),
                                                                dict) else {}
    names = ("knowledge_base_id", "article_id") + (
        ("updated_at",) if ref["uri"] == TEMPLATE_VERSION else ())
    if name not in names:
        raise RpcError(INVALID_PARAMS, "Invalid params: the template %s has no argument %.80s "
                       "(it has %s)" % (ref["uri"], name, ", ".join(names)))
    values, total, has_more = [], None, False
    try:
        if name == "knowledge_base_id":
            values, total = store.complete_knowledge_bases(value, granted=principal.grants)
            has_more = total > len(values)
        else:
            kb_id = given.get("knowledge_base_id")
            if isinstance(kb_id, str) and kb_id:
                if name == "article_id":
                    values, has_more = store.complete_articles(kb_id, value,
                                                               granted=principal.grants)
                else:
                    values = _current_version(store, principal, kb_id,
                                              given.get("article_id"), value)
    except InvalidArgument as exc:
        raise RpcError(INVALID_PARAMS, "Invalid params: %s" % exc.message) from None
    except ToolError as exc:
        raise store_failed(exc) from None
    completion = {"values": values, "hasMore": has_more}
    completion["total"] = total if total is not None else len(values) + (1 if has_more else 0)
    return {"completion": completion}


def _current_version(store, principal, kb_id, article_id, value):
    """The current version of a readable article, where it starts with ``value``."""
    if not isinstance(article_id, str) or not article_id:
        return []
    try:
        read = store.call_tool("read_knowledge_article",
                               {"knowledge_base_id": kb_id, "article_id": article_id},
                               granted=principal.grants)
    except ToolError as exc:
        if exc.code in NOT_FOUND_CODES:
            return []
        raise
    return [read["updated_at"]] if read["updated_at"].startswith(value) else []
