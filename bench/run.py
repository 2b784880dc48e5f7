"""Run the benchmarks and print their tables as Markdown.

    python bench/run.py                     # all four, a few minutes on two cores
    python bench/run.py --quick             # tiny sizes: a smoke run of a few seconds
    python bench/run.py --only latency --sizes 1000,10000
    python bench/run.py --json bench.json   # also write every number as JSON

Benchmarks: ``sim`` (wall and CPU time of ``python sim.py --seeds 1-5``, and SQLite's share
of it), ``latency`` (tool latency against knowledge-base size), ``search`` (search beside
plain FTS5 and tantivy on one corpus), ``scaling`` (cost of checking citations as the day
grows), ``concurrency`` (edits per second and conflicts with 1-8 writer processes) and
``http`` (16 clients x 250 calls against kb-server over Streamable HTTP). Each
reports the load average at its start and end: the numbers are only as quiet as the machine
was.
"""

import argparse
import json
import sys
import time

import common
import concurrency
import http_load
import latency
import scaling
import search
import sim_time

BENCHMARKS = ("sim", "latency", "search", "scaling", "concurrency", "http")

# Full runs: a few minutes in all on a two-core machine. Quick: a smoke run of seconds.
FULL = {"repeats": 5, "sim_args": sim_time.DEFAULT_ARGS,
        "sizes": (1000, 10000, 100000), "searches": 300, "reads": 1000, "edits": 300,
        "checks": 100,
        "search_sizes": (10000, 100000), "engines": ("sqlite", "postgresql"),
        "http_clients": 16, "http_calls": 250,
        "polls": 300, "scales": (1, 10, 30), "factor_scale": 3,
        "processes": (1, 2, 4, 8), "seconds": 3.0, "articles": 1000, "runs": 3}
QUICK = {"repeats": 1,
         "sim_args": ("--seeds", "1", "--articles", "40", "--questions", "12", "--saves", "30",
                      "--processes", "1"),
         # Each check round saves 50 articles, a commit each: 5 rounds, not 100.
         "sizes": (100, 300), "searches": 20, "reads": 50, "edits": 20, "polls": 20, "checks": 5,
         "search_sizes": (200,), "engines": ("sqlite",), "http_clients": 2, "http_calls": 20,
         "scales": (0.05, 0.1), "factor_scale": 0.1,
         "processes": (2,), "seconds": 0.3, "articles": 50, "runs": 1}

TITLES = {"sim": "Simulation wall time", "latency": "Tool latency against knowledge-base size",
          "search": "Search beside its peers",
          "http": "kb-server over Streamable HTTP under load",
          "scaling": "Cost of checking citations as the day grows",
          "concurrency": "Concurrent edits on one file database"}


def _list(kind, name):
    def parse(text):
        try:
            values = tuple(kind(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                "%s takes a comma list of numbers, got %r" % (name, text)) from None
        if not values or min(values) <= 0:
            raise argparse.ArgumentTypeError("%s takes positive numbers, got %r" % (name, text))
        return values
    return parse


def _only(text):
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in BENCHMARKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError("--only takes a comma list of %s; got %r"
                                         % (", ".join(BENCHMARKS), text))
    return names


def _engines(text):
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names or any(name not in ("sqlite", "postgresql") for name in names):
        raise argparse.ArgumentTypeError("--engines takes sqlite, postgresql or both; got %r"
                                         % text)
    return names


def _positive(kind, name):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%s takes a number, got %r" % (name, text)) from None
        if value <= 0:
            raise argparse.ArgumentTypeError("%s must be positive, got %r" % (name, text))
        return value
    return parse


def parser():
    """The command line."""
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    p.add_argument("--only", type=_only, default=BENCHMARKS, metavar="NAMES",
                   help="comma list of benchmarks to run: %s (default all)" % ", ".join(BENCHMARKS))
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    p.add_argument("--dir", metavar="DIR", help="where the temporary databases go")
    p.add_argument("--engines", type=_engines, metavar="NAMES",
                   help="latency, search and concurrency: sqlite, postgresql or both "
                        "(default both; --quick: sqlite)")
    p.add_argument("--postgres", metavar="URL",
                   help="measure PostgreSQL on this server (default: a throwaway cluster "
                        "started with initdb and pg_ctl, fsync on); each benchmark uses fresh "
                        "schemas bench_* and drops them")
    p.add_argument("--repeats", type=_positive(int, "--repeats"), help="sim: runs (default 5)")
    p.add_argument("--sim-args", type=lambda text: tuple(text.split()), metavar="ARGS",
                   help="sim: sim.py's arguments, one string (default %r; --quick: a small "
                        "day)" % " ".join(sim_time.DEFAULT_ARGS))
    p.add_argument("--sizes", type=_list(int, "--sizes"),
                   help="latency: article counts (default 1000,10000,100000)")
    p.add_argument("--searches", type=_positive(int, "--searches"),
                   help="latency and search: timed searches per size (default 300)")
    p.add_argument("--search-sizes", type=_list(int, "--search-sizes"),
                   help="search: article counts (default 10000,100000)")
    p.add_argument("--search-hybrid", action="store_true", default=None,
                   help="search: also ours hybrid (the [semantic] extra's model on, SQLite)")
    p.add_argument("--scales", type=_list(float, "--scales"),
                   help="scaling: multiples of the article's day (default 1,10,30)")
    p.add_argument("--processes", type=_list(int, "--processes"),
                   help="concurrency: writer process counts (default 1,2,4,8)")
    p.add_argument("--seconds", type=_positive(float, "--seconds"),
                   help="concurrency: seconds per run (default 3)")
    p.add_argument("--runs", type=_positive(int, "--runs"),
                   help="concurrency: runs per process count (default 3)")
    return p


def settings(args):
    """The sizes to run: full or quick, with any option given on the command line on top."""
    chosen = dict(QUICK if args.quick else FULL)
    for name in ("repeats", "sim_args", "sizes", "searches", "search_sizes", "search_hybrid",
                 "scales", "processes", "seconds", "runs", "engines"):
        if getattr(args, name) is not None:
            chosen[name] = getattr(args, name)
    return chosen


def run(names, s, directory=None, postgres_url=None):
    """Run the named benchmarks with settings ``s``; returns {name: result}."""
    results = {}
    engines = s["engines"]
    for name in names:
        started = time.perf_counter()
        if name == "sim":
            result = sim_time.run(s["repeats"], s["sim_args"])
        elif name == "latency":
            result = latency.run(s["sizes"], s["searches"], s["reads"], s["edits"], s["polls"],
                                 directory, engines, postgres_url, checks=s["checks"])
        elif name == "search":
            result = search.run(s["search_sizes"], s["searches"], directory, engines,
                                postgres_url, s.get("search_hybrid") or False)
        elif name == "scaling":
            result = scaling.run(s["scales"], factor_scale=s["factor_scale"])
        elif name == "http":
            result = {"rows": [http_load.run(s["http_clients"], s["http_calls"], directory,
                                             engine, postgres_url) for engine in engines]}
            result["load"] = [result["rows"][0]["load"][0], result["rows"][-1]["load"][1]]
        else:
            result = concurrency.run(s["processes"], s["seconds"], s["articles"],
                                     directory=directory, repeats=s["runs"], engines=engines,
                                     postgres_url=postgres_url)
        result["bench_seconds"] = round(time.perf_counter() - started, 1)
        results[name] = result
    return results


RENDER = {"sim": sim_time.render, "latency": latency.render, "search": search.render,
          "http": lambda result: http_load.render(result["rows"]),
          "scaling": scaling.render,
          "concurrency": concurrency.render}


def render(results, info, quick):
    """Every result as Markdown, with the machine and the load during each benchmark."""
    out = ["# Benchmarks%s\n" % (" (quick smoke run: tiny sizes, not for quoting)" if quick
                                 else ""),
           "Machine: %(cpus)s CPUs (%(cpu)s), Python %(python)s, SQLite %(sqlite)s, "
           "%(platform)s.\n" % info]
    if info.get("postgresql"):
        out.append("PostgreSQL: %s, on this machine, reached over its Unix socket, fsync on.\n"
                   % info["postgresql"])
    if info.get("postgresql_skipped"):
        out.append("PostgreSQL not measured: %s.\n" % info["postgresql_skipped"])
    code = info.get("code")
    if code:
        out.append("Code: commit %s%s.\n" % (code["commit"], (
            ", with uncommitted changes to %s" % ", ".join(code["uncommitted"]))
            if code["uncommitted"] else ""))
    for name, result in results.items():
        out.append("## %s\n" % TITLES[name])
        out.append(RENDER[name](result) + "\n")
        out.append("Load average (1 min) at start and end: %s and %s; this benchmark took "
                   "%.1f s.\n" % (result["load"][0], result["load"][1], result["bench_seconds"]))
    return "\n".join(out)


def main(argv=None):
    """Run, print, optionally write JSON; returns the exit status."""
    p = parser()
    args = p.parse_args(argv)
    info = dict(common.machine(), code=common.code_version())
    chosen = settings(args)
    if "latency" in args.only:
        try:  # before a PostgreSQL cluster is started for nothing
            latency.check_sizes(chosen["sizes"])
        except ValueError as exc:
            p.error(str(exc))
    cleanup, skipped, postgres_url = (lambda: None), None, None
    if "postgresql" in chosen["engines"] and set(args.only) & {"latency", "search",
                                                               "concurrency", "http"}:
        postgres_url, cleanup, skipped = common.server_for(args.postgres)
        if skipped:
            cleanup = lambda: None  # noqa: E731  (nothing was started)
            chosen["engines"] = tuple(e for e in chosen["engines"] if e != "postgresql")
        else:
            info["postgresql"] = common.postgres_version(postgres_url)
    try:
        results = run(args.only, chosen, args.dir, postgres_url)
    except ValueError as exc:  # a size the benchmark cannot run, e.g. --sizes 1
        p.error(str(exc))
    finally:
        cleanup()
    info["postgresql_skipped"] = skipped
    print(render(results, info, args.quick))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"machine": info, "quick": args.quick, "results": results}, fh, indent=1,
                      sort_keys=True)
            fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
