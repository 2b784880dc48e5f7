"""completion/complete checks its values as the tools check their strings: a lone surrogate or
a NUL in the value typed, or in the knowledge base the context names, is -32602 naming the
argument (or an empty completion), never -32603 with a traceback in the log
(server/utilities/completion.mdx: invalid arguments are -32602)."""

import pytest

from kbcite.server.resources import TEMPLATE_CURRENT, TEMPLATE_VERSION


def complete(client, name, value, context=None, template=TEMPLATE_CURRENT):
    params = {"ref": {"type": "ref/resource", "uri": template},
              "argument": {"name": name, "value": value}}
    if context is not None:
        params["context"] = {"arguments": context}
    return client.call("completion/complete", params)


@pytest.mark.parametrize("bad", ["x\ud800", "\udfff", "a\x00b"])
def test_a_completion_value_the_tools_refuse_is_invalid_params(start, db, bad):
    client = start(db.path)
    client.initialize()
    asked = [("knowledge_base_id", bad, None, TEMPLATE_CURRENT),
             ("article_id", bad, {"knowledge_base_id": "support"}, TEMPLATE_CURRENT),
             ("article_id", "art", {"knowledge_base_id": bad}, TEMPLATE_CURRENT),
             ("updated_at", "", {"knowledge_base_id": "support", "article_id": bad},
              TEMPLATE_VERSION)]
    codes = []
    for name, value, context, template in asked:
        answer = complete(client, name, value, context, template)
        if "result" in answer:  # an empty completion is allowed too
            assert answer["result"]["completion"]["values"] == [], (name, answer)
        else:
            codes.append(answer["error"]["code"])
    assert codes.count(-32602) >= 3 and set(codes) == {-32602}
    # The same server still completes good values, and logged no fault.
    good = complete(client, "knowledge_base_id", "sup")["result"]["completion"]
    assert good["values"] == ["support"]
    client.close()
    assert "Traceback" not in client.stderr() and "internal" not in client.stderr().lower()
