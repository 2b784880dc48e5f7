"""The report's figures as SVG, made with the standard library alone from the report itself.

Four figures, each a function of the report (the JSON ``sim.py --json`` writes) that returns
the SVG text; ``figures`` gives them all by file name, and only the command line writes files.
Every number is written with a fixed format, so the same report gives the same bytes on every
Python, and the committed copies in docs/figures/ can be compared byte for byte. Each figure
has a ``<title>``, axis labels that name their units and a legend.
"""

import math
import xml.etree.ElementTree as ET

from .model import delay_text
from .report import seed_text

# A figure is drawn on a grid of WIDTH by its height and shown DISPLAY_WIDTH CSS pixels wide
# (scaled alike), so it fits a browser window of 900 pixels, scroll bar and all.
WIDTH, HEIGHT = 920, 500
DISPLAY_WIDTH = 860
FONT = "DejaVu Sans, Helvetica, Arial, sans-serif"
# Okabe and Ito's palette, told apart by readers with any colour vision; one colour per day
# or per kind of call, the same in every figure.
BLUE, ORANGE, GREEN, VERMILION, PURPLE, GREY = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#666666")
ZIPF, CONTROL = BLUE, VERMILION
# How a series is drawn: measured solid with its points marked, expected dashed or dotted.
SOLID, DASHED, DOTTED = None, "7 4", "2 3"
# The average width of a character of 13 px text, to lay legends out without measuring text.
CHAR_PX = 7.4


def _num(x):
    """A coordinate with one decimal: the same text on every Python, and never ``-0.0``."""
    text = "%.1f" % x
    return "0.0" if text == "-0.0" else text


def _el(parent, tag, text=None, **attrs):
    """A child element; ``stroke_width`` becomes ``stroke-width`` and ``cls`` ``class``."""
    node = ET.SubElement(parent, tag, {
        ("class" if k == "cls" else k.replace("_", "-")):
        (_num(v) if isinstance(v, float) else str(v))
        for k, v in attrs.items() if v is not None})
    if text is not None:
        node.text = text
    return node


def _svg(title, description, width=WIDTH, height=HEIGHT):
    """An empty figure: its ``<title>``, a description, a white ground and the title drawn."""
    shown_height = int(round(height * DISPLAY_WIDTH / width))
    root = ET.Element("svg", {"xmlns": "http://www.w3.org/2000/svg",
                              "width": str(DISPLAY_WIDTH), "height": str(shown_height),
                              "viewBox": "0 0 %d %d" % (width, height),
                              "font-family": FONT, "font-size": "13"})
    _el(root, "title", title)
    _el(root, "desc", description)
    _el(root, "rect", x=0, y=0, width=width, height=height, fill="white")
    _el(root, "text", title, cls="figure-title", x=float(width / 2), y=28.0,
        text_anchor="middle", font_size=17, font_weight="bold")
    return root


def _text(root):
    """The SVG document as text: an XML declaration, one element a line."""
    ET.indent(root, space=" ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") \
        + "\n"


def _ticks(top, count=5):
    """Ticks from 0 to at least ``top``, about ``count`` steps of 1, 2 or 5 times a power of
    ten."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def _count(v):
    """A tick's count: ``1,200``; a fractional step keeps one decimal."""
    return "{:,}".format(int(round(v))) if abs(v - round(v)) < 1e-9 else "{:,.1f}".format(v)


class _Axes:
    """A plot area at ``(left, top)`` of ``width`` by ``height`` px over the given ranges."""

    def __init__(self, root, box, x_range, y_range):
        self.root = root
        self.left, self.top, self.width, self.height = box
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range

    def x(self, v):
        """The horizontal pixel of the value ``v``."""
        return float(self.left + (v - self.x0) / (self.x1 - self.x0) * self.width)

    def y(self, v):
        """The vertical pixel of the value ``v``."""
        return float(self.top + self.height - (v - self.y0) / (self.y1 - self.y0) * self.height)

    def frame(self, x_ticks, y_ticks, x_label, y_label, subtitle=None):
        """Grid lines, the axes, the ticks' labels and the axis labels; ``x_ticks`` and
        ``y_ticks`` are ``(value, text)`` pairs."""
        group = _el(self.root, "g", cls="axes")
        bottom, right = float(self.top + self.height), float(self.left + self.width)
        for v, label in y_ticks:
            y = self.y(v)
            _el(group, "line", x1=float(self.left), y1=y, x2=right, y2=y, stroke="#dddddd")
            _el(group, "text", label, x=float(self.left - 8), y=y + 4.5, text_anchor="end",
                fill="#333333")
        for v, label in x_ticks:
            x = self.x(v)
            _el(group, "line", x1=x, y1=bottom, x2=x, y2=bottom + 5, stroke="#333333")
            _el(group, "text", label, x=x, y=bottom + 20, text_anchor="middle", fill="#333333")
        _el(group, "line", x1=float(self.left), y1=bottom, x2=right, y2=bottom,
            stroke="#333333")
        _el(group, "line", x1=float(self.left), y1=float(self.top), x2=float(self.left),
            y2=bottom, stroke="#333333")
        if x_label:
            _el(group, "text", x_label, cls="axis-label", x=float(self.left + self.width / 2),
                y=bottom + 42, text_anchor="middle", font_size=14)
        middle = float(self.top + self.height / 2)
        if y_label:
            _el(group, "text", y_label, cls="axis-label", x=float(self.left - 58), y=middle,
                text_anchor="middle", font_size=14,
                transform="rotate(-90 %s %s)" % (_num(self.left - 58), _num(middle)))
        if subtitle:
            _el(group, "text", subtitle, cls="panel-title", x=float(self.left + self.width / 2),
                y=float(self.top - 12), text_anchor="middle", font_size=15, font_weight="bold")

    def series(self, points, colour, dash=SOLID, marker=None, name=None):
        """A line through ``(x, y)`` value pairs, marked where measured."""
        group = _el(self.root, "g", cls="series", data_name=name)
        _el(group, "polyline", fill="none", stroke=colour, stroke_width=2.5 if dash is SOLID
            else 2.0, stroke_dasharray=dash, stroke_linejoin="round",
            points=" ".join("%s,%s" % (_num(self.x(x)), _num(self.y(y))) for x, y in points))
        for x, y in points if marker else ():
            _marker(group, marker, self.x(x), self.y(y), colour)


def _marker(parent, shape, x, y, colour):
    """A point's mark: a filled ``circle`` or ``square``."""
    if shape == "square":
        _el(parent, "rect", x=x - 4.5, y=y - 4.5, width=9.0, height=9.0, fill=colour)
    else:
        _el(parent, "circle", cx=x, cy=y, r=4.5, fill=colour)


def _legend(root, top, entries, width=WIDTH, columns=2):
    """A legend of ``(text, colour, dash, marker)`` entries (``dash`` ``"bar"`` for a filled
    swatch) in ``columns`` columns, centred, from ``top`` down."""
    group = _el(root, "g", cls="legend")
    column = max(len(e[0]) for e in entries) * CHAR_PX + 56
    columns = min(columns, len(entries))
    left = (width - column * columns) / 2
    for i, (text, colour, dash, marker) in enumerate(entries):
        x, y = left + (i % columns) * column, top + (i // columns) * 22
        if dash == "bar":
            _el(group, "rect", x=float(x), y=float(y - 7), width=34.0, height=14.0, fill=colour)
        else:
            _el(group, "line", x1=float(x), y1=float(y), x2=float(x + 34), y2=float(y),
                stroke=colour, stroke_width=2.5, stroke_dasharray=dash)
            if marker:
                _marker(group, marker, float(x + 17), float(y), colour)
        _el(group, "text", text, x=float(x + 44), y=float(y + 4.5))
    return group


# -- the four figures ---------------------------------------------------------------------------


def staleness_figure(report):
    """The share of citations that are stale, and of answers holding one, hour by hour: Zipf
    beside the control, each measured beside its closed-form expectation. Shares, not counts:
    the citations given grow all day, so a count rises with them whatever the staleness."""
    hours = report["config"]["hours"]
    root = _svg("Share of citations stale, and of answers holding one, by hour (seeds %s "
                "summed)" % seed_text(report["seeds"]),
                "Measured at each hourly check, beside the closed form 1 - (1 - q w)^S summed "
                "over the citations given so far, each as a share of the citations (or "
                "answers) given by then; the Zipf day on the left, the uniform control on the "
                "right.")
    panels = []
    for mode, label in (("zipf", "Zipf saves"), ("uniform", "Uniform control")):
        measured = report["staleness"][mode]
        given = {r["hour"]: (r["citations"], r["answers"]) for r in measured}

        def share(rows, key, of, given=given):
            return [(r["hour"], 100.0 * r[key] / given[r["hour"]][of]) for r in rows
                    if given.get(r["hour"], (0, 0))[of]]
        expected = report["expected_by_hour"][mode]
        panels.append((label, [
            (share(measured, "stale", 0), SOLID, "circle", BLUE),
            (share(expected, "stale", 0), DASHED, None, BLUE),
            (share(measured, "answers_with_stale", 1), SOLID, "square", ORANGE),
            (share(expected, "answers_with_stale", 1), DASHED, None, ORANGE)]))
    for i, (label, lines) in enumerate(panels):
        axes = _Axes(root, (95 + i * 440, 80, 360, 300), (0, hours), (0, 100))
        axes.frame([(h, str(h)) for h in range(0, hours + 1)],
                   [(v, "%d%%" % v) for v in range(0, 101, 20)],
                   "hours into the day (h)", "share stale (% of those given)", label)
        for points, dash, marker, colour in lines:
            axes.series(points, colour, dash, marker)
    _legend(root, 452, [("citations stale, measured", BLUE, SOLID, "circle"),
                        ("citations stale, expected", BLUE, DASHED, None),
                        ("answers with a stale citation, measured", ORANGE, SOLID, "square"),
                        ("answers with a stale citation, expected", ORANGE, DASHED, None)])
    return _text(root)


def rejections_figure(report):
    """The share of the trial's edits refused, by the age of the version they sent, with the
    expected curve."""
    edits, expected = report["edits"], report["expected"]["edits"]
    root = _svg("Edits refused, by the age of the citation sent as expected_version",
                "Each delay's measured share of refused edits (changed or gone), beside the "
                "expectation: refused for sure when another of the agent's edits landed in "
                "between, else with chance 1 - (1 - q w)^S.", height=560)
    delays = [e["delay_s"] for e in edits]
    logs = [math.log10(d) for d in delays]
    shown = [(v, e, x) for v, e, x in zip(logs, edits, expected) if e["edits"]]
    measured = [(v, 100.0 * (e["rejected_changed"] + e["rejected_gone"]) / e["edits"])
                for v, e, _ in shown]
    gone = [(v, 100.0 * e["rejected_gone"] / e["edits"]) for v, e, _ in shown]
    model = [(v, 100.0 * x["rejected"] / e["edits"]) for v, e, x in shown]
    y_ticks = _ticks(max([y for _, y in measured + model] + [10.0]), 5)
    span = max(logs[-1] - logs[0], 1.0)
    axes = _Axes(root, (110, 70, 760, 330), (logs[0] - 0.08 * span, logs[-1] + 0.08 * span),
                 (0, y_ticks[-1]))
    axes.frame([(v, _delay_words(d)) for v, d in zip(logs, delays)],
               [(v, "%g%%" % v) for v in y_ticks],
               "", "edits refused (% of edits)")
    _el(root, "text", "delay from the read to the edit (s, min, h; log scale)",
        cls="axis-label", x=axes.x((axes.x0 + axes.x1) / 2), y=482.0, text_anchor="middle",
        font_size=14)
    axes.series(model, BLUE, DASHED)
    axes.series(measured, BLUE, SOLID, "circle")
    axes.series(gone, GREY, SOLID, "square")
    # Each delay's figures under its tick, where no line can cross them, a row each.
    for y, text, weight in ((440.0, "measured", "bold"), (457.0, "expected", None)):
        _el(root, "text", text, x=float(axes.left - 8), y=y, text_anchor="end", fill=BLUE,
            font_weight=weight)
    for (v, share), (_, want) in zip(measured, model):
        _el(root, "text", "%.1f%%" % share, x=axes.x(v), y=440.0, text_anchor="middle",
            fill=BLUE, font_weight="bold")
        _el(root, "text", "%.1f%%" % want, x=axes.x(v), y=457.0, text_anchor="middle",
            fill=BLUE)
    _legend(root, 512, [("refused (changed or gone), measured", BLUE, SOLID, "circle"),
                        ("refused, expected", BLUE, DASHED, None),
                        ("refused because the article was gone, measured", GREY, SOLID,
                         "square")], columns=2)
    return _text(root)


def cost_figure(report):
    """What each way of checking cost over the Zipf day's checks: tool calls and bytes of
    article text, split by the tool that paid them."""
    cost, passages = report["cost"], report["passages"]["zipf"]["cost"]
    reads = ("read_knowledge_article", ORANGE)
    polls = ("poll_resource_events", GREEN)
    checks = ("check_citations", BLUE)
    searches = ("search_knowledge_base", PURPLE)
    pages = cost["poll"]["pages"]
    # Each way: its label, then what it paid each tool it calls.

    def paid(tool, calls, text):
        return {"tool": tool, "calls": calls, "bytes": text}

    ways = [
        ("title only (tells no passage)",
         [paid(searches, cost["title_only"]["calls"], cost["title_only"]["bytes_read"])]),
        ("re-read every cited article",
         [paid(reads, cost["reread"]["calls"], cost["reread"]["bytes_read"])]),
        ("poll, then re-read the changed",
         [paid(polls, pages, 0),
          paid(reads, cost["poll"]["calls"] - pages, cost["poll"]["bytes_read"])]),
        ("check_citations on every citation",
         [paid(checks, passages["check_all"]["calls"], passages["check_all"]["bytes_read"])]),
        ("poll, then check_citations the changed",
         [paid(polls, pages, 0), paid(checks, passages["poll_check"]["calls"] - pages,
                                      passages["poll_check"]["bytes_read"])]),
    ]
    root = _svg("What checking cost over the Zipf day (%d checks, seeds %s summed)"
                % (report["checks"]["zipf"], seed_text(report["seeds"])),
                "Tool calls and bytes of article text (titles, contents, snippets, and the "
                "paragraphs check_citations returns) of each way of checking every citation "
                "at every hourly check; all but the title-only check also tell whether a "
                "stale citation's passage stands.", height=440)
    label_right, panel_w = 300, 265
    panels = (("calls", "Tool calls", "tool calls (count)", 1.0,
               lambda v: "{:,}".format(int(round(v))), _count),
              ("bytes", "Article text returned", "article text (MB, millions of bytes)", 1e-6,
               lambda v: "%.2f" % v, lambda v: "%g" % round(v, 6)))
    for i, (key, title, unit, scale, value_text, tick_text) in enumerate(panels):
        totals = [sum(part[key] for part in parts) * scale for _, parts in ways]
        ticks = _ticks(max(totals), 4)
        left = label_right + 20 + i * (panel_w + 45)
        axes = _Axes(root, (left, 70, panel_w, 5 * 50), (0, ticks[-1]), (0, 5))
        axes.frame([(v, tick_text(v)) for v in ticks], [], unit, "", title)
        for row, (label, parts) in enumerate(ways):
            y, start = 70 + row * 50 + 13, 0.0
            for part in parts:  # a bar a way, in segments by the tool that paid
                value = part[key] * scale
                if value:
                    _el(root, "rect", cls="bar", x=axes.x(start), y=float(y),
                        width=axes.x(start + value) - axes.x(start), height=24.0,
                        fill=part["tool"][1])
                start += value
            text = value_text(start)
            if axes.x(start) + 6 + len(text) * CHAR_PX <= WIDTH:
                _el(root, "text", text, x=axes.x(start) + 6, y=float(y + 17), fill="#333333")
            else:  # a bar reaching the picture's edge carries its figure inside its end
                _el(root, "text", text, x=axes.x(start) - 6, y=float(y + 17),
                    text_anchor="end", fill="#ffffff")
            if i == 0:
                _el(root, "text", label, x=float(label_right), y=float(y + 17),
                    text_anchor="end")
    _legend(root, 405, [(name, colour, "bar", None) for name, colour in
                        (searches, reads, polls, checks)], columns=4)
    return _text(root)


def passages_figure(report):
    """The share of changed citations whose passage still stands, hour by hour, both days,
    measured beside its two expectations."""
    hours = report["config"]["hours"]
    root = _svg("Changed citations whose passage still stands, by hour (seeds %s summed)"
                % seed_text(report["seeds"]),
                "Of the stale citations whose article is still published, the share whose "
                "passage (the paragraph holding the snippet's first match) is still one of the "
                "article's paragraphs, word for word.", height=560)
    axes = _Axes(root, (130, 60, 740, 310), (0, hours), (0, 100))
    axes.frame([(h, str(h)) for h in range(0, hours + 1)],
               [(v, "%d%%" % v) for v in range(0, 101, 20)],
               "", "passage intact (% of changed)")
    _el(root, "text", "hours into the day (h)", cls="axis-label",
        x=axes.x(hours / 2), y=452.0, text_anchor="middle", font_size=14)
    entries = []
    for row, (mode, label, colour, marker) in enumerate((("zipf", "Zipf", ZIPF, "circle"),
                                                         ("uniform", "control", CONTROL,
                                                          "square"))):
        p = report["passages"][mode]
        # How many changed citations each share is of, under the hours' ticks.
        y = 410.0 + 17 * row
        _el(root, "text", "changed, %s" % label, x=float(axes.left - 8), y=y,
            text_anchor="end", fill=colour)
        for r in p["hourly"]:
            _el(root, "text", "{:,}".format(r["stale"] - r["gone"]), x=axes.x(r["hour"]), y=y,
                text_anchor="middle", fill=colour)
        for key, dash, mark, what in (("expected", DOTTED, None, "expected (model)"),
                                      ("expected_given_saves", DASHED, None,
                                       "expected given the saves"),
                                      ("hourly", SOLID, marker, "measured")):
            points = [(r["hour"], 100.0 * (r["intact"] + r["retitled_intact"])
                       / (r["stale"] - r["gone"])) for r in p[key] if r["stale"] > r["gone"]]
            axes.series(points, colour, dash, mark, "%s %s" % (mode, key))
            entries.append(("%s, %s" % (label, what), colour, dash, mark))
    order = [2, 5, 1, 4, 0, 3]  # measured first, a day a column
    _legend(root, 482, [entries[i] for i in order])
    return _text(root)


FIGURES = (("staleness.svg", staleness_figure), ("rejections.svg", rejections_figure),
           ("cost.svg", cost_figure), ("passages.svg", passages_figure))


def figures(report):
    """Every figure of ``report`` as ``{file name: SVG text}``, in the order they are shown."""
    return {name: make(report) for name, make in FIGURES}


def _delay_words(seconds):
    """A delay as an axis writes it: ``10 s``, ``10 min``, ``1 h``."""
    text = delay_text(seconds)
    return text[:-1] + " " + {"s": "s", "m": "min", "h": "h"}[text[-1]]
