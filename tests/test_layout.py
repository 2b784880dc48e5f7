"""The package's layout holds: imports run from each floor down, never up, and never in a circle.

The floors are docs/development.md's table. A module this test does not place fails it, so a
new module is given its floor on purpose.
"""

import ast
import importlib

import pytest

from kbcite.tools import TOOLS
from support.commands import ROOT

PACKAGE = ROOT / "kbcite"
# Floor of each module (a name ending in ".*" places a whole subpackage), top floor first.
FLOORS = {
    5: ["kbcite.cli.*", "kbcite.__main__", "kbcite.server.*", "kbcite.sim.*"],
    4: ["kbcite", "kbcite.store", "kbcite.testing"],
    3: ["kbcite.edits", "kbcite.articles", "kbcite.events", "kbcite.reads", "kbcite.importer",
        "kbcite.markdown", "kbcite.tokens", "kbcite.grants", "kbcite.sessions", "kbcite.audit",
        "kbcite.access",
        "kbcite.context", "kbcite.history", "kbcite.citations", "kbcite.changes",
        "kbcite.catalog", "kbcite.proposals", "kbcite.linediff", "kbcite.threeway",
        "kbcite.merging",
        "kbcite.folder_scan", "kbcite.exporter", "kbcite.folders", "kbcite.backup", "kbcite.upgrade",
        "kbcite.search.hits", "kbcite.search.tiers", "kbcite.search.index",
        "kbcite.search.semantic"],
    # The engines: the package that picks one; each engine, then its schema and its full-text
    # index; the contract and the shared SQL, which name no engine; the errors every engine
    # raises.
    2.4: ["kbcite.engines"],
    2.3: ["kbcite.engines.sqlite", "kbcite.engines.postgres"],
    2.2: ["kbcite.engines.sqlite_schema", "kbcite.engines.postgres_schema",
          "kbcite.engines.sqlite_fts", "kbcite.engines.postgres_fts"],
    2.1: ["kbcite.engines.contract", "kbcite.engines.sql.*"],
    2: ["kbcite.engines.errors"],
    1: ["kbcite.search", "kbcite.search.text", "kbcite.search.ranking", "kbcite.search.query",
        "kbcite.search.snippets", "kbcite.search.embedding", "kbcite.search.written"],
    0: ["kbcite.limits", "kbcite.errors", "kbcite.versions", "kbcite.validation",
        "kbcite.tools", "kbcite.writes"],
}

# The server's own floors, top first: bytes <-> messages (the transports), messages ->
# decisions (dispatch, then the protocol and what it judges with), the ground both stand on.
SERVER_FLOORS = {
    4: ["kbcite.server.cli", "kbcite.server.options", "kbcite.server.config",
        "kbcite.server.__main__",
        "kbcite.server.asgi", "kbcite.server.h11_guard"],
    3: ["kbcite.server.stdio", "kbcite.server.http.*", "kbcite.server.web.*",
        "kbcite.server.oauth.*"],
    2: ["kbcite.server.dispatch"],
    1: ["kbcite.server.protocol", "kbcite.server.approval", "kbcite.server.resources",
        "kbcite.server.subscriptions", "kbcite.server.pool"],
    0: ["kbcite.server", "kbcite.server.inbound", "kbcite.server.links", "kbcite.server.calls",
        "kbcite.server.jsonrpc", "kbcite.server.throttle", "kbcite.server.logs"],
}
TRANSPORTS = ("kbcite.server.stdio", "kbcite.server.http.")
# The modules that judge what a tool call may do, or read through a tool (resources are read
# with the read tool), and the people's pages, a front end that calls tools as ``kb`` does:
# the only ones of the server that name a tool.
NAMING_TOOLS = ("kbcite.server.protocol", "kbcite.server.approval", "kbcite.server.resources",
                "kbcite.server.web.")


def modules():
    """``{module name: path}`` of every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def floor_of(name, floors=FLOORS):
    """The floor a module stands on, or None where the table places it nowhere."""
    for floor, names in floors.items():
        for entry in names:
            if name == entry or (entry.endswith(".*") and (name == entry[:-2]
                                                            or name.startswith(entry[:-1]))):
                return floor
    return None


def imports_of(name, path, known):
    """The package's modules that ``name`` imports, anywhere in it (lazy imports too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from P import x`` imports module P.x where there is one, else a name of P.
            targets = ["%s.%s" % (base, alias.name) if "%s.%s" % (base, alias.name) in known
                       else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def graph():
    """``{module: modules it imports}`` for the whole package."""
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def upward(edges, floors=FLOORS):
    """The imports of ``edges`` that run from a floor to a higher one."""
    return [(name, target) for name, targets in sorted(edges.items())
            for target in sorted(targets)
            if floor_of(target, floors) > floor_of(name, floors)]


def server_edges(edges):
    """The imports among the server's own modules."""
    return {name: {t for t in targets if t.startswith("kbcite.server")}
            for name, targets in edges.items() if name.startswith("kbcite.server")}


def transport_faults(edges):
    """``(transport, protocol module)`` for each transport that imports the protocol: a
    transport moves messages and leaves judging them to dispatch."""
    return [(name, target) for name, targets in sorted(edges.items())
            if name.startswith(TRANSPORTS) for target in sorted(targets)
            if target == "kbcite.server.protocol"]


def tools_named(path):
    """The tool names a module's source spells out (in any string, docstrings included)."""
    names = [tool["name"] for tool in TOOLS]
    return sorted({name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                   if isinstance(node, ast.Constant) and isinstance(node.value, str)
                   for name in names if name in node.value})


def circles(edges):
    """The import circles of ``edges``, each as the path round it."""
    state, found = {}, []

    def visit(name, trail):
        state[name] = "open"
        for target in sorted(edges.get(name, ())):
            if state.get(target) == "open":
                found.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[name] = "done"

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    return found


def test_every_module_has_a_floor():
    assert [name for name in modules() if floor_of(name) is None] == []


def test_no_import_runs_up_a_floor():
    assert upward(graph()) == []


def test_no_import_circle():
    assert circles(graph()) == []


def test_the_checks_see_an_upward_import_and_a_circle():
    # The checks above could pass by reading nothing: they are shown a fault of each kind.
    edges = graph()
    assert "kbcite.errors" in edges["kbcite.engines.sqlite"]
    assert "kbcite.store" in edges["kbcite.cli.main"]
    assert upward({"kbcite.engines.sqlite": {"kbcite.store"}}) == [
        ("kbcite.engines.sqlite", "kbcite.store")]
    assert circles({"kbcite.edits": {"kbcite.articles"}, "kbcite.articles": {"kbcite.edits"}})


def test_every_engine_keeps_the_contract():
    # A primitive the contract leaves unwritten is written by every engine, unless it belongs
    # to a capability the engine does not declare.
    from kbcite.engines import ENGINES, contract

    gated = {"change_waiter": "listen", "image": "image", "load_image": "image",
             "data_version": "data_version"}
    required = [name for name, member in vars(contract.Engine).items() if callable(
        getattr(member, "__wrapped__", member)) and "NotImplementedError" in
        (getattr(member, "__wrapped__", member).__code__.co_names)]
    assert {"read", "write", "lock_kb", "match", "execute"} <= set(required)
    for _, module, name in ENGINES:
        engine = getattr(importlib.import_module("kbcite.engines." + module), name)
        assert engine.capabilities <= contract.CAPABILITIES, name
        missing = [m for m in required if getattr(engine, m) is getattr(contract.Engine, m)
                   and gated.get(m) in engine.capabilities | {None}]
        assert missing == [], name


def test_only_thin_entry_points_stand_beside_the_package():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert top == ["kb_store.py", "sim.py"]
    for name in top:
        assert len((ROOT / name).read_text(encoding="utf-8").splitlines()) < 30, name


def test_every_server_module_has_a_floor_of_the_server():
    names = [name for name in modules() if name.startswith("kbcite.server")]
    assert [name for name in names if floor_of(name, SERVER_FLOORS) is None] == []


def test_the_server_imports_run_down_its_own_floors():
    assert upward(server_edges(graph()), SERVER_FLOORS) == []


def test_no_transport_imports_the_protocol():
    assert transport_faults(graph()) == []


def reached(edges, name):
    """Every module ``name`` imports, directly or through others."""
    seen, todo = set(), [name]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("module", ["h11_guard", "httptools_guard"])
def test_the_guarded_protocols_stand_apart_from_the_app(module):
    # Each is given to uvicorn by name (--http kbcite.server.h11_guard:...): importing it must
    # not build the app's world, nor reach the protocol.
    found = reached(graph(), "kbcite.server.http." + module)
    assert not found & {"kbcite.server.http.app", "kbcite.server.dispatch",
                        "kbcite.server.protocol", "kbcite.store"}, sorted(found)


def test_no_server_module_names_a_tool_but_those_that_judge_tools():
    named = {name: tools_named(path) for name, path in modules().items()
             if name.startswith("kbcite.server")}
    assert {name: tools for name, tools in named.items()
            if tools and not name.startswith(NAMING_TOOLS)} == {}
    assert "edit_knowledge_article" in named["kbcite.server.protocol"]


def test_the_server_checks_see_a_transport_that_judges():
    # Shown the faults they look for, the checks above must see them.
    assert transport_faults({"kbcite.server.stdio": {"kbcite.server.protocol"}}) == [
        ("kbcite.server.stdio", "kbcite.server.protocol")]
    assert upward({"kbcite.server.protocol": {"kbcite.server.http.app"}}, SERVER_FLOORS) == [
        ("kbcite.server.protocol", "kbcite.server.http.app")]
    assert tools_named(PACKAGE / "tools.py")
