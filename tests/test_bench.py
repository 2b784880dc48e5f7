"""bench/run.py stays runnable: a quick smoke run prints every table; bad options are refused."""

import json
import math
import runpy
import subprocess
import sys

import pytest

from support.commands import ROOT

# Runs the benchmarks' scripts: seconds each.
pytestmark = pytest.mark.slow

RUN = str(ROOT / "bench" / "run.py")
# A small day for the simulation benchmark: the smoke tests check that it runs and what it
# prints, not its figures.
SMALL_DAY = "--seeds 1 --articles 40 --questions 12 --saves 30 --hours 2 --processes 1"


def run_bench(*args, timeout=300):
    return subprocess.run([sys.executable, RUN] + list(args), capture_output=True,
                          timeout=timeout, cwd=str(ROOT))


def test_quick_run_prints_every_table_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    done = run_bench("--quick", "--json", str(out), "--dir", str(tmp_path))
    stdout = done.stdout.decode("utf-8")
    assert done.returncode == 0, done.stderr.decode("utf-8")
    for heading in ("## Simulation wall time", "## Tool latency against knowledge-base size",
                    "## Search beside its peers", "## Cost of checking citations as the day grows",
                    "## kb-server over Streamable HTTP under load",
                    "## Concurrent edits on one file database"):
        assert heading in stdout
    for header in ("| command | runs | median wall time", "| articles | build |",
                   "| articles | engine | build |",
                   "| articles / questions / saves |", "| processes | runs |"):
        assert header in stdout
    assert stdout.count("Load average (1 min) at start and end") == 6
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["results"]) == {"sim", "latency", "search", "scaling", "concurrency",
                                    "http"}
    [load] = data["results"]["http"]["rows"]
    assert load["protocol_errors"] == 0 and load["lost_updates"] == 0 and load["audit"] == "ok"
    assert load["connection_errors"] == 0
    assert load["calls"] >= 40
    engines = {row["engine"]: row for row in data["results"]["search"]["rows"]}
    assert {"ours (sqlite)", "fts5-or-bm25"} <= set(engines)
    assert engines["ours (sqlite)"]["top10_overlap"] == 1.0
    assert engines["ours (sqlite)"]["mean_hits"] > 0
    assert "tantivy" in engines or "tantivy" in data["results"]["search"]["skipped"]
    assert all(row["audit"] == "ok" for row in data["results"]["concurrency"]["rows"])
    sim_result = data["results"]["sim"]
    assert "median CPU time | SQLite's share of CPU" in stdout
    # A run that did work spent CPU, and SQLite's calls are part of it, never all of it.
    assert sim_result["median_cpu_s"] is None or sim_result["median_cpu_s"] > 0
    assert 0 < sim_result["sqlite"]["share"] < 1
    assert data["machine"]["sqlite"] and data["quick"] is True
    assert list(tmp_path.iterdir()) == [out]  # the temporary databases are gone


def test_only_runs_the_named_benchmark():
    done = run_bench("--quick", "--only", "scaling", "--scales", "0.05")
    stdout = done.stdout.decode("utf-8")
    assert done.returncode == 0, done.stderr.decode("utf-8")
    assert "## Cost of checking citations" in stdout and "## Tool latency" not in stdout
    assert "| 20 / 6 / 15 |" in stdout


def test_sensitivity_prints_every_combination_and_the_article():
    # A small day: the full one is the table's own command (docs/simulation.md).
    day = ["--articles", "40", "--questions", "20", "--saves", "30", "--hours", "2"]
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sensitivity.py"), "--seeds",
                           "1"] + day, capture_output=True, timeout=300, cwd=str(ROOT))
    stdout = done.stdout.decode("utf-8")
    assert done.returncode == 0, done.stderr.decode("utf-8")
    assert "`python bench/sensitivity.py --seeds 1 %s`" % " ".join(day) in stdout
    for row in ("| independent | title |", "| independent | paraphrase |", "| topical | title |",
                "| topical | paraphrase |", "| the article |"):
        assert row in stdout


def test_sensitivity_refuses_an_unwritable_json_before_running(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sensitivity.py"), "--json",
                           str(tmp_path / "missing" / "s.json")], capture_output=True,
                          timeout=60, cwd=str(ROOT))
    assert done.returncode == 2 and b"--json: cannot write" in done.stderr
    assert done.stdout == b""


@pytest.mark.parametrize("args,needle", [
    (["--only", "speed"], "--only"),
    (["--sizes", "10,x"], "--sizes"),
    (["--sizes", "0"], "--sizes"),
    (["--only", "latency", "--sizes", "1"], "at least 2 articles"),
    (["--processes", "-1"], "--processes"),
    (["--seconds", "0"], "--seconds"),
    (["--repeats", "many"], "--repeats"),
])
def test_bad_options_are_clear_errors(args, needle):
    done = run_bench(*args)
    assert done.returncode == 2
    assert needle in done.stderr.decode("utf-8")
    assert done.stdout == b""


def test_statistics():
    # The benchmarks' helpers, loaded as bench/run.py loads them, without bench/ on sys.path.
    common = runpy.run_path(str(ROOT / "bench" / "common.py"))
    median, percentile = common["median"], common["percentile"]
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    values = list(range(1, 101))
    assert percentile(values, 50) == 50
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile([7], 99) == 7
    with pytest.raises(ValueError):
        median([])


def test_the_benchmarks_measure_postgresql_or_say_why_not(tmp_path):
    done = run_bench("--quick", "--only", "latency", "--engines", "sqlite,postgresql",
                     "--sizes", "50", "--dir", str(tmp_path))
    stdout = done.stdout.decode("utf-8")
    assert done.returncode == 0, done.stderr.decode("utf-8")
    assert "| sqlite | 50 |" in stdout
    assert "| postgresql | 50 |" in stdout or "PostgreSQL not measured:" in stdout


def test_a_benchmark_without_postgresql_runs_with_the_default_engines(tmp_path):
    """`--only sim` (no --quick: both engines by default) needs no PostgreSQL and starts none;
    on a small day, since the default day's figures are not what is checked here."""
    done = run_bench("--only", "sim", "--repeats", "1", "--dir", str(tmp_path),
                     "--sim-args", SMALL_DAY)
    assert done.returncode == 0, done.stderr.decode("utf-8")
    stdout = done.stdout.decode("utf-8")
    assert "| python sim.py %s | 1 |" % SMALL_DAY in stdout and "PostgreSQL:" not in stdout


def test_search_quality_scores_every_engine_on_a_judged_collection(tmp_path):
    out = tmp_path / "quality.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "search_quality.py"),
                           "--collections", "cisi", "--json", str(out), "--dir",
                           str(tmp_path)], capture_output=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr.decode("utf-8")
    stdout = done.stdout.decode("utf-8")
    assert "### CISI (1,460 documents, 76 judged queries; tuning set)" in stdout
    assert "### Known items" in stdout
    data = json.loads(out.read_text(encoding="utf-8"))
    engines = {row["engine"]: row for row in data["rows"]}
    assert {"ours lexical (sqlite)", "fts5 bm25 (one field)", "fts5 bm25 (title+body)"} \
        <= set(engines)
    assert "ours hybrid (sqlite)" in engines or "ours hybrid" in data["skipped"]
    assert "tantivy bm25 (one field)" in engines or "tantivy" in data["skipped"]
    for row in engines.values():
        assert 0 < row["ndcg10"] < 1 and 0 < row["recall10"] < 1 and row["p50_ms"] > 0
        # CISI is of the tuning set; every engine is paired with the best of the BM25s.
        assert row["tuning"] and row["best_bm25"] in engines
        paired = row["vs_best_bm25"]
        assert paired["low"] <= paired["mean_diff"] <= paired["high"]
    best = engines[engines["ours lexical (sqlite)"]["best_bm25"]]
    assert best["ndcg10"] == max(engines[e]["ndcg10"] for e in engines if " bm25 (" in e
                                 and not e.startswith("reference"))
    assert "| CISI | tuning |" in stdout
    assert len(data["known"]["rows"]) >= 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quality.json"]


def test_search_quality_measures_as_documented(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    quality = runpy.run_path(str(ROOT / "bench" / "search_quality.py"))
    docs, queries, qrels = quality["load_collection"]("cacm")
    assert len(docs) == 3204 and len(queries) == 52
    assert all(qid in qrels for qid, _ in queries)
    # Cranfield's judgements number its queries in order (its .I numbers skip), and its
    # code -1 is not a judgement of relevance.
    docs, queries, qrels = quality["load_collection"]("cran")
    assert len(docs) == 1400 and len(queries) == 225 and queries[2][0] == 3
    assert queries[2][1].startswith("what problems of heat conduction in composite slabs")
    assert sum(len(found) for found in qrels.values()) == 1612
    assert [len(quality["load_collection"](name)[1]) for name in ("med", "adi")] == [30, 35]
    assert set(quality["TUNING"]) < set(quality["COLLECTIONS"]) and len(quality["TUNING"]) <= 2
    mean, low, high = quality["bootstrap"]([0.1, -0.2, 0.3, 0.0])
    assert mean == pytest.approx(0.05) and low < mean < high
    assert quality["bootstrap"]([0.1, -0.2, 0.3, 0.0]) == (mean, low, high)
    paired = quality["paired"]([1.0, 0.5, 0.0], [0.5, 0.5, 0.5])
    assert (paired["ratio"], paired["won"], paired["lost"]) == (1.0, 1, 1)
    assert quality["clip"]("one two  three", 9) == "one two"
    assert quality["ndcg"]([1, 2, 3], {1, 2, 3}) == 1.0
    assert quality["ndcg"]([9, 1], {1}) == pytest.approx(1 / math.log2(3))
    assert quality["recall"]([1, 9, 2], {1, 2, 3, 4}) == 0.5


def test_search_quality_refuses_an_unknown_collection():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "search_quality.py"),
                           "--collections", "trec"], capture_output=True, timeout=60,
                          cwd=str(ROOT))
    assert done.returncode == 2 and b"--collections" in done.stderr and done.stdout == b""


def test_the_worst_case_diff_benchmark_runs_and_stays_under_its_bound():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "diff_worst.py"), "--engines",
                           "sqlite", "--sizes", "6144", "--runs", "1"], capture_output=True,
                          text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| sqlite | letters | 6,144 |" in done.stdout and "largest call:" in done.stdout


def test_server_hops_counts_one_route_and_one_protocol_call_a_search_in_each_era(monkeypatch):
    # The counts are the benchmark's proof that a request is judged once: inbound's route
    # runs once a request, before the store, and the protocol handles it once.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    server_hops = runpy.run_path(str(ROOT / "bench" / "server_hops.py"))
    found = server_hops["count"](str(ROOT))
    assert set(found) == {"2025-11-25", "2026-07-28"}
    for era, figures in found.items():
        before = figures["calls"][:figures["before_store"]]
        assert figures["calls"][figures["before_store"]] == "(the store)", era
        assert before.count("inbound.py route") == 1, era
        assert before.count("protocol.py handle") == 1, era
        assert 0 < figures["before_store"] < figures["whole"], era
        assert figures["depth"] > 0, era
    table = server_hops["render"]([("here", found)])
    assert "| here | 2026-07-28 | %d |" % found["2026-07-28"]["before_store"] in table


def test_store_mix_times_each_tool_of_both_trees_on_the_same_calls(monkeypatch):
    # Small sizes: the smoke test checks that both sides make the planned calls and that the
    # table says so, not the figures.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    store_mix = runpy.run_path(str(ROOT / "bench" / "store_mix.py"))
    rows = store_mix["corpus"].articles(store_mix["random"].Random(1), 30)
    steps = store_mix["plan"](60, [title for title, _ in rows])
    kinds = [kind for kind, _, _ in steps]
    assert len(steps) + kinds.count("edit") >= 60 and {"search", "read"} <= set(kinds)
    runs = store_mix["measure"]("HEAD", 30, 60, 1)
    for label in ("new", "old"):
        (spent,) = runs[label]
        # Every planned call was made and timed: an edit is its read and itself.
        assert sum(calls for _, calls in spent.values()) == len(steps) + kinds.count("edit")
        assert spent["search_knowledge_base"][1] == kinds.count("search")
        assert all(seconds > 0 for seconds, _ in spent.values())
    table = store_mix["render"](runs, "HEAD")
    assert "| a call of the mix |" in table and "| edit_knowledge_article |" in table


def test_the_history_checkers_long_run_reports_what_it_ran():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "history_model.py"), "--quick",
                           "--engines", "sqlite"], capture_output=True, text=True, timeout=600,
                          cwd=str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = [line for line in done.stdout.splitlines() if line.startswith("| sqlite")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "5" and int(cells[2]) >= 5 and cells[4] == "none", row
