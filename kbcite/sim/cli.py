"""The command line of the simulated day (``kb-sim``, ``python sim.py``, ``python -m kbcite.sim``):
its arguments, checked before the run, and the run's tables, JSON and exit status.
"""

import argparse
import json
import os
import re
import sys
import tempfile

from .. import __version__
from ..engines import POSTGRES_SCHEMES
from ..errors import ToolError
from ..validation import clip
from .figures import figures
from .model import (
    ACTIONS,
    AUDIENCES,
    MAX_ARTICLES,
    MAX_HOURS,
    MAX_QUESTIONS,
    MAX_SAVES,
    POPULARITY,
    QUESTIONS_FROM,
    SUBJECTS,
    SURFACES,
    Config,
)
from .report import render
from .runner import run

# --help's, and the first line of the package's docstring, which tells the rest.
DESCRIPTION = "A simulated support day that reproduces, and checks, the article's measurements."


def parse_seeds(text):
    """``1-5``, ``1,3,7`` or ``3`` as a list of distinct seeds in the order given."""
    seeds = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise argparse.ArgumentTypeError(
                "--seeds takes N, A-B or a comma list such as 1,3,7; got %r" % text)
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise argparse.ArgumentTypeError("--seeds range %s runs backwards" % part)
        if hi - lo > 10000:
            raise argparse.ArgumentTypeError("--seeds range %s is longer than 10,001 seeds" % part)
        for seed in range(lo, hi + 1):
            if seed not in seeds:
                seeds.append(seed)
    return seeds


def parse_delays(text):
    """``10s,10m,1h,4h`` as a tuple of seconds."""
    delays = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", part)
        if not m:
            raise argparse.ArgumentTypeError(
                "--delays takes a comma list of durations such as 10s,10m,1h,4h; got %r" % text)
        seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
        if seconds > 7 * 24 * 3600:
            raise argparse.ArgumentTypeError("--delays %s is longer than 7 days" % part.strip())
        delays.append(seconds)
    return tuple(delays)


def bounded(name, low, high, kind=int, why=""):
    """An argparse type: ``kind`` from ``low`` to ``high``, each refusal naming ``name``."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%s takes a number, got %r" % (name, text)) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError("%s must be from %s to %s%s, got %s"
                                             % (name, low, high, why, text))
        return value
    return parse


def file_error(path):
    """Why ``path`` cannot be written, or ``None``: tried (and undone) before a long run."""
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return "cannot write %s: %s" % (path, exc.strerror or exc)
    if not existed:
        os.remove(path)
    return None


def directory_error(path, what="keep databases", suffix=".db"):
    """Why the run cannot ``what`` in directory ``path`` (made if missing), or ``None``."""
    if os.path.exists(path) and not os.path.isdir(path):
        return "cannot %s in %s: it is a file, not a folder" % (what, path)
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix="sim-probe-", suffix=suffix, dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        return "cannot %s in %s: %s" % (what, path, exc.strerror or exc)
    return None


def plots_error(path):
    """Why the figures cannot be written in directory ``path`` (made if missing), or ``None``."""
    return directory_error(path, "write figures", ".svg")


def write_figures(report, directory):
    """Write every figure of ``report`` into ``directory``; returns the paths written."""
    paths = []
    for name, svg in figures(report).items():
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(svg)
        paths.append(path)
    return paths


def database_error(url):
    """Why the simulation cannot run on PostgreSQL at ``url``, or ``None``: tried before a run."""
    if not url.startswith(POSTGRES_SCHEMES):
        return ("%s is not a postgresql:// URL (keep SQLite files with --db-dir DIR)"
                % clip(url))
    try:
        # Imported here: PostgreSQL's driver loads only for a run that asks for it.
        from ..engines.postgres import drop_schema, schema_address

        schema_address(url, "sim_probe", fresh=True)
        drop_schema(url, "sim_probe")
    except (ToolError, ValueError) as exc:
        return getattr(exc, "message", str(exc))
    return None


def _parser(prog=None):
    # Without a prog argparse names the program as it was started: kb-sim, or sim.py.
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    p.add_argument("--version", action="version", version="%(prog)s " + __version__)
    d = Config()
    p.add_argument("--seeds", type=parse_seeds, default=parse_seeds("1-5"),
                   help="N, A-B or a comma list (default 1-5)")
    p.add_argument("--articles", type=bounded(
        "--articles", 2, MAX_ARTICLES, why=" (the distinct titles of %d actions x %d subjects x "
        "%d audiences x %d surfaces or none)" % (len(ACTIONS), len(SUBJECTS), len(AUDIENCES),
                                                  len(SURFACES))), default=d.articles,
                   help="articles in the knowledge base (2 to %d; default %d)"
                        % (MAX_ARTICLES, d.articles))
    p.add_argument("--questions", type=bounded("--questions", 1, MAX_QUESTIONS),
                   default=d.questions,
                   help="questions the agent answers over the day, at random times (1 to "
                        "%d; default %d)" % (MAX_QUESTIONS, d.questions))
    p.add_argument("--saves", type=bounded("--saves", 0, MAX_SAVES), default=d.saves,
                   help="people's saves over the day, at random times (0 to %d; default %d)"
                        % (MAX_SAVES, d.saves))
    p.add_argument("--hours", type=bounded("--hours", 1, MAX_HOURS), default=d.hours,
                   help="hours the day runs (1 to %d; default %d)" % (MAX_HOURS, d.hours))
    p.add_argument("--zipf", type=bounded("--zipf", 0.0, 10.0, float), default=d.zipf,
                   help="Zipf exponent s (0 = uniform popularity)")
    p.add_argument("--delays", type=parse_delays, default=d.delays,
                   help="edit delays, e.g. 10s,10m,1h,4h")
    p.add_argument("--popularity", choices=POPULARITY, default=d.popularity,
                   help="the popularity ranking: independent of titles, or topical (a subject's "
                        "articles on consecutive ranks)")
    p.add_argument("--questions-from", choices=QUESTIONS_FROM, default=d.questions_from,
                   help="a question's words: its article's title, or a paraphrase (action and "
                        "subject only)")
    p.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    p.add_argument("--plots", metavar="DIR",
                   help="also draw the figures as SVG files in DIR (made if missing)")
    p.add_argument("--db-dir", metavar="DIR", help="keep each run's SQLite file in DIR")
    # Not $KB_DB: that names the store a person works on (often a SQLite file), and the
    # article's run must work the same whatever the shell exports.
    p.add_argument("--db", metavar="URL", default=None,
                   help="run on PostgreSQL: a postgresql:// URL; each run gets a fresh schema "
                        "sim_seedN_PART in that database (default: in memory)")
    p.add_argument("--per-seed", action="store_true", help="add a column per seed")
    p.add_argument("--processes", type=bounded("--processes", 1, 64), default=None,
                   help="worker processes (default: one per core, at most one per seed)")
    return p


def main(argv=None, prog=None):
    """Run the simulation, print the tables, and exit non-zero if a check failed."""
    parser = _parser(prog)
    args = parser.parse_args(argv)
    config = Config(args.articles, args.questions, args.saves, args.hours, args.zipf, args.delays,
                    args.popularity, args.questions_from)
    for name, value, error in (("--json", args.json, file_error),
                               ("--plots", args.plots, plots_error),
                               ("--db-dir", args.db_dir, directory_error),
                               ("--db", args.db, database_error)):
        # An empty value (an unset variable in a script) is refused, not taken as none.
        problem = "an empty name: name a file, folder or URL" if value == "" else \
            value and error(value)
        if problem:
            parser.error("%s: %s" % (name, problem))
    if args.db and args.db_dir:
        parser.error("--db and --db-dir: give one (PostgreSQL, or SQLite files)")
    report = run(args.seeds, config, db_dir=args.db_dir, processes=args.processes,
                 db_url=args.db)
    status = 1 if report["check_mismatches"] else 0
    if args.json:
        # Written before the tables, so a reader that leaves early loses none of it.
        try:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(report, fh, indent=1, sort_keys=True)
                fh.write("\n")
        except OSError as exc:  # checked before the run, yet the disk can still fill up
            print("%s: --json: cannot write %s: %s"
                  % (parser.prog, args.json, exc.strerror or exc), file=sys.stderr)
            status = 1
    if args.plots:
        try:
            write_figures(report, args.plots)
        except OSError as exc:
            print("%s: --plots: cannot write in %s: %s"
                  % (parser.prog, args.plots, exc.strerror or exc), file=sys.stderr)
            status = 1
    try:
        print(render(report, per_seed=args.per_seed))
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (``kb-sim | head``): say nothing more to it, and let the interpreter's
        # last flush go nowhere instead of raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    failed = report["check_mismatches"]
    for line in failed[:20]:
        print("%s: check failed: %s" % (parser.prog, line), file=sys.stderr)
    if len(failed) > 20:
        print("%s: ... and %d more failed checks" % (parser.prog, len(failed) - 20),
              file=sys.stderr)
    return status
