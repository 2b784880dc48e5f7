"""What changed between two versions of an article, in a form an agent can act on.

The content is compared paragraph by paragraph (paragraphs are the text between blank lines,
``"\\n\\n"``, so joining them again gives the text back exactly): each hunk says where in the
older version it starts, which paragraphs left and which came in. A changed title is noted
beside the hunks. The paragraphs' text is bounded (``CHANGES_MAX_CHARS``); a change that does
not fit is cut and flagged ``truncated``. ``apply`` replays untruncated changes on the older
text, so an agent (or a test) can rebuild the newer one without reading it.
"""

import difflib

from .limits import CHANGES_MAX_CHARS

PARAGRAPH_BREAK = "\n\n"


def paragraphs(text):
    """The paragraphs of ``text``, in order; ``PARAGRAPH_BREAK.join`` gives the text back."""
    return text.split(PARAGRAPH_BREAK)


def changes(old_title, old_content, new_title, new_content, limit=CHANGES_MAX_CHARS):
    """``{title, hunks, truncated}``: the change from the older version to the newer one.

    ``title`` is ``{"from", "to"}`` when the title changed, else None; each hunk is
    ``{"at", "removed", "added"}`` (``at``: the index of its first paragraph in the older
    version). At most ``limit`` characters of paragraph text in all.
    """
    old, new = paragraphs(old_content), paragraphs(new_content)
    result = {"title": None if old_title == new_title else {"from": old_title, "to": new_title},
              "hunks": [], "truncated": False}
    budget = limit
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        hunk = {"at": i1, "removed": [], "added": []}
        for key, texts in (("removed", old[i1:i2]), ("added", new[j1:j2])):
            for text in texts:
                if len(text) > budget:
                    if budget:
                        hunk[key].append(text[:budget])
                    budget = 0
                    result["truncated"] = True
                    break
                hunk[key].append(text)
                budget -= len(text)
        result["hunks"].append(hunk)
        if result["truncated"]:
            break
    return result


def apply(old_content, change):
    """The newer content, from the older one and an untruncated ``changes`` result."""
    if change["truncated"]:
        raise ValueError("a truncated change cannot be replayed: read the article instead")
    old, out, at = paragraphs(old_content), [], 0
    for hunk in change["hunks"]:
        out += old[at:hunk["at"]]
        out += hunk["added"]
        at = hunk["at"] + len(hunk["removed"])
    out += old[at:]
    return PARAGRAPH_BREAK.join(out)
