"""What the command line prints: tables for a person, JSON as the tools return it, progress."""

import json
import time

from .messages import PROG

# Long imports report progress on stderr at most this often.
PROGRESS_EVERY_S = 1.0


def table(header, rows):
    """Rows as left-aligned text columns under ``header``; the last column is not padded."""
    rows = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header) - 1)]
    lines = []
    for row in [header] + rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def one_line(text, width):
    """``text`` on one line, cut to ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def print_json(value, out):
    """JSON as the tools return it, indented for a person who reads it too."""
    json.dump(value, out, ensure_ascii=False, indent=2)
    out.write("\n")


class Progress:
    """Progress of a long import on stderr: at most one line a second, and the last."""

    def __init__(self, stream):
        self.stream = stream
        self.last = 0.0

    def __call__(self, phase, done, total):
        now = time.monotonic()
        if done == total or now - self.last >= PROGRESS_EVERY_S:
            if total >= 100:
                print("%s: %s %d of %d files" % (PROG, {"read": "read", "write": "wrote"}[phase],
                                                 done, total), file=self.stream)
            self.last = now
