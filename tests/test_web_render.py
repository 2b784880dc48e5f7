"""The pages' renderer: an article version's HTML is rendered once while it is among the last
versions asked for, and is what rendering its Markdown gives."""

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("markdown_it")

from kbcite.server.web import render  # noqa: E402


def test_a_versions_html_is_kept_bounded_and_the_same_as_rendering_it():
    renderer = render.Renderer()
    text = "# Title\n\nSome **bold** text and <script>alert(1)</script>."
    first = renderer.version("kb", "art-1", "v1", text)
    assert first == renderer.markdown(text) and "<script>" not in first
    assert renderer.version("kb", "art-1", "v1", text) is first  # kept, not rendered again
    # Another version of the same article is another entry, with its own text.
    assert "other" in renderer.version("kb", "art-1", "v2", "other")
    for n in range(render.RENDERED_VERSIONS):
        renderer.version("kb", "art-%d" % (n + 2), "v1", "text %d" % n)
    assert len(renderer._rendered) == render.RENDERED_VERSIONS
    again = renderer.version("kb", "art-1", "v1", text)  # the least recent went first
    assert again == first and again is not first
