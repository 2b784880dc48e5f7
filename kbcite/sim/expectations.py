"""Closed-form expectations of the day's figures, from the model's parameters and what the agent
cited when; they never see a measured count.
"""

from typing import Any

from .model import (
    CHECK_STEP,
    CITATIONS_PER_ANSWER,
    HOUR_US,
    SAVE_MIX,
    TITLE_VISIBLE_SHARE,
    UNPUBLISH_SHARE,
)
from .oracle import any_between

# Each of a day's S people's saves falls at a uniform time and picks an article with its save
# chance q (Zipf by the ranking, or 1/N), independently of everything before it. So a version
# read with a share x of the saving day left is overtaken by the end of the day with chance
# 1 - (1 - q x)^S, whatever happened before the read; averaged over a uniform read time that is
# 1 - (1 - (1-q)^(S+1)) / ((S+1) q). Which article the agent cites, and when, comes from the
# run (it depends on search); everything else is arithmetic on the model's parameters. These
# functions never see a measured count.


def rounded(x):
    """``x`` to four decimals, the precision of every expectation in the report."""
    # Four decimals keep the JSON identical across platforms whose pow() differs in the last bit.
    return round(x, 4)


def zipf_weights(n, s):
    """The Zipf probabilities ``1/r**s`` (normalised) of ranks 1..n."""
    weights = [1.0 / rank ** s for rank in range(1, n + 1)]
    total = sum(weights)
    return [w / total for w in weights]


def save_chances(plan, config, uniform):
    """Each article's chance of being the one a people's save picks: Zipf by rank, or 1/N."""
    if uniform:
        return [1.0 / config.articles] * config.articles
    chances = [0.0] * config.articles
    for article, weight in zip(plan.ranking, zipf_weights(config.articles, config.zipf)):
        chances[article] = weight
    return chances


def p_touched(q, x, saves):
    """Chance that one of ``saves`` saves picks an article of save chance ``q`` within a share
    ``x`` of the day: ``1 - (1 - q x)^S``."""
    return 1.0 - (1.0 - q * x) ** saves


def p_touched_by_end(q, saves):
    """``p_touched`` from a uniform read time to the end: 1 - (1 - (1-q)^(S+1)) / ((S+1) q)."""
    if q <= 0.0:
        return 0.0
    n = saves + 1
    return 1.0 - (1.0 - (1.0 - q) ** n) / (n * q)


def expected_checks(q, reads, answers, versions, saves, day_us):
    """Expected end-of-day counts of a checked day, from the articles cited and when.

    ``reads`` holds each citation's ``(article, read t_us)``, ``answers`` each answer's
    citation indices, ``versions`` each citation's distinct version as the schedule numbers it.
    A distinct citation is judged from its first read: which read comes last depends on whether
    the version survives, but the first depends on the past alone. The title-only check sees a
    distinct citation when a retitle or an unpublish overtakes it; it is gone when an unpublish
    does.
    """
    left = [max(day_us - t, 0) / day_us for _, t in reads]
    stale = [p_touched(q[a], x, saves) for (a, _), x in zip(reads, left)]
    positions = [0.0] * CITATIONS_PER_ANSWER
    with_stale = 0.0
    for cited in answers:
        for p, c in enumerate(cited):
            positions[p] += stale[c]
        if cited:
            articles = {reads[c][0] for c in cited}
            with_stale += p_touched(sum(q[a] for a in articles), left[cited[0]], saves)
    first: dict[Any, int] = {}
    for c, version in enumerate(versions):
        first.setdefault(version, c)
    distinct = {"stale_distinct": 0.0, "title_only_distinct": 0.0, "gone_distinct": 0.0}
    for c in first.values():
        q_c, x = q[reads[c][0]], left[c]
        distinct["stale_distinct"] += p_touched(q_c, x, saves)
        distinct["title_only_distinct"] += p_touched(TITLE_VISIBLE_SHARE * q_c, x, saves)
        distinct["gone_distinct"] += p_touched(UNPUBLISH_SHARE * q_c, x, saves)
    out = {"by_position": [{"position": p + 1, "stale": rounded(v)}
                           for p, v in enumerate(positions)],
           "stale": rounded(sum(stale)), "answers_with_stale": rounded(with_stale)}
    out.update((k, rounded(v)) for k, v in distinct.items())
    return out


def expected_edits(q, edits, delays, saves, day_us):
    """Expected rejected and gone edits per delay, from the articles cited and when.

    ``edits`` holds ``(delay, article, read step, edit step)``. An edit is rejected for sure
    when another of the agent's edits of the same article lands between its read and itself;
    otherwise when a people's save does, with chance ``p_touched``. It finds the article gone
    when an unpublish does.
    """
    landed: dict[int, list[int]] = {}
    for _, article, _, at in edits:
        landed.setdefault(article, []).append(at)
    for steps in landed.values():
        steps.sort()
    rows = {d: {"delay_s": d, "rejected": 0.0, "gone": 0.0} for d in delays}
    for delay, article, read, at in edits:
        window = max(min(at[0], day_us) - read[0], 0) / day_us
        own = any_between(landed[article], read, at)
        rows[delay]["rejected"] += 1.0 if own else p_touched(q[article], window, saves)
        rows[delay]["gone"] += p_touched(UNPUBLISH_SHARE * q[article], window, saves)
    return [dict(rows[d], rejected=rounded(rows[d]["rejected"]), gone=rounded(rows[d]["gone"]))
            for d in delays]


def expected_by_hour(q, reads, answers, saves, day_us, hours):
    """Expected stale citations and answers holding one at each hourly check.

    ``reads`` holds each citation's ``(article, step of the read)``; at hour h a citation read
    before the check is stale when a save of its article falls between the read and the check,
    a share (h - t) / day of the saving day. The last hour's row is the end of day's figure.
    """
    rows = []
    for hour in range(1, hours + 1):
        now = (hour * HOUR_US, CHECK_STEP, hour)
        stale, with_stale = 0.0, 0.0
        for article, read in reads:
            if read < now:
                stale += p_touched(q[article], (now[0] - read[0]) / day_us, saves)
        for cited in answers:
            if cited and reads[cited[0]][1] < now:
                window = (now[0] - reads[cited[0]][1][0]) / day_us
                articles = {reads[c][0] for c in cited}
                with_stale += p_touched(sum(q[a] for a in articles), window, saves)
        rows.append({"hour": hour, "stale": rounded(stale),
                     "answers_with_stale": rounded(with_stale)})
    return rows


def p_passage_survives(k, n):
    """Chance that a passage, one of ``k`` paragraphs, outlives ``n`` saves that each rewrite
    one paragraph drawn uniformly: ``((k-1)/k)^n``."""
    return ((k - 1.0) / k) ** n


def expected_passages(q, reads, paragraph_counts, saves, day_us, hours):
    """Expected stale citations by passage verdict at each hourly check, from the model alone.

    Each of the S saves picks the cited article with chance q w (w: the share of the saving
    day between read and check) and is a content save (85%), a retitle (10%: it rewrites a
    paragraph too) or an unpublish (5%); a content save or retitle rewrites the passage with
    chance 1/k. So a citation is changed with its passage intact and its title kept with chance
    (1 - q w (1 - 0.85 (k-1)/k))^S - (1 - q w)^S: no save of it was an unpublish, a retitle or a
    rewrite of the passage, and at least one came; the other verdicts follow the same way.
    ``((k-1)/k)^n`` averaged over the binomial number n of saves in the window.
    """
    content, both = dict(SAVE_MIX)["content"], dict(SAVE_MIX)["content_title"]
    rows = []
    for hour in range(1, hours + 1):
        now = (hour * HOUR_US, CHECK_STEP, hour)
        row = dict.fromkeys(("stale", "intact", "rewritten", "retitled_intact",
                             "retitled_rewritten", "gone"), 0.0)
        for (article, read), k in zip(reads, paragraph_counts):
            if read >= now:
                continue
            qw = q[article] * (now[0] - read[0]) / day_us
            none = (1.0 - qw) ** saves
            kept = (k - 1.0) / k
            intact, same_title = (_only(qw, content * kept, saves) - none,
                                  _only(qw, content, saves) - none)
            intact_any, changed = (_only(qw, (content + both) * kept, saves) - none,
                                   _only(qw, content + both, saves) - none)
            row["stale"] += 1.0 - none
            row["intact"] += intact
            row["rewritten"] += same_title - intact
            row["retitled_intact"] += intact_any - intact
            row["retitled_rewritten"] += changed - same_title - (intact_any - intact)
            row["gone"] += 1.0 - (1.0 - UNPUBLISH_SHARE * qw) ** saves
        rows.append(dict({k: rounded(v) for k, v in row.items()}, hour=hour))
    return rows


def _only(qw, share, saves):
    """Chance that every save of the article in the window is of the kinds and paragraphs that
    ``share`` of its saves covers (none at all included): ``(1 - q w (1 - share))^S``."""
    return (1.0 - qw * (1.0 - share)) ** saves


def model_expectations(config):
    """Expectations from the parameters alone, for a citation read at a uniform time."""
    weights = zipf_weights(config.articles, config.zipf)
    return {
        "uniform_saves_any_article": rounded(p_touched_by_end(1.0 / config.articles,
                                                              config.saves)),
        "zipf_saves_question_own_article": rounded(
            sum(w * p_touched_by_end(w, config.saves) for w in weights)),
        "zipf_saves_article_of_independent_popularity": rounded(
            sum(p_touched_by_end(w, config.saves) for w in weights) / config.articles),
    }


def saves_for_stale_share(q, share):
    """The fewest saves that make a citation read at a uniform time stale with ``share``."""
    low, high = 0, 1
    while p_touched_by_end(q, high) < share:
        high *= 2
    while low < high:
        mid = (low + high) // 2
        if p_touched_by_end(q, mid) < share:
            low = mid + 1
        else:
            high = mid
    return low
