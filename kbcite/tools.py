"""The MCP contract: the four tools as agents see them, and the citation every result carries.

Names, descriptions, required arguments, limits and annotations are those of osFoundry's live
``tools/list``; the properties it leaves open have natural types, and the output schemas are
ours, documented in docs/tools.md and kept stable.
The store dispatches each name to its handler (``kbcite.store.HANDLERS``).
"""

from .limits import (
    CITATIONS_MAX,
    EVENT_DELETED,
    EVENT_PUBLISHED,
    EVENT_UNPUBLISHED,
    EVENT_UPDATED,
    EVENTS_LIMIT_DEFAULT,
    EVENTS_LIMIT_MAX,
    ID_MAX,
    KEY_MAX,
    PROPOSAL_EVENTS,
    QUERY_MAX,
    QUERY_MIN,
    RESOURCE_TYPES,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SUMMARY_MAX,
    TITLE_MAX,
    VERSION_MAX,
)


def citation(kb_id, article_id, updated_at):
    """A citation: the version stamp a search hit or a read hands out, and an edit takes back."""
    return {"knowledge_base_id": kb_id, "article_id": article_id, "updated_at": updated_at}


def _string(description, min_length=1, max_length=ID_MAX, **extra):
    schema = {"type": "string", "minLength": min_length, "maxLength": max_length}
    schema.update(extra)
    schema["description"] = description
    return schema


_KB_ID = _string("ID of a granted knowledge base.")


_ARTICLE_ID = _string("Article ID, as a search hit or citation gives it.")


_UPDATED_AT = {"type": "string", "format": "date-time"}


_CITATION = {
    "type": "object",
    "properties": {
        "knowledge_base_id": {"type": "string"},
        "article_id": {"type": "string"},
        "updated_at": _UPDATED_AT,
    },
    "required": ["knowledge_base_id", "article_id", "updated_at"],
    "additionalProperties": False,
}


# A citation as a caller sends it back: the three fields, each a string.
_CITATION_IN = {
    "type": "object",
    "properties": {
        "knowledge_base_id": _string("The citation's knowledge base."),
        "article_id": _string("The citation's article."),
        "updated_at": _string("The citation's version.", 1, VERSION_MAX, format="date-time"),
    },
    "required": ["knowledge_base_id", "article_id", "updated_at"],
    "additionalProperties": False,
}

# What changed between two versions (``kbcite.changes``): the title, and paragraph hunks.
_CHANGES = {
    "type": ["object", "null"],
    "properties": {
        "title": {"type": ["object", "null"],
                  "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                  "required": ["from", "to"], "additionalProperties": False},
        "hunks": {"type": "array", "items": {
            "type": "object",
            "properties": {"at": {"type": "integer", "minimum": 0},
                           "removed": {"type": "array", "items": {"type": "string"}},
                           "added": {"type": "array", "items": {"type": "string"}}},
            "required": ["at", "removed", "added"], "additionalProperties": False}},
        "truncated": {"type": "boolean"},
    },
    "required": ["title", "hunks", "truncated"],
    "additionalProperties": False,
}

_EVENT = {
    "type": "object",
    "properties": {
        "sequence": {"type": "integer", "minimum": 1},
        "type": {"type": "string",
                 "enum": [EVENT_PUBLISHED, EVENT_UPDATED, EVENT_UNPUBLISHED, EVENT_DELETED]
                 + list(PROPOSAL_EVENTS)},
        "article_id": {"type": "string"},
        "updated_at": _UPDATED_AT,
        # A proposal's events (writes mode review): which proposal, who decided, and why not.
        "proposal_id": {"type": "integer", "minimum": 1},
        "decided_by": {"type": ["string", "null"]},
        "reason": {"type": "string"},
    },
    "required": ["sequence", "type", "article_id", "updated_at"],
    "additionalProperties": False,
}


def _object(properties, required=None):
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


# The search tool's description says which ranking the server runs: the lexical one alone,
# or hybrid (the [semantic] extra loaded); ``tools_listed`` picks the sentence.
SEARCH_DESCRIPTION = (
    "Search current published articles in one granted knowledge base. Results cite the "
    "article ID and updated time; this is a live database read. ")
SEARCH_LEXICAL = ("Ranking is lexical (the words of the query; semantic search is off): "
                  "each hit's match is \"lexical\".")
SEARCH_HYBRID = ("Ranking is hybrid: the words of the query and its meaning (semantic search "
                 "is on), so a paraphrase finds an article too; each hit's match says which "
                 "found it: \"lexical\", \"semantic\" or \"both\".")
# What a hit's match may be.
MATCHES = ("lexical", "semantic", "both")

# The edit tool's last sentence, after the live description: a write that changes nothing.
EDIT_UNCHANGED = ("An edit whose title and content equal the current version's (line breaks "
                  "aside) writes nothing: it answers changed: false with the current citation "
                  "and no event.")

TOOLS = [
    {
        "name": "search_knowledge_base",
        "description": SEARCH_DESCRIPTION + SEARCH_LEXICAL,
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "query": _string("Words to look for.", QUERY_MIN, QUERY_MAX),
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": SEARCH_LIMIT_MAX,
                    "description": "Most hits to return (default %d)." % SEARCH_LIMIT_DEFAULT,
                },
            },
            ["knowledge_base_id", "query"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "query": {"type": "string"},
                "results": {
                    "type": "array",
                    "items": _object(
                        {
                            "article_id": {"type": "string"},
                            "title": {"type": "string"},
                            "snippet": {"type": "string"},
                            "updated_at": _UPDATED_AT,
                            "source": {"type": ["string", "null"]},
                            "citation": _CITATION,
                            "match": {"enum": list(MATCHES)},
                        }
                    ),
                },
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "read_knowledge_article",
        "description": (
            "Read one current published article by ID from a granted knowledge base and return "
            "a stable citation."
        ),
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "article_id": _ARTICLE_ID,
                "version": _string(
                    "The updated_at of a citation of this article: read what it cited, with "
                    "the citation of now beside it. Omit to read the current version.",
                    1,
                    VERSION_MAX,
                    format="date-time",
                ),
            },
            ["knowledge_base_id", "article_id"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "article_id": {"type": "string"},
                "title": {"type": "string"},
                "content": {"type": "string"},
                "updated_at": _UPDATED_AT,
                "citation": _CITATION,
                "head_sequence": {"type": "integer", "minimum": 0},
                "current": _CITATION,
            },
            ["knowledge_base_id", "article_id", "title", "content", "updated_at", "citation",
             "head_sequence"],
        ),
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "edit_knowledge_article",
        "description": (
            "Replace article content and optionally its title. Supply the version from "
            "read_knowledge_article; concurrent changes are rejected. " + EDIT_UNCHANGED
        ),
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "article_id": _ARTICLE_ID,
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The whole new content, at most 1 MiB of UTF-8.",
                },
                "title": _string("New title; omit to keep the current one.", 1, TITLE_MAX),
                "expected_version": _string(
                    "The updated_at of the citation you read; the edit is rejected if the "
                    "article changed since, and the rejection's details carry the current "
                    "citation and what changed (details.changes), to re-apply your change "
                    "without another read.",
                    1,
                    VERSION_MAX,
                    format="date-time",
                ),
                "idempotency_key": _string(
                    "A fresh unique key per intended change; resending the same call with the "
                    "same key returns the first result and writes nothing.",
                    1,
                    KEY_MAX,
                ),
                "summary": _string("Why, in a line, for the article's history (optional).", 1,
                                   SUMMARY_MAX),
            },
            ["knowledge_base_id", "article_id", "content", "expected_version", "idempotency_key"],
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "article_id": {"type": "string"},
                "title": {"type": "string"},
                "updated_at": _UPDATED_AT,
                "previous_version": _UPDATED_AT,
                "citation": _CITATION,
                # None where nothing changed (``changed`` false): no version, no event.
                "event": dict(_EVENT, type=["object", "null"]),
                "replayed": {"type": "boolean"},
                "changed": {"type": "boolean"},
                # Where a person reviews edits (writes mode review): the edit is kept as a
                # proposal, the article unchanged; the citation is the version it was made on.
                "status": {"type": "string", "enum": ["proposed"]},
                "proposal_id": {"type": "integer", "minimum": 1},
                "base_version": _UPDATED_AT,
                "review": {"type": "string"},
                # The proposal's page, where the server knows its public address.
                "review_url": {"type": "string", "format": "uri"},
            },
            ["knowledge_base_id", "article_id", "citation", "event", "replayed"],
        ),
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "openWorldHint": True},
    },
    {
        "name": "poll_resource_events",
        "description": (
            "Resume from an event sequence for one granted channel, Note, knowledge base, "
            "record, or session."
        ),
        "inputSchema": _object(
            {
                "resource_type": {
                    "type": "string",
                    "enum": list(RESOURCE_TYPES),
                    "description": "Kind of resource; this store keeps logs for knowledge_base.",
                },
                "resource_id": _string("ID of the resource, e.g. a knowledge base ID."),
                "after_sequence": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Return events after this sequence (default 0: from the start).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": EVENTS_LIMIT_MAX,
                    "description": "Most events to return (default %d)." % EVENTS_LIMIT_DEFAULT,
                },
            },
            ["resource_type", "resource_id"],
        ),
        "outputSchema": _object(
            {
                "resource_type": {"type": "string"},
                "resource_id": {"type": "string"},
                "events": {"type": "array", "items": _EVENT},
                "next_after_sequence": {"type": "integer", "minimum": 0},
                "has_more": {"type": "boolean"},
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "check_citations",
        "description": (
            "Check citations from earlier search hits and reads against one granted knowledge "
            "base: for each, whether it is current, changed (with what changed since, by "
            "paragraph) or gone. One call for up to %d citations." % CITATIONS_MAX
        ),
        "inputSchema": _object(
            {
                "knowledge_base_id": _KB_ID,
                "citations": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": CITATIONS_MAX,
                    "items": _CITATION_IN,
                    "description": "Citations as search hits and reads returned them.",
                },
            }
        ),
        "outputSchema": _object(
            {
                "knowledge_base_id": {"type": "string"},
                "results": {
                    "type": "array",
                    "items": _object(
                        {
                            "citation": _CITATION,
                            "status": {"type": "string",
                                       "enum": ["current", "changed", "gone", "not_found"]},
                            "current": {"type": ["object", "null"],
                                        "properties": _CITATION["properties"],
                                        "required": _CITATION["required"],
                                        "additionalProperties": False},
                            "changes": _CHANGES,
                            "reason": {"type": "string"},
                        },
                        ["citation", "status", "current", "changes"],
                    ),
                },
                "head_sequence": {"type": "integer", "minimum": 0},
            }
        ),
        "annotations": {"readOnlyHint": True},
    },
]


def tools_listed(hybrid):
    """The tool list as a server with (``hybrid``) or without the semantic half shows it."""
    if not hybrid:
        return TOOLS
    return [dict(tool, description=SEARCH_DESCRIPTION + SEARCH_HYBRID)
            if tool["name"] == "search_knowledge_base" else tool for tool in TOOLS]
