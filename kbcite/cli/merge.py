"""``kb merge KB ARTICLE --file F``: a three-way merge of an article and a Markdown file made
from one of its versions.

The base is the version F was made from: ``--base``, else the version a conflict left in F was
written against (``.F.kb-merge`` beside it), else the version F's front matter names (an
export's), else the version the import wrote (the store's import record). The file is read as
an import reads it (front matter and a ``# `` heading give the title). Changes that do not
overlap are merged and written back: to the store as an edit, compare-and-swap against the
version the merge read (exit 3 if someone wrote meanwhile), and to F in its own form, so both
sides hold the merge; ``--dry-run`` prints the merged file, ``--output O`` writes it to O, and
neither writes to the store. Changes that overlap are written into F (or O) between git's
conflict markers, with F's text as it was kept in ``.F.kb-merge`` (``--abort`` puts it back);
nothing is written to the store, and the command exits 3 saying what to do next.
"""

import hashlib
import json
import os

from ..changes import normalized
from ..errors import VersionConflict
from ..exporter import write_atomically
from ..markdown import format_like, parse_document, read_utf8_file, title_from_name
from ..threeway import conflict_left, marker_block, merge, pending_path
from .messages import CommandError, Conflict
from .output import print_json, stale


def read_pending(path, kb_id, article_id):
    """The conflict record beside ``path`` for this article, or None (none, or another's)."""
    try:
        with open(pending_path(path), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or (record.get("knowledge_base_id"),
                                        record.get("article_id")) != (kb_id, article_id):
        return None
    return record


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read(path):
    """``(text, title, body, meta)`` of the file, read as import reads it (one clear error
    where it cannot be: unreadable, not UTF-8, conflict markers left, no content)."""
    text = read_utf8_file(path, "--file %s" % path, "--file")
    try:
        title, body, meta = parse_document(text, title_from_name(path))
    except ValueError as exc:
        raise CommandError("--file %s cannot be merged: %s" % (path, exc),
                           argument="--file") from None
    return text, title, body, meta


def _titled(original, store_title, file_title, body, meta, labels):
    """The file's text with its title line (a ``# `` heading, front matter's ``title``) as a
    conflict of the two titles, or None where the file has no line that holds its title."""
    crlf = "\r\n" in original
    ours = format_like(original, store_title, body, meta).split("\n")
    theirs = format_like(original, file_title, body, meta).split("\n")
    differ = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
    if len(ours) != len(theirs) or len(differ) != 1:
        return None
    at, end = differ[0], "\r" if crlf else ""
    block = [line + end for line in marker_block([ours[at][:len(ours[at]) - len(end)]],
                                                 [theirs[at][:len(theirs[at]) - len(end)]],
                                                 *labels)]
    return "\n".join(theirs[:at] + block + theirs[at + 1:])


def _write_file(path, text, what):
    """Write ``text`` to ``path`` whole or not at all; CommandError saying ``what`` is so."""
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise CommandError("cannot write %s: %s; %s" % (path, exc.strerror or exc, what),
                           argument="--file") from None


def _base(args, meta, pending):
    """``(version or None, where it came from)``: the base the caller's side gives."""
    if args.base is not None:
        return args.base, "--base"
    if pending is not None and pending.get("store_version"):
        return pending["store_version"], "the conflict written into %s" % args.file
    if meta.get("version") and meta.get("article_id") == args.article:
        return meta["version"], "the front matter of %s" % args.file
    return None, "the import"


def _expected(args, version):
    """Where the store is not written (so no compare-and-swap runs), a stale
    ``--expected-version`` is refused all the same."""
    if args.expected_version is not None and args.expected_version != version:
        raise Conflict("article %s of knowledge base %s is at version %s, not --expected-"
                       "version %s: nothing was written; see what changed (kb diff %s %s), "
                       "then merge again" % (args.article, args.kb, version,
                                             args.expected_version, args.kb, args.article))


def cmd_merge(store, args, out):
    """Merge an article and a Markdown file from their common base; exit 3 on a conflict
    (markers written for the person) or a stale version (nothing written)."""
    if args.abort:
        return abort(args, out)
    if args.output and os.path.exists(args.output) and not os.path.isfile(args.output):
        raise CommandError("--output %s is no regular file (a folder, a device, a pipe): "
                           "nothing was written; name a file" % args.output,
                           argument="--output")
    if args.output and os.path.exists(args.output) and not args.yes:
        raise CommandError("--output %s is there already: nothing was written; name another "
                           "file, or add --yes to replace it" % args.output, argument="--output")
    original, file_title, body, meta = _read(args.file)
    pending = read_pending(args.file, args.kb, args.article)
    left = conflict_left(original, everywhere=True) if pending is not None else None
    if left is not None:  # the merge's own markers, inside a code block too
        raise CommandError("--file %s cannot be merged: it still holds the conflict kb merge "
                           "wrote, at line %d (%s): keep the lines you want, delete the "
                           "marker lines, then run kb merge again" % (args.file, left[0],
                                                                      left[1][:60]),
                           argument="--file")
    base, base_from = _base(args, meta, pending)
    sides = store.folders.merge_sides(args.kb, args.article, base)
    current, base = sides["current"], sides["base"]
    base_from = base_from if sides["base_from"] == "given" else "the import"
    version = current["updated_at"]
    if args.dry_run or args.output:
        _expected(args, version)
    labels = ("store %s" % version, "file %s" % args.file)
    merged = merge(normalized(base["content"]), normalized(current["content"]),
                   normalized(body), *labels)
    title, title_conflict = args.title, False
    if title is None:
        if file_title in (base["title"], current["title"]):
            title = current["title"]
        elif current["title"] == base["title"]:
            title = file_title
        else:
            title, title_conflict = file_title, True
    meta = {"article_id": args.article, "version": version, "source": current["source"],
            "published": current["published"]}
    result = {"knowledge_base_id": args.kb, "article_id": args.article, "file": args.file,
              "base": base["version"], "base_from": base_from, "store_version": version,
              "conflicts": merged.conflicts + title_conflict, "title_conflict": title_conflict}
    if result["conflicts"]:
        return conflicted(args, out, result, original, merged.text, title, current, meta,
                          labels)
    text = format_like(original, title, merged.text, meta)
    if args.dry_run:
        if args.json:
            return print_json(dict(result, merged=True, text=text, written=False), out)
        out.write(text if text.endswith("\n") else text + "\n")
        return None
    if args.output:
        _write_file(args.output, text, "nothing was written")
        if args.json:
            return print_json(dict(result, merged=True, output=args.output, written=False), out)
        print("merged %s and article %s (version %s, base %s) into %s; nothing was written to "
              "the store" % (args.file, args.article, version, base["version"], args.output),
              file=out)
        return None
    return written(store, args, out, result, original, sides, title, merged.text, meta)


def written(store, args, out, result, original, sides, title, content, meta):
    """A clean merge written back: the store (an edit, compare-and-swap) where it changes,
    then the file in its own form; the import record follows where the file is the import's."""
    current = sides["current"]
    event, version = None, current["updated_at"]
    if (title, content) != (current["title"], normalized(current["content"])):
        try:
            made = store.folders.write_merge(
                args.kb, args.article, title=title, content=content,
                expected_version=args.expected_version or version, actor=args.actor,
                summary=args.summary or "merge of %s" % os.path.basename(args.file))
        except VersionConflict as exc:
            error = stale(exc, args, out)
            if args.expected_version is not None:
                raise error from None
            raise Conflict("article %s changed while the merge ran (it is now at %s): nothing "
                           "was written; run the same kb merge again to merge that change too"
                           % (args.article, exc.details["current_version"])) from None
        version, event = made["updated_at"], made["event"]
    else:
        _expected(args, version)
    text = format_like(original, title, content, dict(meta, version=version))
    if text != original:
        _write_file(args.file, text, "the store holds the merge as version %s; run the same "
                    "kb merge again to write it to the file" % version)
    imported = sides["imported_path"] is not None and \
        os.path.realpath(sides["imported_path"]) == os.path.realpath(args.file)
    if imported:
        # The import record moves only where the file reads back as the article now is.
        back_title, back, _ = parse_document(text, title)
        if (back_title, normalized(back)) == (title, content):
            store.folders.mark_imported(args.kb, args.article, version)
    if os.path.exists(pending_path(args.file)):
        os.remove(pending_path(args.file))
    if args.json:
        return print_json(dict(result, merged=True, version=version, event=event,
                               file_written=text != original), out)
    print("merged %s and article %s (base %s, from %s): %s; %s" % (
        args.file, args.article, result["base"], result["base_from"],
        "version %s (was %s)%s" % (version, current["updated_at"],
                                   ", event %d" % event["sequence"] if event else "")
        if event is not None or version != current["updated_at"]
        else "the store already held it (version %s)" % version,
        "%s updated" % args.file if text != original else "%s already held it" % args.file),
        file=out)
    return None


def conflicted(args, out, result, original, content, title, current, meta, labels):
    """Overlapping changes: the file (or --output, or standard output) gets both sides between
    conflict markers, the record to go on beside it; nothing goes to the store; exit 3."""
    text = format_like(original, title, content, meta)
    if result["title_conflict"]:
        text = _titled(original, current["title"], title, content, meta, labels)
        if text is None:
            raise Conflict("the title changed on both sides (the store's %r, %s's %r) and the "
                           "file has no title line to mark: nothing was written; run again "
                           "with --title T" % (current["title"], args.file, title))
    target = args.output or args.file
    if args.dry_run:
        if args.json:
            print_json(dict(result, merged=False, text=text, written=False), out)
        else:
            out.write(text if text.endswith("\n") else text + "\n")
        raise Conflict("%d conflict(s) between article %s (version %s) and %s: nothing was "
                       "written (--dry-run)" % (result["conflicts"], args.article,
                                                result["store_version"], args.file))
    before = None
    if os.path.exists(target):
        before = original if target == args.file else read_utf8_file(target, target, "--output")
    record = {"knowledge_base_id": args.kb, "article_id": args.article,
              "store_version": result["store_version"], "base": result["base"],
              "file": os.path.abspath(args.file), "original": before, "written": _digest(text)}
    try:
        write_atomically(pending_path(target), json.dumps(record, ensure_ascii=False))
    except OSError as exc:
        raise CommandError("cannot write %s: %s; nothing was written"
                           % (pending_path(target), exc.strerror or exc)) from None
    _write_file(target, text, "nothing was written to the store")
    if args.json:
        print_json(dict(result, merged=False, written=target), out)
    raise Conflict(
        "%d conflict(s) between article %s (version %s) and %s: %s now holds both sides of "
        "each, between <<<<<<< store and >>>>>>> file lines (the store's above =======). Keep "
        "what you want, delete the marker lines, then run kb merge %s %s --file %s again; "
        "nothing was written to the store (--abort puts %s back as it was)"
        % (result["conflicts"], args.article, result["store_version"], args.file, target,
           args.kb, args.article, target, target))


def abort(args, out):
    """``--abort``: the file put back as it was before the merge wrote its conflict."""
    record = read_pending(args.file, args.kb, args.article)
    if record is None:
        raise CommandError("no merge of article %s is waiting in %s (there is no %s): nothing "
                           "to abort" % (args.article, args.file,
                                         pending_path(args.file)),
                           argument="--abort")
    now = read_utf8_file(args.file, "--file %s" % args.file, "--file") \
        if os.path.exists(args.file) else None
    if now is not None and _digest(now) != record.get("written") and not args.yes:
        raise CommandError("%s changed since kb merge wrote its conflict markers (a conflict "
                           "resolved, perhaps): nothing was done; --abort --yes puts it back "
                           "as it was before the merge and loses those changes" % args.file,
                           argument="--abort")
    if record.get("original") is None:
        if now is not None:
            os.remove(args.file)
    else:
        _write_file(args.file, record["original"], "nothing was changed")
    os.remove(pending_path(args.file))
    print("put %s back as it was before kb merge; nothing was written to the store"
          % args.file, file=out)
    return None
