"""A simulated support day that reproduces, and checks, the article's measurements.

For each seed: 400 articles, 120 questions and 300 people's saves over 8 hours, popularity
Zipf (s = 0.9) over one ranking for both questions and saves. A scripted agent answers each
question through the four tools (search, read the top two hits, keep both citations) and, every
hour, checks all citations given so far three ways: by title only, by re-reading every cited
article, and by polling the event log and re-reading only what changed. The truth comes from
an oracle that never calls the store: the plan's schedule of saves and the times the agent read
what it cited. The database's rows, re-read and poll must all agree with it at every check,
and every edit must get the verdict the schedule implies, or the run fails. A control day
spreads the same saves uniformly; an edit experiment sends each answer's first citation back
as ``expected_version`` after a delay, and replays every successful edit. A save to a withdrawn
article keeps it withdrawn: nobody publishes during the day. Beside each headline figure the
report prints its closed-form expectation, from the model's parameters and what the agent
cited when; ``--popularity`` and ``--questions-from`` vary two modelling choices (see
docs/simulation.md and ``bench/sensitivity.py``). The seventh table answers the article's
open question: of the stale citations, how many still hold, word for word, the passage the
answer relied on (the paragraph of its snippet's first match), found out four ways and each
checked against the schedule, with what each way costs.

    python sim.py --seeds 1-5             # the article's run: tables on stdout
    python sim.py --seeds 1-5 --json out.json --per-seed
    python sim.py --seeds 1-5 --plots docs/figures     # and its figures as SVG

``kb-sim`` (installed) and ``python -m kbcite.sim`` are the same command.

All randomness comes from one ``random.Random(seed)`` per seed, drawn only through
``.random()``, so the same arguments give the same counts on every Python from 3.9 on.

The modules, each importing only those before it in this list: ``model`` (constants,
vocabulary, records, the simulated clock), ``plan`` (drawing the day; the schedule of people's
saves), ``passages`` (the passage an answer relied on, and what became of it), ``oracle``,
``expectations`` (closed forms), ``agent`` (the scripted agent), ``checks`` (the hourly
checks), ``edit_trial``, ``day`` (one run of the day, on ``sched.scheduler``), ``runner``
(seeds, parts, the process pool, the summary), ``report``, ``figures`` (the SVG figures) and
``cli``.
"""
