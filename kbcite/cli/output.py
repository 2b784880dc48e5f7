"""What the command line prints: tables for a person, JSON as the tools return it, rows as
CSV or TSV with a choice of fields, and progress that updates one line on a terminal."""

import csv
import io
import json
import os
import time

from .messages import PROG, CommandError, Conflict, person_message

# Piped or redirected, long imports and exports report progress at most this often.
PROGRESS_EVERY_S = 1.0
# Below this many files a piped progress report is noise: the summary says it all.
PROGRESS_MIN_FILES = 100
FORMATS = ("table", "json", "csv", "tsv")


def table(header, rows):
    """Rows as left-aligned text columns under ``header``; the last column is not padded."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]
    lines = []
    for row in [header] + rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def actor_text(name, issuer):
    """Who made a change, as a table shows it: the name (``-`` unknown) and, for a person a
    team issuer vouched for, that issuer without its scheme (``alice (at id.example.com)``)."""
    text = name or "-"
    if issuer:
        text += " (at %s)" % issuer.split("://", 1)[-1].rstrip("/")
    return text


def one_line(text, width):
    """``text`` on one line, cut to ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def marked(snippet, out):
    """A snippet's ``**term**`` marks as a terminal shows them: bold (plain where ``NO_COLOR``
    is set); kept as they are where the output is piped, for a program or a Markdown page."""
    if not (hasattr(out, "isatty") and out.isatty()):
        return snippet
    parts = snippet.split("**")
    if len(parts) % 2 == 0:  # an odd mark: the text itself holds "**"
        return snippet
    on, off = ("", "") if os.environ.get("NO_COLOR") else ("\x1b[1m", "\x1b[0m")
    return "".join(part if i % 2 == 0 else on + part + off for i, part in enumerate(parts))


def tsv_cell(value):
    """A TSV cell as the IANA text/tab-separated-values form has it: no quotes; a tab, a line
    break or a backslash in the value written as \\t, \\n, \\r, \\\\ (PostgreSQL's COPY text)."""
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") \
        .replace("\r", "\\r")


def print_json(value, out):
    """JSON as the tools return it, indented for a person who reads it too."""
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")


def chosen_fields(args, fields):
    """The fields ``--fields`` picks (all by default), in its order; refuses an unknown one."""
    asked = getattr(args, "fields", None)
    if not asked:
        return list(fields)
    picked = [name.strip() for name in asked.split(",") if name.strip()]
    unknown = [name for name in picked if name not in fields]
    if unknown or not picked:
        raise CommandError("--fields: %s is not a field here; the fields are %s"
                           % (", ".join(unknown) or "nothing", ", ".join(fields)),
                           argument="--fields")
    return picked


def _cell(value):
    """A value as a CSV or TSV cell: JSON for lists and objects, true/false, empty for none."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def emit(rows, columns, args, out, render_table=None):
    """Print ``rows`` (dicts) as ``--format`` asks: a table (``columns`` maps each field to
    its heading and a cell function), JSON records, CSV or TSV, of the ``--fields`` chosen."""
    fmt = getattr(args, "format", None) or "table"
    names = chosen_fields(args, [name for name, _, _ in columns])
    if fmt == "json":
        return print_json([{name: row.get(name) for name in names} for row in rows], out)
    if fmt == "tsv":
        for cells in [names] + [[_cell(row.get(name)) for name in names] for row in rows]:
            out.write("\t".join(tsv_cell(cell) for cell in cells) + "\n")
        return None
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow([_cell(row.get(name)) for name in names])
        out.write(buffer.getvalue())
        return None
    if render_table is not None and not getattr(args, "fields", None):
        return render_table(rows, out)
    by_name = {name: (heading, cell) for name, heading, cell in columns}
    print(table([by_name[name][0] for name in names],
                [[by_name[name][1](row) for name in names] for row in rows]), file=out)
    return None


class Progress:
    """Progress of a long import or export on stderr: one line that updates in place on a
    terminal; piped, at most a line a second (and the last), for runs of many files."""

    WORDS = {"read": "read", "write": "applied", "export": "wrote"}
    NOUNS = {"read": "files", "write": "changes", "export": "files"}

    def __init__(self, stream):
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.last = 0.0
        self.shown = False
        self.done = {}

    def __call__(self, phase, done, total):
        self.done[phase] = (done, total)
        now = time.monotonic()
        line = "%s: %s %d of %d %s" % (PROG, self.WORDS[phase], done, total, self.NOUNS[phase])
        if self.tty:
            if done == total or now - self.last >= 0.1:
                self.stream.write("\r\x1b[K" + line)
                self.stream.flush()
                self.shown, self.last = True, now
        elif total >= PROGRESS_MIN_FILES and (done == total or now - self.last >= PROGRESS_EVERY_S):
            print(line, file=self.stream)
            self.last = now

    def finish(self):
        """End the updating line (a terminal's), so what follows starts on a line of its own."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def stale(error, args, out):
    """The Conflict (exit 3) a command raises for a VersionConflict: the error as JSON first
    under --json, in a person's words either way."""
    if args.json:
        print_json({"error": error.to_dict()}, out)
    return Conflict(person_message(error))
