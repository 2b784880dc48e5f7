"""Every relative link in the README and docs/ names a file that exists, and an anchor that
one of its headings makes (as GitHub makes them)."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page):
    """The anchors of a page's headings, counting repeats as GitHub does (-1, -2, ...)."""
    seen, found = {}, set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else "%s-%d" % (base, count))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append("%s: no such file" % target)
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append("%s: no heading makes #%s" % (target, anchor))
    assert not broken, "%s has broken links:\n%s" % (page.name, "\n".join(broken))


def test_slugs_are_githubs():
    assert slug("7. What keeping every version costs") == "7-what-keeping-every-version-costs"
    assert slug("The `kb` command, day two") == "the-kb-command-day-two"
