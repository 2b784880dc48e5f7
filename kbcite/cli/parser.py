"""The command line's parser: global options, then one subcommand with its own."""

import argparse
import getpass
import os
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import __version__
from ..limits import SCHEMA_VERSION, SEARCH_LIMIT_DEFAULT, SEARCH_LIMIT_MAX
from ..writes import DEFAULT as DEFAULT_WRITES
from ..writes import WRITE_MODES
from . import serve
from .messages import PROG
from .output import FORMATS


def login_name():
    """The person's login name ($USER and its kin, else the account's), or None."""
    try:
        return getpass.getuser() or None
    except (KeyError, OSError, ImportError):  # no such variable, and no passwd entry
        return None


def named(text):
    """A file or folder argument: an empty one (an unset variable in a script) names nothing,
    and is refused rather than taken as the current folder or as no value."""
    if not text:
        raise argparse.ArgumentTypeError("an empty name: name a file or folder")
    return text


# -- arguments several commands take ------------------------------------------------------------


def kb_arg(p):
    p.add_argument("kb", metavar="KB", help="the knowledge base's ID")


def article_arg(p):
    p.add_argument("article", metavar="ARTICLE", help="an article ID, e.g. art-000001")


def summary_arg(p):
    p.add_argument("--summary", metavar="TEXT", help="why, in a line, for the article's history")


def listing_args(p, what):
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="print %s as a table (default), JSON records, CSV or TSV" % what)
    p.add_argument("--fields", metavar="F,F",
                   help="only these fields, in this order (the names --format json shows)")


def raw_arg(p):
    p.add_argument("--raw", action="store_true",
                   help="--file: take the file as the content, as it is (default: as import "
                        "reads Markdown: front matter and a # heading give the title)")


def content_args(p, what):
    text = p.add_mutually_exclusive_group()
    text.add_argument("--file", metavar="F", type=named,
                      help="read %s from the UTF-8 file F (- for standard input)" % what)
    text.add_argument("--content", metavar="TEXT", help="%s itself" % what)


# -- each command's arguments ---------------------------------------------------------------------


def _nothing(p, common):
    """A command with no arguments of its own."""


def _article(p, common):
    """``kb publish`` and ``kb unpublish``: a knowledge base and an article."""
    kb_arg(p)
    article_arg(p)


def _init(p, common):
    """``kb init``'s arguments."""
    kb_arg(p)
    p.add_argument("--name", help="a display name for the knowledge base")


def _knowledge_bases(p, common):
    """``kb knowledge-bases``'s arguments."""
    listing_args(p, "the knowledge bases")


def _add(p, common):
    """``kb add``'s arguments."""
    kb_arg(p)
    p.add_argument("--title", help="the article's title (default, with --file: the file's, "
                                   "as import reads it)")
    content_args(p, "the content")
    raw_arg(p)
    p.add_argument("--draft", action="store_true", help="add it unpublished")


def _save(p, common):
    """``kb save``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--title", help="a new title (default: keep it, or the file's)")
    content_args(p, "the new content (default: keep it)")
    raw_arg(p)
    summary_arg(p)


def _list(p, common):
    """``kb list``'s arguments."""
    kb_arg(p)
    listing_args(p, "the articles")


def _delete(p, common):
    """``kb delete``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--yes", action="store_true", help="delete it: there is no undo")


def _search(p, common):
    """``kb search``'s arguments."""
    kb_arg(p)
    p.add_argument("query", metavar="QUERY", help="words to look for (2-200 characters)")
    p.add_argument("--limit", type=int, metavar="N",
                   help="most hits (1-%d, default %d)" % (SEARCH_LIMIT_MAX,
                                                          SEARCH_LIMIT_DEFAULT))
    listing_args(p, "the hits")


def _read(p, common):
    """``kb read``'s arguments."""
    kb_arg(p)
    article_arg(p)


def _edit(p, common):
    """``kb edit``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--expected-version", required=True, metavar="V",
                   help="the version (updated_at) you read; the edit is refused if it changed")
    p.add_argument("--title", help="a new title (default: keep it, or the file's)")
    content_args(p, "the whole new content")
    raw_arg(p)
    p.add_argument("--idempotency-key", metavar="K",
                   help="resending with the same key returns the first result and writes "
                        "nothing (default: a new random key)")
    summary_arg(p)


def _history(p, common):
    """``kb history``'s arguments."""
    p.add_argument("kb", metavar="KB", help="the knowledge base's ID (or the word prune)")
    p.add_argument("article", metavar="ARTICLE",
                   help="an article ID (or, after prune, the knowledge base's ID)")
    p.add_argument("--keep-days", type=int, metavar="N",
                   help="history prune: keep the versions of the last N days (and every "
                        "article's current one); drop the texts of older ones")
    p.add_argument("--yes", action="store_true",
                   help="history prune: do it (without --yes it says what it would prune)")
    listing_args(p, "the versions")


def _diff(p, common):
    """``kb diff``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--from", dest="from_", metavar="V",
                   help="the older version (default: the one before --to)")
    p.add_argument("--to", metavar="V", help="the newer version (default: the current one)")
    p.add_argument("--file", metavar="F", type=named,
                   help="compare the article (at --to, default the current version) with the "
                        "Markdown file F, read as import reads it")


def _merge(p, common):
    """``kb merge``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--file", required=True, metavar="F", type=named,
                   help="the Markdown file, read as import reads it (front matter and a # "
                        "heading give the title)")
    p.add_argument("--base", metavar="V",
                   help="the version F was made from (default: the one its conflict markers "
                        "were written against, its front matter's, or the import's)")
    p.add_argument("--expected-version", metavar="V",
                   help="merge only if the article is still at V (exit 3 if not)")
    p.add_argument("--title", help="the merged title (default: merged as the text is)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the merged file, write nothing")
    p.add_argument("--output", metavar="O", type=named,
                   help="write the merged file (or its conflicts) to O, not F; nothing to "
                        "the store")
    p.add_argument("--yes", action="store_true",
                   help="--output: replace O if it is there; --abort: even if F changed "
                        "since the conflict was written")
    p.add_argument("--abort", action="store_true",
                   help="put F back as it was before a merge wrote conflict markers into it")
    summary_arg(p)


def _revert(p, common):
    """``kb revert``'s arguments."""
    kb_arg(p)
    article_arg(p)
    p.add_argument("--to", required=True, metavar="V", help="the version to bring back")
    p.add_argument("--expected-version", required=True, metavar="CUR",
                   help="the current version, as kb history shows it")
    summary_arg(p)


def _events(p, common):
    """``kb events``'s arguments."""
    kb_arg(p)
    p.add_argument("--after", type=int, default=0, metavar="N",
                   help="only events after sequence N (default 0: all)")
    listing_args(p, "the events")


def _import(p, common):
    """``kb import``'s arguments."""
    kb_arg(p)
    p.add_argument("directory", metavar="FOLDER", type=named,
                   help="the folder: every *.md and *.markdown below it, but dot-folders, "
                        "node_modules and what a .kbignore names")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (and every bad file), write nothing")
    p.add_argument("--prune", action="store_true",
                   help="unpublish articles whose file is gone")
    p.add_argument("--force", action="store_true",
                   help="overwrite articles edited since the last import with their files")
    p.add_argument("--skip-bad", action="store_true",
                   help="import the good files, and report the bad ones (default: a bad file "
                        "stops the import, naming every bad one)")
    p.add_argument("--yes", action="store_true",
                   help="--prune even from another folder than the last import's, or when "
                        "it unpublishes more than half of the imported articles")
    listing_args(p, "the plan")


def _export(p, common):
    """``kb export``'s arguments."""
    kb_arg(p)
    p.add_argument("directory", metavar="FOLDER", type=named, help="the folder (made if missing)")
    p.add_argument("--all", action="store_true", help="drafts too (published: false)")
    p.add_argument("--edited", action="store_true",
                   help="only the articles edited since their import, over their files: the "
                        "way to take an agent's edits back to the imported folder")
    p.add_argument("--front-matter", action="store_true",
                   help="--edited: write each file with the full front matter (title, ID, "
                        "version, source), not in the form it was imported in")
    p.add_argument("--force", action="store_true",
                   help="--edited: overwrite a file that changed since its import too")
    p.add_argument("--to-new-folder", action="store_true",
                   help="--edited: write the edited articles into FOLDER although it is not "
                        "the folder they were imported from")
    p.add_argument("--yes", action="store_true",
                   help="overwrite files that hold another text")
    p.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    listing_args(p, "the plan")


def _dump(p, common):
    """``kb dump``'s arguments."""
    kb_arg(p)
    p.add_argument("file", metavar="FILE", type=named,
                   help="the dump to write (-: standard output)")
    p.add_argument("--yes", action="store_true", help="overwrite FILE if it is there")


def _restore(p, common):
    """``kb restore``'s arguments."""
    p.add_argument("file", metavar="FILE", type=named, help="the dump to read (-: standard input)")
    p.add_argument("--as", dest="as_kb", metavar="KB",
                   help="restore it under this ID (default: the ID it was dumped from)")


def _reindex(p, common):
    """``kb reindex``'s arguments."""
    kb_arg(p)


def _token(p, common):
    """``kb token``'s arguments."""
    tokens = p.add_subparsers(dest="token_command", metavar="ACTION",
                              help="create NAME --grant KB..., list, revoke NAME, or link NAME")
    tokens.required = True
    t = tokens.add_parser("create", parents=[common], help="make a token; it is printed once",
                          description="Make a bearer token that grants knowledge bases; it is "
                                      "printed once and only its SHA-256 is kept.")
    t.add_argument("name", metavar="NAME", help="a name for the token (who or what holds it)")
    t.add_argument("--grant", action="append", required=True, metavar="KB",
                   help="a knowledge base the token may use; repeat for several")
    t.add_argument("--writes", choices=WRITE_MODES, default=DEFAULT_WRITES,
                   help="ask: a person approves each edit (default; a client that cannot ask "
                        "gets review); allow: edits go through; deny: read only; review: each "
                        "edit waits as a proposal for kb review")
    t.add_argument("--review", action="store_true",
                   help="its holder may approve and reject proposals on the web pages")
    t = tokens.add_parser("list", parents=[common], help="list the tokens (never the tokens "
                          "themselves)", description="List the tokens: name, grants, writes, "
                          "created, revoked.")
    listing_args(t, "the tokens")
    t = tokens.add_parser("revoke", parents=[common], help="revoke a token at once",
                          description="Revoke a token: its next request is refused.")
    t.add_argument("name", metavar="NAME", help="the token's name")
    t = tokens.add_parser("link", parents=[common], help="print a one-time sign-in link to "
                          "the web pages", description="Print a link that signs the token's "
                          "holder in to kb-server's web pages once, within ten minutes.")
    t.add_argument("name", metavar="NAME", help="the token's name")
    t.add_argument("--url", default="http://127.0.0.1:8765", metavar="URL",
                   help="the server's address as its people reach it "
                        "(default http://127.0.0.1:8765)")


def _grant(p, common):
    """``kb grant``'s arguments."""
    grants = p.add_subparsers(dest="grant_command", metavar="ACTION",
                              help="add, list, or remove (for kb-server --oauth-issuer)")
    grants.required = True
    for action, text in (("add", "let a signed-in person or group use a knowledge base"),
                         ("remove", "take a person's or group's grant back")):
        g = grants.add_parser(action, parents=[common], help=text, description=text + ".")
        who = g.add_mutually_exclusive_group(required=True)
        who.add_argument("--subject", metavar="SUB", help="the person, as the server's "
                         "--oauth-subject-claim names them (an email, say)")
        who.add_argument("--group", metavar="G", help="a group of the token's groups claim")
        g.add_argument("--kb", required=True, metavar="KB", help="the knowledge base")
        if action == "add":
            g.add_argument("--writes", choices=WRITE_MODES, default=DEFAULT_WRITES,
                           help="ask: a person approves each edit (default); allow: edits go "
                                "through; deny: read only")
    g = grants.add_parser("list", parents=[common], help="list the grants",
                          description="List the grants: kind, name, knowledge base, writes.")
    listing_args(g, "the grants")


def _review(p, common):
    """``kb review``'s arguments."""
    reviews = p.add_subparsers(dest="review_command", metavar="ACTION",
                               help="list KB, show KB ID, approve KB ID, or reject KB ID --reason")
    reviews.required = True
    for name, text in (
            ("list", "the pending proposals: who, when, which article, the size, stale or not"),
            ("show", "one proposal: its diff against its base (and the current version)"),
            ("approve", "write a proposal as a new version (exit 3 if the article changed "
                        "since; --rebase re-applies it)"),
            ("reject", "refuse a proposal, with --reason; the agent hears why")):
        r = reviews.add_parser(name, parents=[common], help=text, description=text)
        kb_arg(r)
        if name != "list":
            r.add_argument("id", metavar="ID", type=int, help="the proposal's ID (kb review "
                                                             "list shows them)")
        r.add_argument("--expire-days", type=int, default=14, metavar="N",
                       help="proposals pending longer than N days expire first (default 14)")
        if name == "list":
            r.add_argument("--all", action="store_true",
                           help="decided and expired ones too, not only the pending")
            listing_args(r, "the proposals")
        elif name == "approve":
            r.add_argument("--rebase", action="store_true",
                           help="the article changed since: re-apply the proposal's lines onto "
                                "the current version where they do not overlap the changes")
        elif name == "reject":
            r.add_argument("--reason", required=True, metavar="TEXT",
                           help="why, in a line: the agent reads it in the event log")


COMPLETION_DESCRIPTION = (
    "Print a completion script: eval \"$(kb completion bash)\" in ~/.bashrc, kb completion zsh "
    "> ~/.zfunc/_kb, or kb completion fish > ~/.config/fish/completions/kb.fish; or let "
    "--install put it there. Besides commands and options, it completes knowledge-base and "
    "article IDs from the store (--db on the line, else $KB_DB).")


def _completion(p, common):
    """``kb completion``'s arguments."""
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    p.add_argument("--install", action="store_true",
                   help="write the script where the shell looks for a user's completions "
                        "(bash: ~/.local/share/bash-completion/completions/kb; zsh: "
                        "~/.zfunc/_kb; fish: ~/.config/fish/completions/kb.fish) and say where")
    p.add_argument("--yes", action="store_true",
                   help="--install: replace a file there that holds another script")


# -- the commands, as data --------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One command of ``kb``: its name and one line of help, what adds its arguments, the
    module and function that run it (None: ``main`` runs it itself), and where it differs
    from the rest: aliases, a parser of its own making (``add``), a longer description, no
    --db/--json/--actor of its own (``common``)."""

    name: str
    help: str
    arguments: Optional[Callable[[argparse.ArgumentParser, argparse.ArgumentParser], None]]
    runs: Optional[tuple[str, str]]
    aliases: tuple[str, ...] = ()
    add: Optional[Callable[[Any, argparse.ArgumentParser], Any]] = None
    common: bool = True
    description: Optional[str] = None


COMMAND_TABLE = (
    Command("init", "create a knowledge base (and the store file, if it is new)",
            _init, ("admin", "cmd_init")),
    Command("knowledge-bases", "list the store's knowledge bases",
            _knowledge_bases, ("admin", "cmd_knowledge_bases"), aliases=("kbs",)),
    Command("add", "add an article (content from --file, --content or standard input)",
            _add, ("articles", "cmd_add")),
    Command("save", "a person's save of an article (last writer wins)",
            _save, ("articles", "cmd_save")),
    Command("publish", "make an article visible to agents", _article, ("articles", "cmd_publish")),
    Command("unpublish", "hide an article from agents (its text is kept)",
            _article, ("articles", "cmd_unpublish")),
    Command("list", "list every article of a knowledge base, drafts included",
            _list, ("articles", "cmd_list")),
    Command("delete", "delete an article for good, its text and history (needs --yes; unpublish "
                      "only hides it)",
            _delete, ("articles", "cmd_delete")),
    Command("search", "search the published articles, as an agent's search does",
            _search, ("articles", "cmd_search")),
    Command("read", "read a published article and its citation, as an agent's read does",
            _read, ("articles", "cmd_read")),
    Command("edit", "edit an article as an agent does: only if it is still at --expected-version "
                    "(exit 3 if not)",
            _edit, ("articles", "cmd_edit")),
    Command("history", "an article's versions: time, how, who, the event, size, summary (or: "
                       "history prune KB --keep-days N)",
            _history, ("history", "cmd_history")),
    Command("diff", "a unified diff between two versions of an article",
            _diff, ("history", "cmd_diff")),
    Command("merge", "merge an article and a Markdown file from their common base: changes that "
                     "do not overlap are written to both, those that do are marked in the file "
                     "for you to resolve (exit 3)",
            _merge, ("merge", "cmd_merge")),
    Command("revert", "a new version holding an older version's title and content, only if the "
                      "article is still at --expected-version (exit 3 if not)",
            _revert, ("history", "cmd_revert")),
    Command("events", "print a knowledge base's event log", _events, ("articles", "cmd_events")),
    Command("import", "sync a folder of Markdown files into a knowledge base",
            _import, ("folders", "cmd_import")),
    Command("export", "write the articles to a folder as Markdown files, with front matter that "
                      "import reads back",
            _export, ("folders", "cmd_export")),
    Command("dump", "write a knowledge base, IDs, versions, history and events, to one JSON file "
                    "that kb restore reads back in any store",
            _dump, ("admin", "cmd_dump")),
    Command("restore", "make a knowledge base from a kb dump file, with its article IDs, "
                       "versions, history and events",
            _restore, ("admin", "cmd_restore")),
    Command("audit", "check the stored data for inconsistencies (exit 1 if any)",
            _nothing, ("admin", "cmd_audit")),
    Command("reindex", "rebuild a knowledge base's search index from its articles",
            _reindex, ("admin", "cmd_reindex")),
    Command("token", "bearer tokens for kb-server --http: create, list, revoke, link",
            _token, ("admin", "cmd_token")),
    Command("grant", "what a team issuer's people and groups may do: add, list, remove",
            _grant, ("admin", "cmd_grant")),
    Command("review", "agents' proposed edits (writes mode review): list, show, approve, reject",
            _review, ("review", "cmd_review")),
    Command("upgrade", "bring a store made by an older version up to this one's schema",
            _nothing, None),
    Command("serve", "", None, None, add=serve.add_parser),
    Command("completion", "print a shell completion script (bash, zsh or fish)",
            _completion, None, common=False, description=COMPLETION_DESCRIPTION),
)


def build_parser():
    """The command line: global options, then one subcommand of ``COMMAND_TABLE`` with its own."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: given after the subcommand it overrides the one given before, never erases it.
    common.add_argument("--db", metavar="PATH", type=named, default=argparse.SUPPRESS,
                        help="the store file (default: $KB_DB)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print JSON (what the tools return) instead of a table")
    common.add_argument("--actor", metavar="NAME", default=argparse.SUPPRESS,
                        help="who the history says made this command's changes (default: "
                             "$USER)")
    parser = argparse.ArgumentParser(
        prog=PROG, parents=[common],
        description="Administer a knowledge-base store whose citations are version stamps.",
        epilog="Exit status: 0 done, 1 error, 2 usage, 3 conflict. The store is --db PATH or "
               "$KB_DB; every command also takes --db and --json after its name.")
    parser.add_argument("--version", action="version", version="%s %s (store schema %d)"
                        % (PROG, __version__, SCHEMA_VERSION))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                help="what to do; kb COMMAND --help tells more")
    sub.required = True
    for command in COMMAND_TABLE:
        if command.add is not None:
            command.add(sub, common)
            continue
        p = sub.add_parser(command.name, parents=[common] if command.common else [],
                           help=command.help, description=command.description or command.help,
                           aliases=list(command.aliases))
        if command.arguments is not None:
            command.arguments(p, common)
    return parser


def parse(argv):
    """Parsed arguments, with --db from $KB_DB where it was not given."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.json = getattr(args, "json", False)
    args.db_flag = getattr(args, "db", None)  # kb serve: a flag outranks $KB_DB
    if getattr(args, "db", None) is None:
        args.db = os.environ.get("KB_DB") or None
    if not args.db and args.command not in ("completion", "serve"):
        parser.error("no store given: pass --db PATH or set KB_DB")
    if getattr(args, "fields", None) is not None and not args.fields.replace(",", "").strip():
        parser.error("argument --fields: name at least one field (F,F); leave --fields out "
                     "for all of them")
    args.command = {"kbs": "knowledge-bases"}.get(args.command, args.command)
    if args.command == "add" and args.title is None and (args.file is None or args.raw):
        commands = parser._subparsers._group_actions[0].choices  # kb add's own usage line
        commands["add"].error("the following arguments are required: --title (or --file F, "
                              "whose # heading or front matter gives the title)")
    if getattr(args, "actor", None) is None:
        args.actor = login_name()
    if args.command == "history":
        # ``history prune KB --keep-days N`` prunes; ``history KB ART`` lists.
        args.prune = None
        if args.kb == "prune" and args.keep_days is not None:
            args.prune, args.kb, args.article = args.article, args.article, None
        elif args.keep_days is not None or args.yes:
            parser.error("--keep-days and --yes belong to: kb history prune KB --keep-days N")
    return args
