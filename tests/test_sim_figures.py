"""The report's figures: the committed copies are what the golden run draws, byte for byte;
each is well-formed SVG with a title, axis labels that name their units and a legend, and
keeps its text inside the picture; ``--plots DIR`` writes them.
"""

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kbcite.sim.cli import main
from kbcite.sim.figures import CHAR_PX, FIGURES, figures

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "sim-seeds-1-5.json"
COMMITTED = ROOT / "docs" / "figures"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def golden():
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def drawn(golden):
    return figures(golden)


def test_the_committed_figures_are_the_golden_runs(drawn):
    """After a change to the figures or to the golden file, regenerate them with
    ``python sim.py --seeds 1-5 --plots docs/figures``."""
    assert sorted(drawn) == sorted(p.name for p in COMMITTED.glob("*.svg"))
    for name, svg in drawn.items():
        with open(COMMITTED / name, encoding="utf-8", newline="") as fh:
            assert fh.read() == svg, name


def test_drawing_them_is_quick(golden):
    started = time.process_time()
    figures(golden)
    assert time.process_time() - started < 0.2


@pytest.mark.parametrize("name", [name for name, _ in FIGURES])
def test_each_figure_has_a_title_axis_labels_with_units_and_a_legend(drawn, name):
    root = ET.fromstring(drawn[name])
    assert root.tag == SVG + "svg"
    title = root.find(SVG + "title")
    assert title is not None and len(title.text) > 20
    assert root.find(SVG + "desc").text
    labels = [t.text for t in root.iter(SVG + "text") if t.get("class") == "axis-label"]
    assert labels and all("(" in label and label.endswith(")") for label in labels), labels
    legend = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    assert len(legend) == 1 and len(list(legend[0].iter(SVG + "text"))) >= 3
    drawn_title = [t for t in root.iter(SVG + "text") if t.get("class") == "figure-title"]
    assert [t.text for t in drawn_title] == [title.text]


@pytest.mark.parametrize("name", [name for name, _ in FIGURES])
def test_no_text_runs_off_the_picture(drawn, name):
    """Each unrotated text's width, estimated at its font size, lies inside the picture."""
    root = ET.fromstring(drawn[name])
    _, _, width, height = (float(v) for v in root.get("viewBox").split())
    for text in root.iter(SVG + "text"):
        if text.get("transform"):
            continue
        size = float(text.get("font-size", root.get("font-size")))
        span = len(text.text) * CHAR_PX * size / 13
        x, y = float(text.get("x")), float(text.get("y"))
        left = {"middle": x - span / 2, "end": x - span}.get(text.get("text-anchor"), x)
        assert 0 <= left and left + span <= width and size <= y <= height, (text.text, x, y)


def test_plots_writes_the_figures_of_the_run(tmp_path):
    out = tmp_path / "figures"
    status = main(["--seeds", "2", "--articles", "60", "--questions", "24", "--saves", "60",
                   "--hours", "4", "--processes", "1", "--json", str(tmp_path / "run.json"),
                   "--plots", str(out)])
    assert status == 0
    report = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    written = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()}
    assert written == figures(report)
    assert "seeds 2 summed" in written["staleness.svg"]


def test_plots_in_an_unusable_place_is_refused_before_any_work(tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["--plots", str(a_file / "figures")])
    assert exc.value.code == 2
    assert "--plots: cannot write figures in" in capsys.readouterr().err
