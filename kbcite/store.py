"""The store's face: ``KBStore`` opens a store, and every call on it goes to its concept.

A store lives in SQLite (a path, ``sqlite:///path`` or ``:memory:``; standard library only)
or PostgreSQL (a ``postgresql://`` address; the ``[postgres]`` extra). ``KBStore`` picks the
engine, holds its connection and clock, resolves what a call names, and hands the work to the
module that owns it:

- the agent's side, ``call_tool``: the tools of ``kbcite.tools``, dispatched through
  ``HANDLERS`` (search in ``kbcite.search.hits``, read in ``kbcite.reads``, the
  compare-and-swap edit in ``kbcite.edits``, the event log in ``kbcite.events``, citations
  checked in ``kbcite.citations``), every failure turned into a ``ToolError``;
- the people's side: knowledge bases and articles (``kbcite.articles``), their history
  (``kbcite.history``), the audit (``kbcite.audit``);
- handles of their own: ``store.tokens`` (``kbcite.tokens.Tokens``: bearer tokens made,
  listed and revoked, a token's principal, why one was refused), ``store.sessions``
  (``kbcite.sessions.Sessions``: the handshake sessions every server process on the store
  shares), ``store.proposals`` (``kbcite.proposals.Proposals``: the review of agents'
  proposed edits) and ``store.folders`` (``kbcite.folders.Folders``: the Markdown import,
  the sync of documents, the export).

Who made a change is recorded with its version: ``actor`` on every write (a token's name, a
stdio server's ``--actor``, a person's login; ``import`` for the import).

The command line is ``kbcite.cli``, the MCP server ``kbcite.server``.
"""

import contextlib
import logging
from datetime import datetime, timezone

from . import (
    access,
    articles,
    audit,
    backup,
    catalog,
    citations,
    edits,
    events,
    folders,
    grants,
    history,
    proposals,
    reads,
    sessions,
    tokens,
)
from .context import Context
from .engines import open_engine
from .errors import InternalError, InvalidArgument, ToolError, WouldWait
from .limits import BUSY_TIMEOUT_S
from .search import hits, index
from .search.semantic import Semantic
from .tools import TOOLS
from .upgrade import upgrade as upgrade_store
from .validation import (
    check_new_article,
    check_source,
    clip,
    granted_set,
    shown,
    validate_arguments,
)

log = logging.getLogger("kbcite.store")

# Each tool's handler: ``handler(context, validated arguments, granted IDs, actor, issuer)``.
HANDLERS = {
    "search_knowledge_base": hits.search,
    "read_knowledge_article": reads.read,
    "edit_knowledge_article": edits.edit,
    "poll_resource_events": events.poll,
    "check_citations": citations.check,
}
SCHEMAS = {tool["name"]: tool["inputSchema"] for tool in TOOLS}


def _system_clock():
    return datetime.now(timezone.utc)


@contextlib.contextmanager
def tool_errors(db, name):
    """Make every failure inside a tool call on ``db`` a ToolError, so callers catch one
    family: the engine's own errors as it names them, anything else an InternalError."""
    try:
        yield
    except (ToolError, WouldWait):
        raise
    except Exception as exc:
        error = db.store_error(exc)
        if error is not None:
            raise error from exc
        if type(exc).__name__ == "ProgrammingError" and "closed" in str(exc):
            raise  # a closed store: the host program's misuse, not the call's fault
        log.exception("%s failed", name)
        raise InternalError(
            "%s failed inside the store (%s: %s); the transaction was rolled back, so "
            "nothing was half done. This is a fault in the store, not in the call: report it."
            % (name, type(exc).__name__, clip(str(exc))), retryable=False) from exc


class KBStore:
    """Knowledge bases, their articles, their event logs and the four agent tools."""

    def __init__(self, address=":memory:", *, clock=None, create=False, timeout=BUSY_TIMEOUT_S,
                 semantic=None):
        """Open the store at ``address``; only with ``create=True`` is a new one made.

        ``address`` is a SQLite path (``:memory:`` by default; ``sqlite:///path`` too) or a
        ``postgresql://`` URL. A missing or empty SQLite file (an empty PostgreSQL database)
        becomes a store only with ``create=True``; anything that is not a store is refused
        (``NotAStore``) without a byte of it changed. Opening takes no lock a writer could
        hold up. A write waits up to ``timeout`` seconds for another's transaction.

        ``semantic``: hybrid search and a vector written with every published version
        (``kbcite.search.semantic``): True, False, or None for the environment's
        ``KBCITE_SEMANTIC`` (``auto``, ``on``, ``off``), else auto: on where the
        ``[semantic]`` extra's model loads, lexical (and said once in the log) where not.
        """
        self._db = open_engine(address, create=create, timeout=timeout)
        self.engine = self._db.name
        self._ctx = Context(self._db, clock or _system_clock,
                            Semantic.opened(semantic, address))
        self._handlers = dict(HANDLERS)
        # The HTTP server's side, each a handle of its own: bearer tokens (who is asking, and
        # why one was refused) and the handshake sessions every server process shares.
        self.tokens = tokens.Tokens(self._ctx)
        self.sessions = sessions.Sessions(self._ctx)
        # The people's review of agents' proposed edits (writes mode review).
        self.proposals = proposals.Proposals(self._ctx)
        # Folders of Markdown, both ways: the import, the sync of documents, the export,
        # and a file edited after its export merged back.
        self.folders = folders.Folders(self._ctx)
        # What a team issuer's people and groups may do, besides their tokens' scopes.
        self.grants = grants.Grants(self._ctx)

    # Bring an older store up to this schema (``kbcite.upgrade.upgrade``).
    upgrade = staticmethod(upgrade_store)

    @classmethod
    def from_image(cls, image, *, clock=None, semantic=None):
        """A new in-memory store holding a copy of ``image()`` bytes."""
        store = cls(":memory:", clock=clock, semantic=semantic)
        store._db.load_image(image)
        return store

    @property
    def capabilities(self):
        """What the store's engine offers beyond the primitives every engine keeps (a subset
        of ``kbcite.engines.contract.CAPABILITIES``: ``listen``, ``image``, ``local_reads``)."""
        return self._db.capabilities

    def image(self):
        """A copy of the store as bytes (an in-memory SQLite store, where sqlite3 can
        serialize), or None where that cannot be had."""
        return self._db.image() if "image" in self._db.capabilities else None

    @property
    def last_search(self):
        """The work the last search did (index queries, articles scored, characters scanned
        for snippets): for tests and benchmarks."""
        return self._ctx.last_search

    # -- the connection ------------------------------------------------------------------------

    def close(self):
        """Close the database connection."""
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def interrupt(self):
        """From another thread: stop the call running on this store (a cancellation). A wait
        for another writer ends at once, and the call's transaction rolls back."""
        self._db.interrupt()

    def clear_interrupt(self):
        """Ready the store for a new call after ``interrupt``."""
        self._db.clear_interrupt()

    @contextlib.contextmanager
    def without_waiting(self):
        """Inside the block a write that finds the lock held raises WouldWait at once, having
        written nothing (on an engine with ``local_reads``; elsewhere writes wait as ever)."""
        self._db.waits = False
        try:
            yield self
        finally:
            self._db.waits = True

    # -- the agent's side ----------------------------------------------------------------------

    def call_tool(self, name, arguments, *, granted, actor=None, issuer=None):
        """Validate ``arguments`` against tool ``name``'s schema and run it; returns the result.

        ``actor`` names the caller in the history of what it writes (a token's name, say), and
        ``issuer`` the team issuer that vouched for that name, if one did."""
        handler = self._handlers.get(name)
        if handler is None:
            raise InvalidArgument(
                "unknown tool %s; tools: %s" % (shown(name), ", ".join(self._handlers)),
                argument="name"
            )
        granted = granted_set(granted)
        history.check_actor(actor, None, issuer)
        with tool_errors(self._db, name):
            return handler(self._ctx, validate_arguments(SCHEMAS[name], arguments), granted,
                           actor, issuer)

    def preview_edit(self, arguments, *, granted):
        """What an edit would do now, for an approval prompt; raises what the edit would raise."""
        granted = granted_set(granted)
        with tool_errors(self._db, "edit_knowledge_article"):
            args = validate_arguments(SCHEMAS["edit_knowledge_article"], arguments)
            return edits.preview(self._ctx, args, granted)

    def propose_edit(self, arguments, *, granted, actor=None, issuer=None):
        """An edit kept as a proposal for a person (writes mode review), checked as the edit
        would be; returns the tool's result, ``status: "proposed"`` (``kbcite.proposals``)."""
        granted = granted_set(granted)
        history.check_actor(actor, None, issuer)
        with tool_errors(self._db, "edit_knowledge_article"):
            args = validate_arguments(SCHEMAS["edit_knowledge_article"], arguments)
            return proposals.propose(self._ctx, args, granted, actor, issuer)

    # -- the agent's side: the catalogue (MCP resources and completions) -----------------------

    def list_published(self, *, granted, after=None, limit=500):
        """``(entries, last)``: a page of the published articles of the granted knowledge
        bases after ``after`` (``(kb_id, article_id)``), and where the next page starts, or
        None at the end (``kbcite.catalog.page``)."""
        with tool_errors(self._db, "resources/list"):
            return catalog.page(self._ctx, granted_set(granted), after, limit)

    def list_recent(self, kb_id, *, granted, offset=0, limit=50):
        """``(rows, total)``: a page of a granted knowledge base's published articles, the
        newest change first (``kbcite.catalog.recent``)."""
        with tool_errors(self._db, "list_recent"):
            return catalog.recent(self._ctx, granted_set(granted), kb_id, offset, limit)

    def change_waiter(self):
        """A connection of its own that wakes a watcher of the event log at commits
        (PostgreSQL's LISTEN), or None where the engine has none (SQLite: poll the heads);
        raises StoreFailed where it cannot listen (a hot standby)."""
        return self._db.change_waiter() if "listen" in self._db.capabilities else None

    def complete_knowledge_bases(self, prefix, *, granted):
        """``(IDs, total)`` of the granted knowledge bases starting with ``prefix``."""
        with tool_errors(self._db, "completion/complete"):
            return catalog.knowledge_bases(self._ctx, granted_set(granted), prefix)

    def complete_articles(self, kb_id, text, *, granted):
        """``(article IDs, has_more)`` completing ``text`` in a granted knowledge base: IDs by
        prefix, then titles and texts by search words (``kbcite.catalog.article_ids``)."""
        with tool_errors(self._db, "completion/complete"):
            return catalog.article_ids(self._ctx, granted_set(granted), kb_id, text)

    # -- the people's side: reading ------------------------------------------------------------

    def knowledge_base_exists(self, kb_id):
        """Whether a knowledge base with this ID exists."""
        with self._db.read():
            return self._db.kbs.row(kb_id) is not None

    def list_knowledge_bases(self):
        """Every knowledge base as a dict: ``knowledge_base_id``, ``name``, ``published`` and
        ``articles`` (created over its life) counts, ``head_sequence``."""
        with self._db.read():
            return self._db.kbs.list()

    def list_articles(self, kb_id):
        """Every article of a knowledge base, drafts included, as dicts (no content)."""
        with self._db.read():
            rows = self._db.articles.listing(access.knowledge_base(self._db, kb_id)["pk"])
        return [dict(row, published=bool(row["published"])) for row in rows]

    def get_article(self, kb_id, article_id):
        """One article as the editor sees it, draft or not (the people's side)."""
        with self._db.read():
            kb = access.knowledge_base(self._db, kb_id)
            row = access.article(self._db, kb, article_id, published_only=False)
        return {key: row[key] for key in ("article_id", "title", "content", "published",
                                           "version_us", "updated_at", "source")}

    def head_sequence(self, kb_id):
        """The sequence of the newest event of a knowledge base (0 before any event)."""
        with self._db.read():
            return access.knowledge_base(self._db, kb_id)["head_sequence"]

    def history(self, kb_id, article_id):
        """Every version of an article, oldest first: time, how, who, the event, the size and
        its change, the summary, whether it was pruned (``kbcite.history.listing``)."""
        return history.listing(self._db, kb_id, article_id)

    def version_texts(self, kb_id, article_id, versions):
        """``{version: (title, content)}`` of an article at the given versions, drafts too."""
        return history.texts_of(self._db, kb_id, article_id, versions)

    def events(self, kb_id, after=0, limit=100):
        """The next page of the event log after ``after``, each event with the actor of its
        version (``kbcite.history.events``); its arguments are checked as the poll tool's."""
        validate_arguments(SCHEMAS["poll_resource_events"], {
            "resource_type": "knowledge_base", "resource_id": kb_id, "after_sequence": after,
            "limit": limit})
        return history.events(self._ctx, kb_id, after, limit)

    def audit(self):
        """Problems found in the stored data (an empty list when all is consistent)."""
        return audit.audit(self._db)

    # -- the people's side: writing ------------------------------------------------------------

    def create_knowledge_base(self, kb_id, name=None):
        """Create an empty knowledge base."""
        articles.create_knowledge_base(self._ctx, kb_id, name)

    def create_article(self, kb_id, title, content, *, published=True, source=None, actor=None):
        """Add an article (published, or a draft); returns its new article ID."""
        check_new_article(title, content, "title", "content")
        if source is not None:
            check_source(source)
        return articles.create(self._ctx, kb_id, [(title, content, source)], published,
                               actor)[0]

    def create_articles(self, kb_id, items, *, published=True, actor=None):
        """Add many ``(title, content)`` articles in one transaction; returns their IDs.

        A bulk load: one commit, one index segment and one update of the search statistics
        for the lot, each statement run for all of them at once. All are checked before any
        is written, so a bad one adds none.
        """
        items = articles.check_articles(items)
        return articles.create(self._ctx, kb_id, [(t, c, None) for t, c in items], published,
                               actor)

    def save_article(self, kb_id, article_id, *, content=None, title=None, actor=None,
                     summary=None):
        """A person's save (last writer wins); returns the article's ``updated_at`` after it
        (the one it had, where the save changed nothing: ``save`` says which).

        Saving a draft keeps it a draft and writes no event; saving a published article
        writes ``article.updated``; saving the title and text it holds writes nothing.
        """
        return self.save(kb_id, article_id, content=content, title=title, actor=actor,
                         summary=summary)["updated_at"]

    def save(self, kb_id, article_id, *, content=None, title=None, actor=None, summary=None):
        """``save_article``, saying what it did: ``{updated_at, event, changed}`` (``changed``
        False and no event where the article already held that title and text, line breaks
        aside)."""
        return articles.save(self._ctx, kb_id, article_id, content=content, title=title,
                             actor=actor, summary=summary)._asdict()

    def publish(self, kb_id, article_id, *, actor=None):
        """Make an article visible to agents; returns its ``updated_at`` (unchanged if it was)."""
        return articles.set_published(self._ctx, kb_id, article_id, True, actor)

    def unpublish(self, kb_id, article_id, *, actor=None):
        """Hide an article from agents; returns its ``updated_at`` (unchanged if it was hidden)."""
        return articles.set_published(self._ctx, kb_id, article_id, False, actor)

    def revert(self, kb_id, article_id, to_version, *, expected_version, actor=None,
               summary=None, idempotency_key=None, issuer=None):
        """A new version with ``to_version``'s title and content (action ``revert``), only if
        the article is still at ``expected_version``; returns ``{updated_at, event,
        replayed, changed}`` (``idempotency_key``: sent again, the first answer, nothing
        written; ``changed`` False where the article already held that version's text)."""
        return articles.revert(self._ctx, kb_id, article_id, to_version, expected_version,
                               actor=actor, summary=summary, idempotency_key=idempotency_key,
                               issuer=issuer)

    def prune_history(self, kb_id, keep_days, *, dry_run=False):
        """Drop the texts of versions older than ``keep_days`` days, never an article's
        current one; returns how many (``kbcite.history.prune``)."""
        return history.prune(self._ctx, kb_id, keep_days, dry_run=dry_run)

    def delete_article(self, kb_id, article_id, *, actor=None, issuer=None):
        """Remove an article for good, text and history; returns the ``article.deleted`` event
        a published one leaves (None for a draft), which records ``actor``."""
        return articles.delete(self._ctx, kb_id, article_id, actor, issuer)

    def optimize(self, kb_id):
        """Compact a knowledge base's search index; worth it after bulk loads."""
        with self._db.write():
            self._db.optimize(access.knowledge_base(self._db, kb_id, lock=True)["pk"])

    def dump_knowledge_base(self, kb_id):
        """A knowledge base as one JSON-ready dict: IDs, versions, history, events, texts
        (``kbcite.backup.dump``)."""
        return backup.dump(self._ctx, kb_id)

    def restore_knowledge_base(self, data, *, as_id=None):
        """Make a knowledge base from a dump, keeping its IDs and history
        (``kbcite.backup.restore``)."""
        return backup.restore(self._ctx, data, as_id)

    def rebuild_index(self, kb_id):
        """Index a knowledge base's published articles anew (after damage to its index)."""
        with self._db.write():
            index.index_all(self._db, access.knowledge_base(self._db, kb_id, lock=True),
                            self._ctx.semantic)
