"""A separate process for the store process tests: races edits, or streams writes until killed.

    python store_worker.py race DB KB ARTICLE NAME   one JSON job per stdin line, one reply each
    python store_worker.py stream DB KB NAME         writes forever, one JSON line per commit
    python store_worker.py retry DB KB NAME          edits forever, retrying each through faults

Each prints ``ready`` once its store is open, and prints a line only after the write it
reports has committed.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))  # the checkout

from kbcite import KBStore, ToolError, changes  # noqa: E402


def emit(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def race(db, kb, article_id, name):
    """Per job: append one unique line from the given version; on a conflict re-read and retry."""
    granted = {kb}
    with KBStore(db) as store:
        emit("ready")
        for job in sys.stdin:
            job = json.loads(job)
            version, content = job["version"], job["content"]
            attempts = []
            while True:
                line = "%s round %d attempt %d" % (name, job["round"], len(attempts))
                arguments = {"knowledge_base_id": kb, "article_id": article_id,
                             "content": content + "\n" + line, "expected_version": version,
                             "idempotency_key": line}
                try:
                    result = store.call_tool("edit_knowledge_article", arguments,
                                             granted=granted, actor=name)
                except ToolError as exc:
                    attempts.append({"line": line, "expected": version, "code": exc.code,
                                     "current": exc.details.get("current_version")})
                    if exc.code != "version_conflict":
                        break
                    current = store.call_tool("read_knowledge_article", {
                        "knowledge_base_id": kb, "article_id": article_id}, granted=granted)
                    # The conflict carried the change since the version this worker had: it
                    # rebuilds the current text from it, checked against the read (unless yet
                    # another writer came in between: None).
                    change = exc.details.get("changes")
                    if exc.details["current"]["updated_at"] != current["updated_at"]:
                        attempts[-1]["rebuilt"] = None
                    else:
                        attempts[-1]["rebuilt"] = change is not None and not \
                            change["truncated"] and changes.apply(content, change) == \
                            current["content"]
                    version, content = current["updated_at"], current["content"]
                    continue
                attempts.append({"line": line, "expected": version, "code": "ok",
                                 "updated_at": result["updated_at"],
                                 "previous_version": result["previous_version"],
                                 "sequence": result["event"]["sequence"]})
                break
            emit(attempts)


def stream(db, kb, name):
    """Edit, save, unpublish and publish the knowledge base's articles in turn, forever."""
    granted = {kb}
    with KBStore(db) as store:
        articles = [art["article_id"] for art in store.list_articles(kb)]
        emit("ready")
        n = 0
        while True:
            article_id = articles[n % len(articles)]
            line = "%s op %d" % (name, n)
            published = store.get_article(kb, article_id)["published"]
            if n % 7 == 6 or not published:
                if published:
                    emit({"op": "unpublish", "article_id": article_id,
                          "updated_at": store.unpublish(kb, article_id)})
                else:
                    emit({"op": "publish", "article_id": article_id,
                          "updated_at": store.publish(kb, article_id)})
            elif n % 3 == 2:
                current = store.get_article(kb, article_id)["content"]
                emit({"op": "save", "article_id": article_id, "line": line,
                      "updated_at": store.save_article(kb, article_id,
                                                       content=current + "\n" + line)})
            else:
                current = store.call_tool("read_knowledge_article", {
                    "knowledge_base_id": kb, "article_id": article_id}, granted=granted)
                result = store.call_tool("edit_knowledge_article", {
                    "knowledge_base_id": kb, "article_id": article_id,
                    "content": current["content"] + "\n" + line,
                    "expected_version": current["updated_at"], "idempotency_key": line,
                }, granted=granted)
                emit({"op": "edit", "article_id": article_id, "line": line,
                      "updated_at": result["updated_at"]})
            n += 1


def patiently(call, during):
    """``call()`` until it succeeds; each ToolError on the way is reported, then retried."""
    while True:
        try:
            return call()
        except ToolError as exc:
            emit({"error": exc.code, "retryable": exc.details.get("retryable"), "during": during})
            time.sleep(0.05)


def retry(db, kb, name):
    """Append a line to each article in turn, one idempotency key per intended change; when the
    store fails (its server gone), send the very same call again until it is applied."""
    granted = {kb}
    with KBStore(db, timeout=5) as store:
        articles = [art["article_id"] for art in store.list_articles(kb)]
        emit("ready")
        n = 0
        while True:
            article_id = articles[n % len(articles)]
            line = "%s op %d" % (name, n)
            current = patiently(lambda: store.call_tool("read_knowledge_article", {
                "knowledge_base_id": kb, "article_id": article_id}, granted=granted), "read")
            arguments = {"knowledge_base_id": kb, "article_id": article_id,
                         "content": current["content"] + "\n" + line,
                         "expected_version": current["updated_at"], "idempotency_key": line}
            result = patiently(lambda: store.call_tool("edit_knowledge_article", arguments,
                                                       granted=granted), "edit")
            emit({"op": "edit", "article_id": article_id, "line": line,
                  "updated_at": result["updated_at"], "replayed": result["replayed"]})
            n += 1


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    {"race": race, "stream": stream, "retry": retry}[mode](*rest)
