"""Drawing one seed's day: its articles, ranking, questions and people's saves, all from one
``random.Random(seed)`` through ``.random()`` alone; and the schedule of those saves, with the
titles they leave, replayed from the plan without a store.
"""

import random
from typing import Any

from .model import (
    ACTIONS,
    AUDIENCES,
    CLOSERS,
    HOUR_US,
    MIDDLES,
    OPENERS,
    SAVE_MIX,
    SAVE_STEP,
    SUBJECTS,
    SURFACES,
    Change,
    Plan,
    Question,
    Save,
)


def pick(seq, u):
    """The element of ``seq`` that a uniform ``u`` in [0, 1) selects."""
    return seq[min(int(u * len(seq)), len(seq) - 1)]


def shuffled(rng, items):
    """A Fisher-Yates shuffle drawing only ``rng.random()`` (stable across Python versions)."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = min(int(rng.random() * (i + 1)), i)
        items[i], items[j] = items[j], items[i]
    return items


def zipf_cumulative(n, s):
    """Cumulative Zipf weights ``1/r**s`` for ranks 1..n, normalised to end at 1."""
    total, cumulative = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank ** s
        cumulative.append(total)
    return [c / total for c in cumulative]


def draw_rank(cumulative, u):
    """The 0-based rank that ``u`` falls in (binary search over the cumulative weights)."""
    lo, hi = 0, len(cumulative) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if u < cumulative[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


def draw_kind(mix, u):
    """The name of ``(name, share)`` pairs ``mix`` whose share ``u`` (in [0, 1)) falls in."""
    for name, share in mix:
        if u < share:
            return name
        u -= share
    return mix[-1][0]


def top_share(cumulative, k):
    """The probability mass of the top ``k`` ranks."""
    return cumulative[min(k, len(cumulative)) - 1]


def make_sentence(subject, action, u):
    """One body sentence about ``subject`` from three uniforms."""
    opener = pick(OPENERS, u[0]).format(s=subject, a=action.lower())
    return "%s %s. %s" % (opener, pick(MIDDLES, u[1]), pick(CLOSERS, u[2]))


def make_paragraph(subject, action, u):
    """A paragraph of two sentences about ``subject`` from six uniforms."""
    return "%s %s" % (make_sentence(subject, action, u[0:3]),
                      make_sentence(subject, action, u[3:6]))


def rewrite(save, count, subject, action):
    """``(index, text)``: the paragraph a content save replaces among ``count``, and its new
    text, from the save's uniforms (the first picks the paragraph, the next six write it)."""
    u = save.text_u
    return min(int(u[0] * count), count - 1), make_paragraph(subject, action, u[1:7])


def make_titles(rng, n):
    """``n`` distinct titles with their subjects, drawn from the vocabulary."""
    seen: set[str] = set()
    titles: list[str] = []
    subjects: list[Any] = []
    while len(titles) < n:
        action, subject, audience = (pick(ACTIONS, rng.random()), pick(SUBJECTS, rng.random()),
                                     pick(AUDIENCES, rng.random()))
        title = "%s %s %s" % (action, subject, audience)
        if title in seen:
            title = "%s %s" % (title, pick(SURFACES, rng.random()))
            if title in seen:
                continue
        seen.add(title)
        titles.append(title)
        subjects.append((action, subject))
    return titles, subjects


def make_body(rng, action, subject):
    """An article body: three to five paragraphs, mostly about its own subject."""
    paragraphs = []
    for i in range(3 + int(rng.random() * 3)):
        # One paragraph in four mentions a neighbouring subject, as real help articles do.
        about = subject if i == 0 or rng.random() >= 0.25 else pick(SUBJECTS, rng.random())
        paragraphs.append(make_paragraph(about, action, [rng.random() for _ in range(6)]))
    return "\n\n".join(paragraphs)


def topical_ranking(ranking, subjects):
    """The ranking with each subject's articles moved onto consecutive ranks.

    Subjects take the order of their best-ranked article and keep their articles' order, so
    no randomness is drawn: a seed's questions and saves are the same draws either way, and
    the top ranks keep their Zipf share.
    """
    order: list[str] = []
    members: dict[str, list[int]] = {}
    for article in ranking:
        subject = subjects[article][1]
        if subject not in members:
            members[subject] = []
            order.append(subject)
        members[subject].append(article)
    return [article for subject in order for article in members[subject]]


def draw_plan(seed, config):
    """Draw one seed's whole day: corpus, ranking, questions and saves, in a fixed order."""
    rng = random.Random(seed)
    titles, subjects = make_titles(rng, config.articles)
    bodies = [make_body(rng, a, s) for a, s in subjects]
    ranking = shuffled(rng, range(config.articles))
    if config.popularity == "topical":
        ranking = topical_ranking(ranking, subjects)
    cumulative = zipf_cumulative(config.articles, config.zipf)
    day_us = config.hours * HOUR_US
    questions = []
    for _ in range(config.questions):
        t_us = int(rng.random() * day_us)
        questions.append(Question(t_us, ranking[draw_rank(cumulative, rng.random())]))
    saves = []
    for _ in range(config.saves):
        t_us = int(rng.random() * day_us)
        kind = draw_kind(SAVE_MIX, rng.random())
        zipf_article = ranking[draw_rank(cumulative, rng.random())]
        uniform_article = min(int(rng.random() * config.articles), config.articles - 1)
        saves.append(Save(t_us, kind, zipf_article, uniform_article,
                          tuple(rng.random() for _ in range(9))))
    questions.sort(key=lambda q: q.t_us)
    saves.sort(key=lambda s: s.t_us)
    return Plan(seed, titles, bodies, subjects, ranking, questions, saves)


# -- the schedule of people's saves ------------------------------------------------------------


def retitle(old, old_action, subject, u, taken):
    """A new title that keeps the subject, unique among ``taken``; returns (title, action).

    Two uniforms pick the action and audience; ``taken`` is updated, so a plan's retitles
    come out the same wherever they are replayed.
    """
    audience = pick(AUDIENCES, u[1])
    for k in range(len(ACTIONS)):
        action = ACTIONS[(int(u[0] * len(ACTIONS)) + k) % len(ACTIONS)]
        title = "%s %s %s" % (action, subject, audience)
        if title not in taken:
            break
    else:
        n = 2
        while "%s (%d)" % (old, n) in taken:
            n += 1
        title, action = "%s (%d)" % (old, n), old_action
    taken.discard(old)
    taken.add(title)
    return title, action


def people_saves(plan, uniform):
    """The day's people's saves in order, each with the title it leaves: from the plan alone."""
    titles = list(plan.titles)
    actions = [action for action, _ in plan.subjects]
    taken = set(plan.titles)
    changes = []
    for i, save in enumerate(plan.saves):
        article = save.uniform_article if uniform else save.zipf_article
        if save.kind == "content_title":
            titles[article], actions[article] = retitle(
                titles[article], actions[article], plan.subjects[article][1], save.text_u[7:9],
                taken)
        changes.append(Change((save.t_us, SAVE_STEP, i), article, save, titles[article],
                              actions[article]))
    return changes
