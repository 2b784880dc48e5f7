"""The report as Markdown: one function a table, and ``render`` joining them."""

from .expectations import p_touched_by_end, saves_for_stale_share
from .model import ARTICLE, SAVE_MIX, UNPUBLISH_SHARE, Config, delay_text


def _pct(n, d):
    return "%.1f%%" % (100.0 * n / d) if d else "-"


def markdown_table(header, rows):
    """A Markdown table; the first column left-aligned, the rest right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _n(x):
    return "{:,}".format(x)


def _count_pct(count, of):
    """A count (a float for an expectation) with its share: ``368 (61.3%)``, ``351.2 (58.5%)``."""
    text = _n(count) if isinstance(count, int) else "{:,.1f}".format(count)
    return "%s (%s)" % (text, _pct(count, of))


def render(report, per_seed=False):
    """The report as Markdown: the heading, the six numbered tables and, if asked, per seed."""
    out = [heading(report), staleness_table(report), position_table(report),
           detection_table(report), cost_table(report), edits_table(report),
           idempotency_table(report), comparison_table(report)]
    if "passages" in report:  # a report written before the seventh table has none
        out += [passages_table(report), passages_expected_table(report),
                passages_cost_table(report)]
    if per_seed:
        out.append("## Per seed\n")
        out.append(per_seed_table(report) + "\n")
    return "\n".join(out)


def heading(report):
    """The report's title and the day's sizes and modelling choices."""
    cfg = report["config"]
    return "\n".join([
        "# Simulated support day, seeds %s, summed\n" % seed_text(report["seeds"]),
        "%d articles, %d questions, %d people's saves over %d hours per seed; Zipf s = %g "
        "over a ranking %s; questions from %s.\n"
        % (cfg["articles"], cfg["questions"], cfg["saves"], cfg["hours"], cfg["zipf"],
           "independent of titles" if cfg["popularity"] == "independent"
           else "that keeps each subject's articles together",
           "titles" if cfg["questions_from"] == "title"
           else "action and subject words only"),
    ])


def staleness_table(report):
    """Table 1: stale citations, distinct citations and answers hour by hour, both days."""
    rows = []
    for z, u in zip(report["staleness"]["zipf"], report["staleness"]["uniform"]):
        row = [z["hour"]]
        for r in (z, u):
            row += [_n(r["citations"]),
                    "%s (%s)" % (_n(r["stale"]), _pct(r["stale"], r["citations"])),
                    _n(r["distinct"]),
                    "%s (%s)" % (_n(r["stale_distinct"]), _pct(r["stale_distinct"], r["distinct"])),
                    _n(r["answers"]),
                    "%s (%s)" % (_n(r["answers_with_stale"]),
                                 _pct(r["answers_with_stale"], r["answers"]))]
        rows.append(row)
    header = ["hour"] + ["%s %s" % (m, c) for m in ("zipf", "ctrl") for c in (
        "citations", "stale", "distinct", "stale distinct", "answers", "answers w/ stale")]
    return "\n".join(["## 1. Staleness by hour (Zipf saves | uniform control)\n",
                      markdown_table(header, rows) + "\n"])


def position_table(report):
    """Table 1, continued: end of day by the citation's place in its answer, with expectations."""
    rows = []
    expected = report["expected"]
    for z, u, ez, eu in zip(report["staleness"]["zipf_by_position"],
                            report["staleness"]["uniform_by_position"],
                            expected["zipf"]["by_position"], expected["uniform"]["by_position"]):
        rows.append([z["position"], _n(z["citations"]), _count_pct(z["stale"], z["citations"]),
                     _count_pct(ez["stale"], z["citations"]),
                     _count_pct(u["stale"], u["citations"]),
                     _count_pct(eu["stale"], u["citations"])])
    return "\n".join([
        "End of day by the citation's place in its answer (1: the top search hit, which "
        "is the question's own article in %s of Zipf answers):\n"
        % _pct(report["workload"]["first_hit_is_target"], report["workload"]["questions"]),
        markdown_table(["position", "citations", "zipf stale", "zipf expected",
                        "ctrl stale", "ctrl expected"], rows) + "\n",
        "Expected: the closed form 1 - (1 - q x)^S summed over the citations, with S the "
        "day's people's saves, q the cited article's chance of being the one a save "
        "picks and x the share of the day left after the read; which article each "
        "answer cited, and when, is the run's.\n",
    ])


def detection_table(report):
    """Table 2: what each strategy found stale at the end of the Zipf day, by cause."""
    det = report["detection"]
    gt = det["ground_truth"]
    rows = []
    for name, label in (("ground_truth", "ground truth (database)"),
                        ("schedule", "schedule (no store call)"), ("title_only", "title only"),
                        ("reread", "re-read"), ("poll", "poll")):
        d = det[name]
        rows.append([label, "%s (%s)" % (_n(d["stale"]), _pct(d["stale"], gt["stale"])),
                     "%s (%s)" % (_n(d["stale_distinct"]),
                                  _pct(d["stale_distinct"], gt["stale_distinct"])),
                     _n(d["content_only"]), _n(d["retitled"]), _n(d["gone"]),
                     _n(d["false_stale"])])
    return "\n".join([
        "## 2. Detection at end of day (Zipf)\n",
        markdown_table(["strategy", "stale citations found", "stale distinct found",
                        "content only", "retitled", "gone", "false alarms"], rows) + "\n",
        "Causes count distinct citations. A retitle also changes content, so the title "
        "check sees only retitles and unpublishes. The schedule's row is the oracle: "
        "staleness from the plan's saves and the citations' read times alone; the run "
        "fails unless the database, re-read and poll agree with it at every check.\n",
    ])


def cost_table(report):
    """Table 3: the tool calls, reads and bytes of all the Zipf day's hourly checks."""
    cost = report["cost"]
    rows = []
    for name, label in (("title_only", "title only"), ("reread", "re-read"), ("poll", "poll")):
        c = cost[name]
        rows.append([label, _n(c["calls"]), _n(c["articles_read"]), _n(c["bytes_read"]),
                     _n(c["events"])])
    r, p = cost["reread"], cost["poll"]
    rows.append(["re-read / poll", _ratio_text(r["calls"], p["calls"]),
                 _ratio_text(r["articles_read"], p["articles_read"]),
                 _ratio_text(r["bytes_read"], p["bytes_read"]), "-"])
    return "\n".join([
        "## 3. Cost of all hourly checks (Zipf, %d checks)\n" % report["checks"]["zipf"],
        markdown_table(["strategy", "tool calls", "articles read", "bytes of article text",
                        "events fetched"], rows) + "\n",
    ])


def edits_table(report):
    """Table 4: the edit trial by delay, with the expected rejections."""
    rows = []
    for e, x in zip(report["edits"], report["expected"]["edits"]):
        rejected = e["rejected_changed"] + e["rejected_gone"]
        rows.append([delay_text(e["delay_s"]), _n(e["edits"]), _n(e["accepted_first_try"]),
                     _n(e["rejected_changed"]), _n(e["rejected_gone"]),
                     _pct(rejected, e["edits"]), _pct(x["rejected"], e["edits"]),
                     "%.1f" % x["gone"],
                     "%d of %d" % (e["retries_succeeded"],
                                   e["retries_succeeded"] + e["retries_failed"])])
    return "\n".join([
        "## 4. Edits with the citation's version, by delay\n",
        markdown_table(["delay", "edits", "accepted first try", "rejected: changed",
                        "rejected: gone", "rejected", "expected rejected",
                        "expected gone", "retries succeeded"], rows) + "\n",
        "Expected: rejected for sure when another of the agent's own edits of the "
        "article lands in between, else with chance 1 - (1 - q w)^S, w the share of the "
        "saving day between read and edit; gone with 1 - (1 - %g q w)^S.\n"
        % UNPUBLISH_SHARE,
    ])


def idempotency_table(report):
    """Table 5: the replays of successful edits, and the events they wrote (none, if right)."""
    i = report["idempotency"]
    return "\n".join([
        "## 5. Idempotency\n",
        markdown_table(["successful edits", "replays sent", "replays marked as replay",
                        "events written by replays"],
                       [[_n(i["successful_edits"]), _n(i["replays"]), _n(i["replays_marked"]),
                         _n(i["new_events_from_replays"])]]) + "\n",
    ])


def comparison_table(report):
    """Table 6: the article's figures beside ours and the model's, and the notes on them."""
    return "\n".join([
        "## 6. The article beside us\n",
        markdown_table(["figure", "article", "ours", "expected (model)"],
                       comparison_rows(report)) + "\n",
        "\n".join("%d. %s" % (i + 1, note) for i, note in enumerate(article_notes())) + "\n",
    ])


def comparison_rows(report):
    """The side-by-side of SPEC's figures, ours and the model's expectation, as table rows."""
    w = report["workload"]
    z, u = report["staleness"]["zipf"][-1], report["staleness"]["uniform"][-1]
    ez, eu = report["expected"]["zipf"], report["expected"]["uniform"]
    model = report["expected"]["model"]
    det = report["detection"]
    gt, title = det["ground_truth"], det["title_only"]
    edits, expected_edits = report["edits"], report["expected"]["edits"]
    total_edits = sum(e["edits"] for e in edits)
    gone = sum(e["rejected_gone"] for e in edits)
    retries = sum(e["retries_succeeded"] for e in edits)
    retries_all = retries + sum(e["retries_failed"] for e in edits)
    idem = report["idempotency"]
    checks = report["checks"]["zipf"]
    poll = report["cost"]["poll"]
    by_delay = "; ".join("%s %s" % (delay_text(e["delay_s"]),
                                    _pct(e["rejected_changed"] + e["rejected_gone"], e["edits"]))
                         for e in edits)
    expected_by_delay = "; ".join("%s %s" % (delay_text(e["delay_s"]),
                                             _pct(x["rejected"], e["edits"]))
                                  for e, x in zip(edits, expected_edits))
    return [
        ["top-10 share of questions / saves", "36.7% / 36.7%",
         "%.1f%% / %.1f%%" % (100 * w["top10_question_share"], 100 * w["top10_save_share"]),
         "%.1f%% (Zipf %g over %d)" % (100 * w["top10_zipf_expected"], report["config"]["zipf"],
                                       report["config"]["articles"])],
        ["stale citations at end of day, Zipf", "369 of 1,200 (30.8%)",
         "%s of %s citations (%s); %s of %s distinct (%s)" % (
             _n(z["stale"]), _n(z["citations"]), _pct(z["stale"], z["citations"]),
             _n(z["stale_distinct"]), _n(z["distinct"]), _pct(z["stale_distinct"], z["distinct"])),
         "%s citations; %s distinct" % (_count_pct(ez["stale"], z["citations"]),
                                         _count_pct(ez["stale_distinct"], z["distinct"]))],
        ["answers with a stale citation, Zipf", "four out of five (note 1)",
         "%s of %s (%s)" % (_n(z["answers_with_stale"]), _n(z["answers"]),
                            _pct(z["answers_with_stale"], z["answers"])),
         _count_pct(ez["answers_with_stale"], z["answers"])],
        ["control: stale citations", "167 of 1,200 (13.9%) (note 2)",
         "%s of %s citations (%s); %s of %s distinct (%s)" % (
             _n(u["stale"]), _n(u["citations"]), _pct(u["stale"], u["citations"]),
             _n(u["stale_distinct"]), _n(u["distinct"]), _pct(u["stale_distinct"], u["distinct"])),
         "%s citations; %s distinct; any citation read at a uniform time: %.1f%%" % (
             _count_pct(eu["stale"], u["citations"]),
             _count_pct(eu["stale_distinct"], u["distinct"]),
             100 * model["uniform_saves_any_article"])],
        ["control: answers with a stale citation", "280 of 600 (46.7%) (note 1)",
         "%s of %s (%s)" % (_n(u["answers_with_stale"]), _n(u["answers"]),
                            _pct(u["answers_with_stale"], u["answers"])),
         _count_pct(eu["answers_with_stale"], u["answers"])],
        ["stale found by title only", "152 of 369 (41.2%), all retitles or unpublishes",
         "%s of %s distinct (%s): %d retitled, %d gone, %d content-only, %d false alarms" % (
             _n(title["stale_distinct"]), _n(gt["stale_distinct"]),
             _pct(title["stale_distinct"], gt["stale_distinct"]), title["retitled"],
             title["gone"], title["content_only"], title["false_stale"]),
         "%.1f of %.1f distinct (%s)" % (ez["title_only_distinct"], ez["stale_distinct"],
                                         _pct(ez["title_only_distinct"], ez["stale_distinct"]))],
        ["re-read and poll found", "exactly the ground truth, at each of 40 checks",
         "%s at each of %d checks (plus %d control checks and every edit); %d mismatches" % (
             "exactly the schedule's truth (so did the database's rows)" if not
             report["check_mismatches"] else "NOT the schedule's truth",
             checks, report["checks"]["uniform"], len(report["check_mismatches"])),
         "the schedule's truth, by construction of a correct store"],
        ["poll cost", "one call per check (< 100 changes an hour)",
         "%d event pages over %d checks, %s events" % (poll["pages"], checks, _n(poll["events"])),
         "-"],
        ["edits whose article was unpublished by then", "19 of 600",
         "%d of %d" % (gone, total_edits),
         "%.1f" % sum(x["gone"] for x in expected_edits)],
        ["edit with an hour-old citation", "fails nearly 4 in 10; seconds old: fine",
         "rejected: " + by_delay, expected_by_delay],
        ["retries after re-read", "all succeeded", "%d of %d succeeded" % (retries, retries_all),
         "all: nothing lands between a re-read and its retry"],
        ["idempotent replays", "409 of 409 marked, no new event",
         "%d of %d marked, %d new events" % (idem["replays_marked"], idem["replays"],
                                              idem["new_events_from_replays"]), "-"],
        ["whole run", "25.7 s (M1, Python 3.9.6)",
         "%.2f s (%d processes, Python %s)" % (report["timing"]["seconds"],
                                                report["timing"]["processes"],
                                                report["timing"]["python"]), "-"],
    ]


def article_notes():
    """Where the article's own figures cannot all hold, with the arithmetic (its day's sizes)."""
    day = Config()
    q = 1.0 / day.articles
    control = p_touched_by_end(q, day.saves)
    needed = saves_for_stale_share(q, ARTICLE["stale_control"] / ARTICLE["citations"])
    return [
        "An answer holding a stale citation holds one of its own, so such answers cannot "
        "outnumber stale citations. The article's %d control answers against %d stale "
        "citations, and its Zipf \"four out of five\" (%d of %d answers) against %d, are "
        "impossible if those citations are of the %s handed out; they fit as *distinct* "
        "citations, so we count both ways."
        % (ARTICLE["answers_stale_control"], ARTICLE["stale_control"],
           ARTICLE["answers_stale_zipf"], ARTICLE["answers"], ARTICLE["stale_zipf"],
           _n(ARTICLE["citations"])),
        "With saves spread uniformly every article has q = 1/%d, and a citation read at a "
        "uniform time is stale by evening with chance 1 - (1 - (1-q)^%d) / (%d q) = %.1f%%, "
        "whichever article it cites. The article's %d of %s (%.1f%%) would need about %d "
        "saves, not %d."
        % (day.articles, day.saves + 1, day.saves + 1, 100 * control, ARTICLE["stale_control"],
           _n(ARTICLE["citations"]), 100.0 * ARTICLE["stale_control"] / ARTICLE["citations"],
           needed, day.saves),
    ]


# The seventh table's verdicts of a stale citation, in its order, with their column names.
PASSAGE_COLUMNS = (("intact", "passage intact"), ("rewritten", "passage rewritten"),
                   ("retitled_intact", "retitled, intact"),
                   ("retitled_rewritten", "retitled, rewritten"), ("gone", "gone"))
# The ways of finding out, as the cost table names them.
PASSAGE_STRATEGY_LABELS = (
    ("reread", "re-read every cited article and compare"),
    ("check_all", "check_citations on every citation"),
    ("poll_check", "poll, then check_citations for the changed"),
    ("poll_reread", "poll, then re-read the changed (table 3's poll)"))


def passages_table(report):
    """Table 7: stale citations hour by hour by what became of the passage, both days."""
    p = report["passages"]
    rows = []
    for z, u in zip(p["zipf"]["hourly"], p["uniform"]["hourly"]):
        row = [z["hour"]]
        for r in (z, u):
            row.append(_n(r["stale"]))
            row += [_count_pct(r[key], r["stale"]) for key, _ in PASSAGE_COLUMNS]
        rows.append(row)
    header = ["hour"] + ["%s %s" % (m, c) for m in ("zipf", "ctrl")
                         for c in ["stale"] + [label for _, label in PASSAGE_COLUMNS]]
    return "\n".join([
        "## 7. Do stale citations still say what the answer used? (Zipf saves | uniform "
        "control)\n",
        markdown_table(header, rows) + "\n",
        "The passage is the paragraph (the content split at blank lines) of the article the "
        "agent read that holds the first match its search snippet marked, recorded when the "
        "answer was made (where a snippet marks no match, %s citations of %s, the paragraph its "
        "window starts in). Intact: that exact text is still one of the current version's "
        "paragraphs. A retitle rewrites a paragraph too, so retitled citations are split the "
        "same way. Counted as the agent found them by polling and asking check_citations "
        "about the citations of what changed; re-reading every cited article, re-reading "
        "what changed and (on the Zipf day) check_citations on every citation find the "
        "same, and the run fails unless every way agrees with the schedule's saves (no "
        "store call) for every citation at every check.\n"
        % (_n(p["zipf"]["unmarked"] + p["uniform"]["unmarked"]),
           _n(report["staleness"]["zipf"][-1]["citations"]
              + report["staleness"]["uniform"][-1]["citations"])),
    ])


def passages_expected_table(report):
    """Table 7, continued: the end of day beside the two expectations, both days."""
    p = report["passages"]
    rows = []
    ends = [(p[m]["hourly"][-1], p[m]["expected_given_saves"][-1], p[m]["expected"][-1])
            for m in ("zipf", "uniform")]
    for key, label in (("stale", "stale citations"),) + PASSAGE_COLUMNS:
        row = [label]
        for found, given, model in ends:
            if key == "stale":
                row += [_n(found[key]), "{:,.1f}".format(given[key]),
                        "{:,.1f}".format(model[key])]
            else:
                row += [_count_pct(found[key], found["stale"]),
                        _count_pct(given[key], given["stale"]),
                        _count_pct(model[key], model["stale"])]
        rows.append(row)
    row = ["intact, share of the changed (not gone)"]
    for found, given, model in ends:
        row += [_pct(r["intact"] + r["retitled_intact"], r["stale"] - r["gone"])
                for r in (found, given, model)]
    rows.append(row)
    return "\n".join([
        "End of day, beside the expectations:\n",
        markdown_table(["figure", "zipf", "zipf expected given the saves",
                        "zipf expected (model)", "ctrl", "ctrl expected given the saves",
                        "ctrl expected (model)"], rows) + "\n",
        "Given the saves: a content save or a retitle rewrites one of the article's k "
        "paragraphs, drawn uniformly, so a passage outlives the n saves since its read with "
        "chance ((k-1)/k)^n, summed over the changed citations; stale and gone are the "
        "schedule's. The model: the same averaged over the saves a citation may meet, "
        "(1 - q w (1 - c))^S - (1 - q w)^S with c = %g (k-1)/k for a kept title and %g "
        "(k-1)/k for any, w the share of the saving day between the read and the check.\n"
        % (dict(SAVE_MIX)["content"], dict(SAVE_MIX)["content"]
           + dict(SAVE_MIX)["content_title"]),
    ])


def passages_cost_table(report):
    """Table 7, continued: what finding out cost over all the Zipf day's checks, four ways."""
    cost = report["passages"]["zipf"]["cost"]
    rows = []
    for name, label in PASSAGE_STRATEGY_LABELS:
        c = cost[name]
        rows.append([label, _n(c["calls"]), _n(c["check_calls"]), _n(c["citations_sent"]),
                     _n(c["articles_read"]), _n(c["bytes_read"])])
    return "\n".join([
        "Cost of finding out (Zipf, %d checks):\n" % report["checks"]["zipf"],
        markdown_table(["way", "tool calls", "check_citations calls", "citations sent",
                        "articles read", "bytes of article text"], rows) + "\n",
        "Bytes of article text: UTF-8 title and content of every article read; for "
        "check_citations, the paragraphs each changed citation's hunks remove and add and, "
        "when retitled, its old and new title. check_citations goes 100 distinct citations a "
        "call; a poll's pages count in both poll rows (the checks made them once). An "
        "article cited at several versions is answered once per version, each with its "
        "whole change since.\n",
    ])


def per_seed_table(report):
    """Key end-of-day figures with a column per seed."""
    header = ["figure", "all"] + ["seed %d" % s for s in report["seeds"]]

    def row(label, fn):
        return [label, fn(None)] + [fn(r) for r in report["per_seed"]]

    def end(mode, key):
        def fn(r):
            rows = report["staleness"][mode] if r is None else r[mode]["hourly"]
            return _n(rows[-1][key])
        return fn

    def det(key):
        return lambda r: _n((report["detection"] if r is None
                             else r["zipf"]["detection"])["title_only"][key])

    def edit(i, key):
        return lambda r: _n((report["edits"] if r is None else r["edits"]["edits"])[i][key])

    rows = [
        row("zipf: stale citations", end("zipf", "stale")),
        row("zipf: stale distinct", end("zipf", "stale_distinct")),
        row("zipf: answers with stale", end("zipf", "answers_with_stale")),
        row("control: stale citations", end("uniform", "stale")),
        row("control: stale distinct", end("uniform", "stale_distinct")),
        row("control: answers with stale", end("uniform", "answers_with_stale")),
        row("title only: stale distinct found", det("stale_distinct")),
    ]
    for i, d in enumerate(report["config"]["delays"]):
        rows.append(row("edits at %s rejected: changed" % delay_text(d),
                        edit(i, "rejected_changed")))
        rows.append(row("edits at %s rejected: gone" % delay_text(d), edit(i, "rejected_gone")))
    return markdown_table(header, rows)


def _ratio_text(a, b):
    return "%.1fx" % (a / b) if b else "-"


def seed_text(seeds):
    """Seeds as the command line takes them: ``1-5`` for a run of them, else ``1,3,7``."""
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return "%d-%d" % (seeds[0], seeds[-1])
    return ",".join(str(s) for s in seeds)
