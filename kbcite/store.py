log = logging.getLogger("kb_store")


"""A knowledge-base store whose citations are version stamps: the public face and the semantics.

Four agent tools, named, described and limited exactly as osFoundry's live ``tools/list``:
``search_knowledge_base``, ``read_knowledge_article``, ``edit_knowledge_article`` and
``poll_resource_events``. A search hit and a read both return a citation
``{knowledge_base_id, article_id, updated_at}``; the edit tool takes that same ``updated_at``
back as ``expected_version`` and performs a compare-and-swap on it; every change that agents
can see writes one event into a gapless per-knowledge-base log, so an agent checks all of its
old citations by resuming from one integer cursor.

People's side (the app's own editor): ``create_knowledge_base``, ``create_article``,
``save_article``, ``publish``, ``unpublish`` and ``import_directory``. Agent's side: ``TOOLS``
and ``call_tool``. A store lives in SQLite (a path, ``sqlite:///path`` or ``:memory:``; the
standard library's ``kb_sqlite``) or PostgreSQL (a ``postgresql://`` address; ``kb_postgres``,
the ``[postgres]`` extra). What happens on an edit, a save, a search is written here, once;
how each engine stores and locks is in its module. The command line is ``kb_cli``.
"""


def _system_clock():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


class KBStore:
    """Knowledge bases, their articles, their event logs and the four agent tools."""

    def __init__(self, address=":memory:", *, clock=None, create=False, timeout=BUSY_TIMEOUT_S):
        """Open the store at ``address``; only with ``create=True`` is a new one made.

        ``address`` is a SQLite path (``:memory:`` by default; ``sqlite:///path`` too) or a
        ``postgresql://`` URL. A missing or empty SQLite file (an empty PostgreSQL database)
        becomes a store only with ``create=True``; anything that is not a store is refused
        (``NotAStore``) without a byte of it changed. Opening takes no lock a writer could
        hold up. A write waits up to ``timeout`` seconds for another's transaction.
        """
        self.address = self.path = address
        self.timeout = timeout
        self._clock = clock or _system_clock
        self._db = open_engine(address, create=create, timeout=timeout)
        self.engine = self._db.name
        self._handlers = {
            "search_knowledge_base": self._search,
            "read_knowledge_article": self._read,
            "edit_knowledge_article": self._edit,
            "poll_resource_events": self._poll,
        }
        self._schemas = {tool["name"]: tool["inputSchema"] for tool in TOOLS}
        self._snippets = {}  # insertion-ordered: the first key is the least recently used
        self.last_search = {}  # the work the last search did, for tests and benchmarks

    @classmethod
    def upgrade(cls, address):
        """Bring an older store up to this schema in one transaction, re-indexing what the
        new schema indexes differently; returns ``(old schema, new schema)``."""
        store = cls.__new__(cls)
        store._db = open_engine(address, upgrading=True)
        store._clock = _system_clock
        try:
            with store._db.write():
                found, kb_pks = store._db.upgrade_schema()
                for kb_pk in kb_pks:
                    store._index_all(store._db.row(
                        "SELECT pk, kb_id FROM knowledge_bases WHERE pk = ?", (kb_pk,)))
        finally:
            store._db.close()
        return found, SCHEMA_VERSION

    def image(self):
        """A copy of an in-memory SQLite store as bytes, or None where that cannot be had."""
        return self._db.image() if self._db.name == "sqlite" and self._db.memory else None

    def interrupt(self):
        """From another thread: stop the call running on this store (a cancellation). A wait
        for another writer ends at once, and the call's transaction rolls back."""
        self._db.interrupt()

    def clear_interrupt(self):
        """Ready the store for a new call after ``interrupt``."""
        self._db.clear_interrupt()

    @classmethod
    def from_image(cls, image, *, clock=None):
        """A new in-memory store holding a copy of ``image()`` bytes."""
        store = cls(":memory:", clock=clock)
        store._db.load_image(image)
        return store

    # -- connection ----------------------------------------------------------------------------

    def close(self):
        """Close the database connection."""
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _now_us(self):
        return datetime_to_us(self._clock())

    def _next_version(self, previous_us):
        """Strictly greater than ``previous_us`` even when the clock stands still or steps back."""
        now = self._now_us()
        if previous_us is not None:
            now = max(now, previous_us + VERSION_STEP_US)
        return now

    # -- lookups -------------------------------------------------------------------------------

    def _kb(self, kb_id, granted=None, lock=False):
        """The knowledge base row, or the one ``not_found`` that hides ungranted from missing.

        With ``lock``, inside a write: the row is locked until commit (the write's turn).
        """
        row = None
        if granted is None or kb_id in granted:
            row = self._db.lock_kb(kb_id) if lock else self._db.kb_row(kb_id)
        if row is None and granted is None:  # the people's side: no grants to hide behind
            raise NotFound("there is no knowledge base %r in this store" % (kb_id,),
                           knowledge_base_id=kb_id)
        if row is None:
            raise NotFound(
                "knowledge base %r was not found or is not granted to this client; "
                "use the ID of a granted knowledge base" % (kb_id,),
                knowledge_base_id=kb_id,
            )
        return row

    def _article(self, kb, article_id, published_only):
        """The article's row with its content; a draft is ``not_found`` when ``published_only``.

        Visibility is decided on the small columns before the content is read, so a large
        draft and a missing article cost a caller the same, and time tells them nothing.
        """
        if not published_only:  # the people's side sees drafts too, and has no secrets
            row = self._db.article_by_id(kb["pk"], article_id)
            if row is None:
                raise NotFound("there is no article %r in knowledge base %r"
                               % (article_id, kb["kb_id"]), knowledge_base_id=kb["kb_id"],
                               article_id=article_id)
            return row
        found = self._db.article_visibility(kb["pk"], article_id)
        if found is None or not found["published"]:
            raise NotFound(
                "article %r is not a published article of knowledge base %r; it may have been "
                "unpublished: search again for the current article"
                % (article_id, kb["kb_id"]),
                knowledge_base_id=kb["kb_id"],
                article_id=article_id,
            )
        return self._db.article(found["pk"])

    def knowledge_base_exists(self, kb_id):
        """Whether a knowledge base with this ID exists."""
        with self._db.read():
            return self._db.kb_row(kb_id) is not None

    def list_knowledge_bases(self):
        """Every knowledge base as a dict: ID, name, article counts and event head."""
        with self._db.read():
            return self._db.kb_list()

    def list_articles(self, kb_id):
        """Every article of a knowledge base, drafts included, as dicts (no content)."""
        with self._db.read():
            return self._db.article_list(self._kb(kb_id)["pk"])

    def get_article(self, kb_id, article_id):
        """One article as the editor sees it, draft or not (the people's side)."""
        with self._db.read():
            row = self._article(self._kb(kb_id), article_id, published_only=False)
        return {key: row[key] for key in ("article_id", "title", "content", "published",
                                           "version_us", "updated_at", "source")}

    def head_sequence(self, kb_id):
        """The sequence of the newest event of a knowledge base (0 before any event)."""
        with self._db.read():
            return self._kb(kb_id)["head_sequence"]

    # -- writes shared by both sides -------------------------------------------------------------

    def _event(self, kb, type_, article_id, updated_at):
        """Append one event in the caller's transaction (under the knowledge base's lock)."""
        sequence = self._db.kb_next(kb["pk"], "head_sequence")
        event = {"sequence": sequence, "type": type_, "article_id": article_id,
                 "updated_at": updated_at}
        self._db.events_insert(kb["pk"], [event])
        return event

    def _reindex(self, kb, pk, was_published, title, content, published):
        """Bring the search index in line with an article's new text and visibility."""
        old = None
        if was_published:
            stored = self._db.search_doc(pk)
            if stored is None:
                raise self._db.damaged(kb, "search index")
            old = SearchDoc.stored(stored)
        new = SearchDoc.of(title, content) if published else None
        if old is not None and new is not None:
            self._db.search_doc_replace(kb["pk"], pk, old, new)
            self._db.index_replace(kb["pk"], pk, old, new)
        elif old is not None:
            self._db.index_remove(kb["pk"], pk, old)
            self._db.search_doc_delete(kb["pk"], pk, old)
        elif new is not None:
            self._db.search_docs_put(kb["pk"], [(pk, new)])
            self._db.index_add(kb["pk"], [(pk, new)])
        self._db.term_counts_add(kb["pk"], presence_delta(old, new))
        self._db.kb_add_published(
            kb["pk"], (new is not None) - (old is not None),
            (new.title_len if new else 0) - (old.title_len if old else 0),
            (new.body_len if new else 0) - (old.body_len if old else 0))

    def _index_new(self, kb, docs):
        """Index newly published ``(pk, SearchDoc)`` items at once: the index, the per-term
        counts and the totals, each in one statement for all of them."""
        self._db.search_docs_put(kb["pk"], docs)
        self._db.index_add(kb["pk"], docs)
        self._db.term_counts_add(kb["pk"], presence_totals(doc for _, doc in docs))
        self._db.kb_add_published(kb["pk"], len(docs), sum(d.title_len for _, d in docs),
                                  sum(d.body_len for _, d in docs))

    def _write(self, kb, row, *, content, title, published):
        """Save new text and visibility for one article; version, index and event follow."""
        version_us = self._next_version(row["version_us"])
        updated_at = format_version(version_us)
        # The compare-and-swap: the row changes only if it still holds the version (and the
        # visibility) this transaction read; the event and index below rely on that.
        if self._db.article_swap(row, title, content, published, version_us, updated_at) != 1:
            current = self._article(kb, row["article_id"], published_only=False)
            raise _conflict(kb, current, row["updated_at"])
        self._reindex(kb, row["pk"], bool(row["published"]), title, content, published)
        event = None
        if published and row["published"]:
            event = self._event(kb, EVENT_UPDATED, row["article_id"], updated_at)
        elif published:
            event = self._event(kb, EVENT_PUBLISHED, row["article_id"], updated_at)
        elif row["published"]:
            event = self._event(kb, EVENT_UNPUBLISHED, row["article_id"], updated_at)
        return updated_at, event

    def _index_all(self, kb):
        """Index every published article of a knowledge base anew (an upgrade, a rebuild)."""
        self._db.search_clear(kb["pk"])
        docs = [(row["pk"], SearchDoc.of(row["title"], row["content"])) for row in self._db.rows(
            "SELECT pk, title, content FROM articles WHERE kb_pk = ? AND published = 1 "
            "ORDER BY pk", (kb["pk"],))]
        if docs:
            self._index_new(kb, docs)
        self._db.optimize(kb["pk"])

    # -- people's side ---------------------------------------------------------------------------

    def create_knowledge_base(self, kb_id, name=None):
        """Create an empty knowledge base."""
        check_people_string(kb_id, "kb_id", ID_MAX)
        if name is not None:
            check_people_string(name, "name", TITLE_MAX)
        with self._db.write():
            self._db.lock_new_kb()
            if self._db.kb_row(kb_id) is not None:
                raise InvalidArgument(
                    "knowledge base %r already exists" % (kb_id,), argument="kb_id"
                )
            self._db.kb_insert(kb_id, name)

    def create_article(self, kb_id, title, content, *, published=True, source=None):
        """Add an article (published, or a draft); returns its new article ID."""
        check_new_article(title, content, "title", "content")
        with self._db.write():
            kb = self._kb(kb_id, lock=True)
            return self._insert(kb, [(title, content, source)], published)[0]

    def create_articles(self, kb_id, articles, *, published=True):
        """Add many ``(title, content)`` articles in one transaction; returns their IDs.

        A bulk load: one commit, one index segment and one update of the search statistics
        for the lot, each statement run for all of them at once. All are checked before any
        is written, so a bad one adds none.
        """
        articles = list(articles)
        for i, article in enumerate(articles):
            if not isinstance(article, (tuple, list)) or len(article) != 2:
                raise InvalidArgument("articles[%d] must be a (title, content) pair" % i,
                                      argument="articles")
            check_new_article(article[0], article[1], "articles[%d] title" % i,
                              "articles[%d] content" % i)
        if not articles:
            with self._db.read():
                self._kb(kb_id)
            return []
        with self._db.write():
            kb = self._kb(kb_id, lock=True)
            return self._insert(kb, [(t, c, None) for t, c in articles], published)

    def _insert(self, kb, items, published):
        """Insert new ``(title, content, source)`` articles in the caller's transaction, in
        order: IDs, versions, index and events; returns their IDs."""
        first = self._db.kb_next(kb["pk"], "articles_created", len(items))
        if first + len(items) - 1 > MAX_ARTICLES_PER_KB:
            raise InvalidArgument(
                "knowledge base %r is full: it can hold %d articles over its life, and has had "
                "%d" % (kb["kb_id"], MAX_ARTICLES_PER_KB, first - 1), argument="kb_id")
        rows = []
        for number, (title, content, source) in enumerate(items, first):
            version_us = self._next_version(None)
            rows.append(("art-%06d" % number, title, content, published, version_us,
                         format_version(version_us), source))
        pks = self._db.articles_insert(kb["pk"], rows)
        if published:
            self._index_new(kb, [(pk, SearchDoc.of(row[1], row[2]))
                                 for pk, row in zip(pks, rows)])
            sequence = self._db.kb_next(kb["pk"], "head_sequence", len(rows))
            self._db.events_insert(kb["pk"], [
                {"sequence": sequence + i, "type": EVENT_PUBLISHED, "article_id": row[0],
                 "updated_at": row[5]} for i, row in enumerate(rows)])
        return [row[0] for row in rows]

    def save_article(self, kb_id, article_id, *, content=None, title=None):
        """A person's save (last writer wins); returns the new ``updated_at``.

        Saving a draft keeps it a draft and writes no event; saving a published article
        writes ``article.updated``.
        """
        if content is None and title is None:
            raise InvalidArgument("nothing to save: give content, title or both",
                                  argument="content")
        if content is not None:
            check_people_string(content, "content", None)
            check_content(content)
        if title is not None:
            check_people_string(title, "title", TITLE_MAX)
            check_title(title)
        with self._db.write():
            kb = self._kb(kb_id, lock=True)
            row = self._article(kb, article_id, published_only=False)
            updated_at, _ = self._write(
                kb,
                row,
                content=row["content"] if content is None else content,
                title=row["title"] if title is None else title,
                published=bool(row["published"]),
            )
        return updated_at

    def publish(self, kb_id, article_id):
        """Make an article visible to agents; returns its ``updated_at`` (unchanged if it was)."""
        return self._set_published(kb_id, article_id, True)

    def unpublish(self, kb_id, article_id):
        """Hide an article from agents; returns its ``updated_at`` (unchanged if it was hidden)."""
        return self._set_published(kb_id, article_id, False)

    def _set_published(self, kb_id, article_id, published):
        with self._db.write():
            kb = self._kb(kb_id, lock=True)
            row = self._article(kb, article_id, published_only=False)
            if bool(row["published"]) == published:
                return row["updated_at"]
            updated_at, _ = self._write(
                kb, row, content=row["content"], title=row["title"], published=published
            )
        return updated_at

    def optimize(self, kb_id):
        """Compact a knowledge base's search index; worth it after bulk loads."""
        with self._db.write():
            self._db.optimize(self._kb(kb_id, lock=True)["pk"])

    def rebuild_index(self, kb_id):
        """Index a knowledge base's published articles anew (after damage to its index)."""
        with self._db.write():
            self._index_all(self._kb(kb_id, lock=True))

    def import_directory(self, kb_id, directory, *, prune=False, force=False, dry_run=False,
                         progress=None):
        """Sync a folder of Markdown files into a knowledge base; returns the plan it carried out.

        See ``sync_articles``; the files are all read and checked first (``read_markdown_folder``).
        """
        with self._db.read():
            self._kb(kb_id)
        documents = read_markdown_folder(directory, progress)
        return self.sync_articles(kb_id, documents, prune=prune, force=force, dry_run=dry_run,
                                  progress=progress)

    def sync_articles(self, kb_id, documents, *, prune=False, force=False, dry_run=False,
                      progress=None):
        """Make the articles imported from ``documents`` match them, honouring later edits.

        Each imported article remembers its source path and the version the import wrote.
        An article whose version is still that one is updated to its file; one edited since
        (by a person or an agent) is left alone and reported as a ``conflict``, unless
        ``force``. A new path whose text equals an article whose file is gone is a rename.
        With ``prune``, articles whose file is gone are unpublished (their text is kept).
        One transaction: all of it is written, or none. ``dry_run`` writes nothing.
        Returns ``{"actions": [...], "counts": {action: n}}``; actions are ``create``,
        ``update``, ``unchanged``, ``conflict``, ``rename``, ``unpublish`` and ``orphan``
        (file gone, article kept: no ``prune``).
        """
        documents = list(documents)
        seen = set()
        for doc in documents:
            check_people_string(doc.source, "source", None)
            check_new_article(doc.title, doc.content, "title of %s" % doc.source,
                              "content of %s" % doc.source)
            if doc.source in seen:
                raise InvalidArgument("source %r appears twice" % doc.source, argument="source")
            seen.add(doc.source)
        with self._db.write():
            kb = self._kb(kb_id, lock=True)
            rows = {row["source"]: row for row in self._db.articles_imported(kb["pk"])}
            actions = self._sync_plan(rows, documents, prune, force)
            if not dry_run:
                for done, action in enumerate(actions, 1):
                    self._sync_apply(kb, rows, action)
                    if progress is not None:
                        progress("write", done, len(actions))
                if any(a["action"] in ("create", "update") for a in actions):
                    self._db.optimize(kb["pk"])
            for action in actions:
                action.pop("document", None)
        counts = collections.Counter(action["action"] for action in actions)
        return {"actions": actions, "counts": {name: counts[name] for name in SYNC_ACTIONS},
                "dry_run": dry_run}

    @staticmethod
    def _sync_plan(rows, documents, prune, force):
        """What a sync would do, as a list of action dicts (pure: reads nothing, writes nothing)."""
        by_path = {doc.source: doc for doc in documents}
        gone = {source: row for source, row in rows.items() if source not in by_path}
        # A file moved without a change: same title and text as an article whose file is gone.
        by_text = {}
        for source, row in sorted(gone.items()):
            by_text.setdefault((row["title"], row["content"]), source)
        actions = []
        for doc in documents:
            row = rows.get(doc.source)
            action = {"source": doc.source, "title": doc.title, "document": doc}
            if row is None:
                old = by_text.pop((doc.title, doc.content), None)
                if old is not None and old in gone:
                    row = gone.pop(old)
                    action.update(action="rename", previous_source=old)
                else:
                    action["action"] = "create"
                    actions.append(action)
                    continue
            action.update(article_id=row["article_id"], current_version=row["updated_at"],
                          import_version=row["import_version"])
            owned = row["import_version"] == row["updated_at"]
            if row["published"] and (row["title"], row["content"]) == (doc.title, doc.content):
                action.setdefault("action", "unchanged")
            elif owned or force:
                action.setdefault("action", "update")
                action["write"] = True
            else:
                action["action"] = "conflict"
            actions.append(action)
        for source, row in sorted(gone.items()):
            if not row["published"]:
                continue
            actions.append({"source": source, "title": row["title"],
                            "article_id": row["article_id"],
                            "current_version": row["updated_at"],
                            "import_version": row["import_version"],
                            "action": "unpublish" if prune else "orphan"})
        return actions

    def _sync_apply(self, kb, rows, action):
        """Carry out one planned action in the caller's transaction."""
        kind, doc = action["action"], action.get("document")
        if kind in ("conflict", "orphan"):
            return
        if kind == "create":
            action["article_id"] = self._insert(kb, [(doc.title, doc.content, doc.source)],
                                                True)[0]
            pk = self._db.article_visibility(kb["pk"], action["article_id"])["pk"]
        else:
            row = rows[action.get("previous_source", action["source"])]
            pk = row["pk"]
            if kind == "rename":
                self._db.article_set_source(pk, doc.source)
            if kind == "unpublish":
                self._write(kb, row, content=row["content"], title=row["title"], published=False)
            elif action.get("write"):
                self._write(kb, row, content=doc.content, title=doc.title, published=True)
        # What the import wrote, or found equal to its file: later edits are told apart by it.
        self._db.article_mark_imported(pk)
        action["version"] = self._db.article(pk)["updated_at"]

    # -- bearer tokens (the HTTP server's clients) ----------------------------------------------

    def create_token(self, name, grants, writes="ask"):
        """A new bearer token granting knowledge bases ``grants``; returns it, the only time it
        is ever shown (the store keeps its SHA-256)."""
        check_people_string(name, "name", TOKEN_NAME_MAX)
        grants = list(dict.fromkeys(grants))
        if not grants:
            raise InvalidArgument("a token needs at least one knowledge base to grant",
                                  argument="grant")
        if writes not in WRITE_MODES:
            raise InvalidArgument("writes must be one of %s, got %s"
                                  % (", ".join(WRITE_MODES), shown(writes)), argument="writes")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self._db.write():
            if self._db.token_by_name(name) is not None:
                raise InvalidArgument("a token named %r exists already (revoked tokens keep "
                                      "their names); choose another name" % name,
                                      argument="name")
            for kb_id in grants:
                self._kb(kb_id)
            self._db.token_insert(name, token_digest(token), json.dumps(grants), writes,
                                  format_version(self._now_us()))
        return token

    def list_tokens(self):
        """Every token's name, grants, write mode, creation and revocation times."""
        with self._db.read():
            rows = self._db.token_list()
        return [dict(row, grants=json.loads(row["grants"])) for row in rows]

    def revoke_token(self, name):
        """Revoke a token: its next request is refused. Returns the revocation time."""
        with self._db.write():
            row = self._db.token_by_name(name)
            if row is None:
                raise NotFound("there is no token named %r" % (name,), token=name)
            if row["revoked_at"] is not None:
                return row["revoked_at"]
            revoked_at = format_version(self._now_us())
            self._db.token_revoke(name, revoked_at)
            return revoked_at

    def token_principal(self, token):
        """``{name, grants, writes}`` of a live token, or None for an unknown or revoked one."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        with self._db.read():
            row = self._db.token_by_hash(token_digest(token))
        if row is None:
            return None
        return {"name": row["name"], "grants": json.loads(row["grants"]), "writes": row["writes"]}

    # -- agent's side ----------------------------------------------------------------------------

    def call_tool(self, name, arguments, *, granted):
        """Validate ``arguments`` against tool ``name``'s schema and run it; returns the result."""
        handler = self._handlers.get(name)
        if handler is None:
            raise InvalidArgument(
                "unknown tool %s; tools: %s" % (shown(name), ", ".join(self._handlers)),
                argument="name"
            )
        granted = granted_set(granted)
        with self._tool_errors(name):
            return handler(validate_arguments(self._schemas[name], arguments), granted)

    @contextlib.contextmanager
    def _tool_errors(self, name):
        """Make every failure inside a tool call a ToolError, so callers catch one family."""
        try:
            yield
        except ToolError:
            raise
        except Exception as exc:
            error = self._db.store_error(exc)
            if error is not None:
                raise error from exc
            if type(exc).__name__ == "ProgrammingError" and "closed" in str(exc):
                raise  # a closed store: the host program's misuse, not the call's fault
            log.exception("%s failed", name)
            raise InternalError(
                "%s failed inside the store (%s: %s); the transaction was rolled back, so "
                "nothing was half done. This is a fault in the store, not in the call: report it."
                % (name, type(exc).__name__, clip(str(exc))), retryable=False) from exc

    def _search(self, args, granted):
        limit = args.get("limit", SEARCH_LIMIT_DEFAULT)
        with self._db.read():
            kb = self._kb(args["knowledge_base_id"], granted)
            hits, terms = self._ranked(kb, args["query"], limit)
            rows = self._hit_rows(kb, hits) if hits else {}
        kb_id = kb["kb_id"]
        results = []
        for pk in hits:
            row = rows[pk]
            results.append({
                "article_id": row["article_id"],
                "title": row["title"],
                "snippet": self._snippet(row, terms),
                "updated_at": row["updated_at"],
                "citation": citation(kb_id, row["article_id"], row["updated_at"]),
            })
        return {"knowledge_base_id": kb_id, "query": args["query"], "results": results,
                "head_sequence": kb["head_sequence"]}

    def _ranked(self, kb, text, limit):
        """The pks of a query's top hits, best first, and the terms they were ranked by.

        Tiers first: articles holding every query word, then all words but one, then any
        word (``kb_core.score`` counts them); within a tier, the BM25F score, title over body;
        ties by article ID. The tiers are gathered by a few index queries of at most
        ``CANDIDATES_PER_QUERY`` rows each (docs/search.md says which, in what order), and a
        lower tier only when the ones above hold fewer than ``limit`` hits: the work is
        bounded, however common the words.
        """
        terms = query_terms(text)
        work = self.last_search = {"terms": terms, "queries": 0, "scored": 0,
                                   "snippet_chars": 0}
        counts = self._db.term_counts(kb["pk"], terms) if terms else {}
        # A word no published article holds cannot tell articles apart: it is ignored.
        terms = [term for term in terms if term in counts]
        if len(terms) > QUERY_TERMS_MAX:
            rarest = sorted(terms, key=lambda t: (sum(counts[t]), terms.index(t)))
            keep = set(rarest[:QUERY_TERMS_MAX])
            terms = [term for term in terms if term in keep]
        work["terms"] = terms
        if not terms:
            return [], terms
        n = kb["published_count"]
        stats = {"avg_title": kb["title_tokens"] / n, "avg_body": kb["body_tokens"] / n,
                 "idf": {t: (kb_core.idf(counts[t][0], n), kb_core.idf(counts[t][1], n))
                         for t in terms}}
        cap = max(CANDIDATES_PER_QUERY, limit)
        scored = {}
        needles = kb_core.score_needles(terms)

        def gather(lists, docs=None):
            # Score the articles these index queries found that are not scored yet (their
            # stored tokens came with them, or are read now).
            work["queries"] += len(lists)
            new = sorted({pk for pks in lists for pk in pks} - set(scored))
            if new:
                rows = [docs[pk] for pk in new] if docs is not None else self._db.search_docs(new)
                for row in rows:
                    held, value = kb_core.score(row, needles, stats)
                    scored[row["pk"]] = (min(len(terms) - held, 2), -value, row["pk"])
                work["scored"] += len(new)

        def enough(tier):
            return sum(1 for key in scored.values() if key[0] <= tier) >= limit

        def ask(queries):
            # Each query's articles, where fewer than the cap hold it; else the first by ID
            # and, since the title weighs most, those holding its words in their title.
            # Whether any query reached the cap.
            found, docs = self._db.match_docs(kb["pk"], queries, cap)
            full = [(q[0], True, q[2]) for q, pks in zip(queries, found) if len(pks) >= cap]
            if full:
                more, more_docs = self._db.match_docs(kb["pk"], full, cap)
                found += more
                docs.update(more_docs)
            gather(found, docs)
            return bool(full)

        rarest_first = sorted(terms, key=lambda t: (sum(counts[t]), terms.index(t)))
        if len(terms) == 1:
            gather(self._db.title_candidates(kb["pk"], terms, cap)
                   + self._db.match(kb["pk"], [(terms, False, 0)], cap))
        elif len(terms) == 2:
            # Two words: many articles hold both, and all but one is either word.
            ask([(terms, False, 0)])
            if not enough(0):
                ask([(terms, False, 1)])
        else:
            # Three words or more: the all-but-one query holds the every-word tier too, so
            # one query gathers both tiers whole whenever it stays under the cap; only when
            # it reaches the cap is the every-word tier asked on its own.
            if ask([(terms, False, 1)]):
                ask([(terms, False, 0)])
            if not enough(1):
                # The any-word tier fills the places left: for each word, as many of the
                # articles with the shortest titles holding it (its best title scores), then,
                # only if still short, the first articles holding it anywhere. Asking for as
                # many more as are already scored keeps those from using up the places.
                short = limit - sum(1 for key in scored.values() if key[0] <= 1)
                gather(self._db.title_candidates(kb["pk"], rarest_first,
                                                 min(cap, short + len(scored))))
                if len(scored) < limit:
                    gather(self._db.match(kb["pk"], [([t], False, 0) for t in rarest_first],
                                          min(cap, short + len(scored))))
        best = sorted(scored.values())[:limit]
        return [key[2] for key in best], terms

    def _hit_rows(self, kb, pks):
        """The hits' rows (content cut to the snippet window), checked against the index."""
        rows = {row["pk"]: row for row in self._db.article_hits(pks, SNIPPET_SCAN_CHARS)}
        if len(rows) != len(pks):
            raise StoreDamaged(
                "the search index of knowledge base %r lists %d article(s) that are not in the "
                "articles table. A retry will not help; the store's operator must run the audit "
                "and rebuild the index (kb reindex %s)." % (kb["kb_id"], len(set(pks) - set(rows)),
                                                           kb["kb_id"]),
                knowledge_base_id=kb["kb_id"], retryable=False)
        return rows

    def _snippet(self, row, terms):
        """The snippet of one hit, cached by article version: a version never changes text."""
        key = (row["pk"], row["updated_at"], tuple(terms))
        snippet = self._snippets.pop(key, None)
        if snippet is None:
            snippet = make_snippet(row["content"], terms)
            self.last_search["snippet_chars"] = (self.last_search.get("snippet_chars", 0)
                                                 + len(row["content"]))
            if len(self._snippets) >= SNIPPET_CACHE_SIZE:
                del self._snippets[next(iter(self._snippets))]
        self._snippets[key] = snippet
        return snippet

    def _read(self, args, granted):
        with self._db.read():
            kb = self._kb(args["knowledge_base_id"], granted)
            row = self._article(kb, args["article_id"], published_only=True)
        kb_id = kb["kb_id"]
        return {
            "knowledge_base_id": kb_id,
            "article_id": row["article_id"],
            "title": row["title"],
            "content": row["content"],
            "updated_at": row["updated_at"],
            "citation": citation(kb_id, row["article_id"], row["updated_at"]),
            "head_sequence": kb["head_sequence"],
        }

    def _edit_checks(self, args, granted, lock):
        """Everything an edit decides before writing: replay, key reuse, article, version.

        Runs inside the caller's transaction. Returns ``(kb, row, fingerprint, stored)``
        where ``stored`` is the first result of an exact replay, else ``None``.
        """
        check_content(args["content"])
        if "title" in args:
            check_title(args["title"])
        expected_us = parse_version(args["expected_version"])
        kb = self._kb(args["knowledge_base_id"], granted, lock=lock)
        print_ = fingerprint(
            kb["kb_id"], args["article_id"], args["content"], args.get("title"), expected_us
        )
        stored = self._db.idempotency_get(kb["pk"], args["idempotency_key"],
                                          self._now_us() - IDEMPOTENCY_TTL_US)
        if stored is not None:
            if stored["fingerprint"] != print_:
                raise IdempotencyKeyReused(
                    "idempotency_key %r was already used in knowledge base %r for a different "
                    "edit; use a new key for a new change" % (args["idempotency_key"],
                                                              kb["kb_id"]),
                    argument="idempotency_key",
                    idempotency_key=args["idempotency_key"],
                )
            result = json.loads(stored["result"])
            result["replayed"] = True
            return kb, None, print_, result
        row = self._article(kb, args["article_id"], published_only=True)
        if expected_us != row["version_us"]:
            raise _conflict(kb, row, args["expected_version"])
        return kb, row, print_, None

    def _edit(self, args, granted):
        with self._db.write():
            kb, row, print_, stored = self._edit_checks(args, granted, lock=True)
            if stored is not None:
                return stored
            title = args.get("title", row["title"])
            updated_at, event = self._write(
                kb, row, content=args["content"], title=title, published=True
            )
            kb_id = kb["kb_id"]
            result = {
                "knowledge_base_id": kb_id,
                "article_id": row["article_id"],
                "title": title,
                "updated_at": updated_at,
                "previous_version": row["updated_at"],
                "citation": citation(kb_id, row["article_id"], updated_at),
                "event": event,
                "replayed": False,
            }
            now_us = self._now_us()
            self._db.idempotency_put(kb["pk"], args["idempotency_key"], print_,
                                     json.dumps(result, ensure_ascii=False), now_us,
                                     now_us - IDEMPOTENCY_TTL_US)
        return result

    def preview_edit(self, arguments, *, granted):
        """What an edit would do now, for an approval prompt; raises what the edit would raise."""
        granted = granted_set(granted)
        with self._tool_errors("edit_knowledge_article"):
            args = validate_arguments(self._schemas["edit_knowledge_article"], arguments)
            with self._db.read():
                kb, row, _, stored = self._edit_checks(args, granted, lock=False)
        if stored is not None:
            return {"replay": True, "result": stored}
        return {
            "replay": False,
            "knowledge_base_id": kb["kb_id"],
            "article_id": row["article_id"],
            "title": row["title"],
            "new_title": args.get("title"),
            "current_version": row["updated_at"],
            "current_bytes": len(row["content"].encode("utf-8")),
            "new_bytes": len(args["content"].encode("utf-8")),
            "current_content": row["content"],
            "new_content": args["content"],
        }

    def _poll(self, args, granted):
        resource_type = args["resource_type"]
        if resource_type != "knowledge_base":
            raise InvalidArgument(
                "resource_type %r has no event log in this store; it keeps events for "
                "knowledge_base only" % resource_type,
                argument="resource_type",
            )
        after = args.get("after_sequence", 0)
        limit = args.get("limit", EVENTS_LIMIT_DEFAULT)
        with self._db.read():
            kb = self._kb(args["resource_id"], granted)
            head = kb["head_sequence"]
            if after > head:
                raise InvalidArgument(
                    "after_sequence %s is beyond the head of knowledge base %r, which is %d; "
                    "resume from %d or less"
                    % (kb_core.int_text(after), kb["kb_id"], head, head),
                    argument="after_sequence",
                    head_sequence=head,
                )
            events = self._db.events_after(kb["pk"], after, limit)
        # The log is gapless by construction, so a page is exactly the next sequences up to the
        # head. Anything else is damage; answering it with has_more would send a client that
        # follows has_more round forever (Kubernetes answers a cursor it cannot serve 410 Gone).
        for expected, event in enumerate(events, after + 1):
            if event["sequence"] != expected:
                raise _gap(kb, expected, head)
        if len(events) != min(after + limit, head) - after:
            raise _gap(kb, after + len(events) + 1, head)
        cursor = events[-1]["sequence"] if events else after
        return {
            "resource_type": resource_type,
            "resource_id": kb["kb_id"],
            "events": events,
            "next_after_sequence": cursor,
            "has_more": cursor < head,
            "head_sequence": head,
        }

    # -- audit -----------------------------------------------------------------------------------

    def audit(self):
        """Problems found in the stored data (an empty list when all is consistent)."""
        db = self._db
        with db.read():
            problems = db.integrity_problems()
            for kb in db.audit_kbs():
                problems += self._audit_kb(kb)
        return problems

    def _audit_kb(self, kb):
        db, name, problems = self._db, kb["kb_id"], []
        head = kb["head_sequence"]
        seqs = db.audit_sequences(kb["pk"])
        if seqs != list(range(1, head + 1)):
            missing = sorted(set(range(1, head + 1)) - set(seqs))
            extra = [s for s in seqs if not 1 <= s <= head]
            problems.append(
                "knowledge base %r: event log damaged: head %d, missing sequence(s) %s%s"
                % (name, head, ", ".join(map(str, missing[:10])) or "none",
                   "; beyond the head: %s" % ", ".join(map(str, extra[:10])) if extra else ""))
        last = db.audit_last_events(kb["pk"])
        published = []
        for art in db.audit_articles(kb["pk"]):
            ev = last.get(art["article_id"])
            if art["published"]:
                published.append(art["pk"])
                if ev is None or ev["updated_at"] != art["updated_at"] or \
                        ev["type"] == EVENT_UNPUBLISHED:
                    problems.append("article %r of %r: updated_at %s but last event %s"
                                    % (art["article_id"], name, art["updated_at"], ev))
            elif ev is not None and ev["type"] != EVENT_UNPUBLISHED:
                problems.append("draft %r of %r: last event is %s"
                                % (art["article_id"], name, ev["type"]))
        if kb["published_count"] != len(published):
            problems.append("knowledge base %r: counts %d published, holds %d"
                            % (name, kb["published_count"], len(published)))
        docs, titles, terms = db.audit_search(kb["pk"])
        if [d["pk"] for d in docs] != published:
            problems.append("knowledge base %r: search statistics for %d articles, %d published"
                            % (name, len(docs), len(published)))
        parsed = [SearchDoc.stored(d) for d in docs]
        # An article without a single word (a title of "!!!", a body of "...") has nothing
        # in an index to find it by: the indexes hold the published articles that have words.
        worded = [d["pk"] for d, doc in zip(docs, parsed) if doc.title_tokens or doc.body_counts]
        indexed = db.indexed_pks(kb["pk"])
        if indexed != worded:
            problems.append("knowledge base %r: %d indexed, %d published with words to index"
                            % (name, len(indexed), len(worded)))
        titled = [d["pk"] for d, doc in zip(docs, parsed) if doc.title_tokens]
        if db.title_indexed_pks(kb["pk"]) != titled:
            problems.append("knowledge base %r: the index of titles differs from its articles' "
                            "titles" % name)
        if (sum(d.title_len for d in parsed), sum(d.body_len for d in parsed)) != \
                (kb["title_tokens"], kb["body_tokens"]):
            problems.append("knowledge base %r: token totals differ from its articles'" % name)
        expected_titles = sorted((row["pk"], term, d.title_len)
                                 for row, d in zip(docs, parsed) for term in set(d.title_tokens))
        if sorted((t["pk"], t["term"], t["title_len"]) for t in titles) != expected_titles:
            problems.append("knowledge base %r: title terms differ from its articles'" % name)
        expected_terms = presence_totals(parsed)
        if terms != expected_terms:
            wrong = sorted(set(terms.items()) ^ set(expected_terms.items()))[:3]
            problems.append("knowledge base %r: term counts differ from its articles' (%s)"
                            % (name, wrong))
        return problems


if __name__ == "__main__":
    # The admin command line lives in kb_cli (which imports this module); this keeps
    # ``python kb_store.py ...`` and ``python -m kb_store ...`` working.
    import kb_cli

    sys.exit(kb_cli.main())
