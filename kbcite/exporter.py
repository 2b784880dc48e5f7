"""Export: a knowledge base's articles written back to a folder as Markdown files.

Each article becomes one file: at its source path if an import made it (so an export over the
imported folder lands on the files it came from), else ``ARTICLE_ID.md``. The file's front
matter carries the title, the article's ID, its version and its source path (and
``published: false`` for a draft), which an import reads back: a renamed or moved file keeps
its article, and a file written from the article's current version may be updated from.
Every file is written whole or not at all (a temporary file beside it, then a rename), with
the mode a plain ``open`` would give it, or that of the file it replaces; and only inside
the folder: a file whose folder leads elsewhere through a link, or that cannot be written (a
file where a folder should be, a folder without write permission), is named in one refusal
before anything is written.
Exporting the articles edited since their import (``edited``) over the imported folder writes
each file in its own form instead (``markdown.format_like``): a ``# `` heading stays a heading,
front matter keeps only the keys it had, so the diff is the edit; the store's import record
(source and version) ties the file to its article.

What an export never does without being told: overwrite a file whose text differs from what
it would write (``yes``), unless the file is the article's own earlier export, unchanged since;
or, exporting the articles edited since their import (``edited``) over the imported folder,
overwrite a file that was itself changed since that import: both changed, it is a conflict
(``force`` overwrites).
"""

import collections
import errno
import os
import secrets
import stat

from . import access, history
from .changes import normalized
from .errors import InvalidArgument, VersionNotFound, VersionPruned
from .folder_scan import EXTENSIONS
from .markdown import format_document, format_like, parse_document
from .validation import check_source

# What an export can do with one article, in the order a summary lists them.
EXPORT_ACTIONS = ("write", "unchanged", "conflict", "exists")


def target_path(row):
    """Where an article's file goes, relative to the folder: its source, else its ID (a
    source that is no safe relative path, stored before sources were checked, gets the ID)."""
    source = row["source"]
    if source and source.lower().endswith(EXTENSIONS):
        try:
            check_source(source)
        except InvalidArgument:
            pass
        else:
            return source
    return "%s.md" % row["article_id"]


def _inside(real, root):
    """Whether the resolved path ``real`` is the resolved folder ``root`` or below it."""
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def place_problem(directory, path):
    """Why the file ``path`` (relative, ``/``-separated) cannot be written in ``directory``,
    or None: its folder, resolved through every link, must lie inside ``directory``, be a
    folder (or be creatable) and be writable; the file itself must not be a folder."""
    directory = os.path.abspath(directory)  # "out/" or "." climb to "/", never to ""
    full = os.path.join(directory, *path.split("/"))
    ancestor = os.path.dirname(full)
    while not os.path.lexists(ancestor) and ancestor != os.path.dirname(ancestor):
        ancestor = os.path.dirname(ancestor)
    # Below the export folder, a folder is named as the export's files are; above it (the
    # export folder is still to be made), by its whole path.
    below = len(os.path.normpath(ancestor)) > len(os.path.normpath(directory))
    name = os.path.relpath(ancestor, directory) if below else ancestor
    real = os.path.realpath(ancestor)
    if below and not _inside(real, os.path.realpath(directory)):
        return "its folder %s leads outside %s (to %s, through a link)" % (
            name, directory, real)
    if not os.path.isdir(ancestor):
        return "%s is not a folder" % name
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return "%s cannot be written (permission denied)" % name
    if os.path.isdir(full):
        return "a folder of that name is there"
    return None


def write_atomically(path, text, root=None, special=False):
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, renamed.
    The file gets the mode of the file it replaces, else what ``open`` would give (0666
    less the umask); with ``root``, its folder must resolve inside ``root`` at that moment.
    What is there and no regular file (a device, a pipe, a link to one) is never replaced:
    OSError, or with ``special`` it is written to as it is (``/dev/stdout``, a pipe)."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    if root is not None and not _inside(os.path.realpath(folder), os.path.realpath(root)):
        raise OSError(errno.EXDEV, "its folder now leads outside %s, through a link" % root)
    try:
        found = os.stat(path)
    except OSError:
        found = None
    mode = None if found is None else stat.S_IMODE(found.st_mode)
    if found is not None and not stat.S_ISREG(found.st_mode):
        if not special:
            raise OSError(errno.EEXIST, "it is no regular file (a device, a pipe, a folder), "
                                        "so it is not replaced")
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    temporary = os.path.join(folder, ".kb-export-%s.tmp" % secrets.token_hex(8))
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def _on_disk(path):
    """The file's text, or None where there is none (or it is not UTF-8 text)."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


def plan_export(db, kb, rows, directory, edited, force, yes, front_matter=True):
    """What an export would do with each article: ``write``, ``unchanged``, ``conflict``
    (edited: the file changed since its import too), or ``exists`` (a different file is
    there and ``yes`` was not given). Without ``front_matter``, a file that is there is
    written in its own form (``format_like``), else with the full front matter."""
    actions = []
    for row in rows:
        path = target_path(row)
        meta = {"article_id": row["article_id"], "version": row["updated_at"],
                "source": row["source"], "published": None if row["published"] else False}
        full = os.path.join(directory, *path.split("/"))
        current = _on_disk(full)
        if current is not None and not front_matter:
            text = format_like(current, row["title"], row["content"],
                               dict(meta, published=bool(row["published"])))
        else:
            text = format_document(row["title"], row["content"], meta)
        action = {"article_id": row["article_id"], "path": path, "version": row["updated_at"],
                  "text": text}
        if current == text:
            action["action"] = "unchanged"
        elif current is None or _is_earlier_export(db, kb, row, current):
            action["action"] = "write"
        elif edited:
            # Over the imported folder: only the store changed, or both did (a conflict).
            as_imported = _file_is_as_imported(db, kb, row, current)
            action["action"] = "write" if as_imported or force else "conflict"
        else:
            action["action"] = "write" if yes else "exists"
        actions.append(action)
    return actions


def _is_earlier_export(db, kb, row, current):
    """Whether a file is this article's own earlier export, unchanged since: its front matter
    names the article and a version of it, and it holds that version's text. Overwriting it
    loses nothing."""
    try:
        title, body, meta = parse_document(current, row["title"])
    except ValueError:
        return False
    if meta.get("article_id") != row["article_id"] or not meta.get("version"):
        return False
    try:
        version, content = history.find(db, kb, row, meta["version"], agents=False)
    except (VersionNotFound, VersionPruned, InvalidArgument):
        return False
    return (title, normalized(body)) == (version["title"], normalized(content))


def _file_is_as_imported(db, kb, row, current):
    """Whether a file still holds what the import read from it (its article's version at
    ``import_version``): then only the store changed, and the file may be overwritten."""
    if not row["import_version"]:
        return False
    try:
        version, content = history.find(db, kb, row, row["import_version"], agents=False)
    except (VersionNotFound, VersionPruned, InvalidArgument):
        return False
    try:
        title, body, _ = parse_document(current, version["title"])
    except ValueError:
        return False
    return (title, normalized(body)) == (version["title"], normalized(content))


def _move_bases(ctx, kb, rows, actions):
    """The files of the imported folder the export wrote, or found holding their article's
    version already, hold that version now: it becomes each one's base (the import record),
    in one write."""
    sources = {row["article_id"]: row["source"] for row in rows}
    held = [a for a in actions if a["action"] in ("write", "unchanged")
            and a["path"] == sources.get(a["article_id"])]
    if not held:
        return
    db = ctx.db
    with db.write():
        kb = access.knowledge_base(db, kb["kb_id"], lock=True)
        current = db.articles.by_ids(kb["pk"], [a["article_id"] for a in held])
        for action in held:
            row = current.get(action["article_id"])
            if row is not None and row["source"] == action["path"]:
                db.articles.set_import_version(row["pk"], action["version"])


def _check_places(directory, writing):
    """Refuse, before anything is written, an export that could not write every file."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise InvalidArgument("%s is not a folder: export into a folder (it is made if it "
                              "does not exist)" % directory, argument="directory")
    problems = []
    for action in writing:
        problem = place_problem(directory, action["path"])
        if problem is not None:
            problems.append((action["path"], problem))
    if problems:
        raise InvalidArgument(
            "%d file(s) cannot be written in %s, so nothing was written:\n%s"
            % (len(problems), directory,
               "\n".join("  %s: %s" % problem for problem in problems)),
            argument="directory", paths=[path for path, _ in problems])


def _same_folder(one, other):
    """Whether two folder paths name the same folder (through links too)."""
    return os.path.realpath(one) == os.path.realpath(other)


def _check_edited_folder(kb, directory, to_new_folder):
    """Refuse an export of the edited articles into a folder that is not the imported one
    (where their files are), unless ``to_new_folder`` says that is meant."""
    if to_new_folder:
        return
    if not kb["import_root"]:
        raise InvalidArgument(
            "knowledge base %s was never imported from a folder, so it has no files to take "
            "its edits back to: nothing was written; export it whole (without --edited), or "
            "pass --to-new-folder to write the edited articles into %s"
            % (kb["kb_id"], directory), argument="directory", import_root=None)
    if not _same_folder(directory, kb["import_root"]):
        raise InvalidArgument(
            "%s is not the folder knowledge base %s was imported from (%s): --edited writes "
            "the articles edited since their import over their files there. Nothing was "
            "written; name that folder, or pass --to-new-folder to write them into %s"
            % (directory, kb["kb_id"], kb["import_root"], directory), argument="directory",
            import_root=kb["import_root"])


def export_directory(ctx, kb_id, directory, *, include_drafts=False, edited=False,
                     force=False, yes=False, dry_run=False, progress=None, front_matter=None,
                     to_new_folder=False):
    """Write a knowledge base's published articles (drafts too with ``include_drafts``;
    only those edited since their import with ``edited``) to ``directory`` as Markdown;
    ``edited`` writes each file in the form it was imported in, unless ``front_matter``;
    returns ``{"actions", "counts", "dry_run"}``. Nothing is written when a file would be
    overwritten without ``yes``: the refusal names every such file. ``edited`` writes only
    into the folder the knowledge base was imported from, unless ``to_new_folder``.

    An export over the imported folder records, for each file it wrote (or found holding the
    article's text already), that version as the file's base, as an import does: the next
    export is no conflict, and ``kb merge`` merges against what the file last held."""
    db = ctx.db
    with db.read():
        kb = access.knowledge_base(db, kb_id)
        if edited:
            _check_edited_folder(kb, directory, to_new_folder)
        rows = [row for row in db.articles.of_kb(kb["pk"])
                if (row["published"] or include_drafts)
                and (not edited or (row["source"] and row["import_version"] != row["updated_at"]))]
        actions = plan_export(db, kb, rows, directory, edited, force, yes,
                              front_matter=not edited if front_matter is None else front_matter)
    blocked = [a for a in actions if a["action"] == "exists"]
    if blocked and not dry_run:
        raise InvalidArgument(
            "%d file(s) in %s hold other text than the export would write, so nothing was "
            "written (yes=True overwrites them):\n%s"
            % (len(blocked), directory, "\n".join("  " + a["path"] for a in blocked)),
            argument="directory", paths=[a["path"] for a in blocked])
    writing = [a for a in actions if a["action"] == "write"]
    _check_places(directory, writing)
    if not dry_run:
        for done, action in enumerate(writing, 1):
            try:
                write_atomically(os.path.join(directory, *action["path"].split("/")),
                                 action["text"], root=directory)
            except OSError as exc:
                raise InvalidArgument(
                    "cannot write %s in %s: %s; %d of the %d file(s) to write were written "
                    "before it, each whole" % (action["path"], directory,
                                              exc.strerror or exc, done - 1, len(writing)),
                    argument="directory", path=action["path"]) from None
            if progress is not None:
                progress("export", done, len(writing))
    if not dry_run and kb["import_root"] and _same_folder(directory, kb["import_root"]):
        _move_bases(ctx, kb, rows, actions)
    for action in actions:
        action.pop("text")
    counts = collections.Counter(a["action"] for a in actions)
    return {"knowledge_base_id": kb["kb_id"], "directory": os.path.abspath(directory),
            "actions": actions, "counts": {name: counts[name] for name in EXPORT_ACTIONS},
            "dry_run": dry_run}
