"""The official MCP conformance suite's server scenarios against kb-server over HTTP.

``@modelcontextprotocol/conformance`` 0.1.16 (every scenario, 2025-11-25 and before) and
0.2.0-alpha.12 (exactly what revisions 2025-11-25 and 2026-07-28 require), run through ``npx``
on Node 22 from the npm registry (the ``node`` package; the suite needs Node 22 or newer).
The suite cannot send a bearer token, so it speaks to the server through a gateway that adds
one (``support/auth_proxy.py``), as a team's OAuth gateway would.

Every scenario that applies to kb-server must pass. The others test demo tools, prompts,
resources or methods the server does not offer; ``NOT_APPLICABLE`` lists each with the reason,
whole or check by check, and one of them passing fails the test as well, so the list shrinks
when the server grows. Without ``npx`` the test is skipped, except in CI, where it fails.
"""

import glob
import json
import os
import re
import shutil
import subprocess

import pytest

import kbcite
from support.auth_proxy import AuthProxy
from support.http_server import Server
from support.stdio_client import make_db

RUNS = [("0.1.16", ["--suite", "all"]),
        ("0.2.0-alpha.12", ["--requirements", "2025-11-25"]),
        ("0.2.0-alpha.12", ["--requirements", "2026-07-28"])]

DEMO_TOOL = "it calls a demo tool of the suite's reference server (test_*), which kb-server " \
            "does not have"
NO_PROMPTS = "kb-server offers no prompts"
DEMO_RESOURCE = "it reads a demo resource of the suite's reference server (test://...), which " \
                "kb-server does not have (its resources are kb:// articles)"
TASKS = "the tasks extension (SEP-2663), which kb-server does not declare; the suite does not " \
        "score it"

# Scenario, or scenario:check, that does not apply to kb-server, and why.
NOT_APPLICABLE = {
    "completion-complete": "it completes the argument of a demo prompt; kb-server completes "
                           "its resource templates' arguments only (" + NO_PROMPTS + ")",
    "tools-call-with-logging": DEMO_TOOL,
    "json-schema-2020-12": "it lists a demo tool json_schema_2020_12_tool, not kb-server's",
    "elicitation-sep1034-defaults": DEMO_TOOL,
    "elicitation-sep1330-enums": DEMO_TOOL,
    "http-custom-header-server-validation": "no tool of kb-server has x-mcp-header parameters",
    "server-stateless:sep-2575-server-rejects-undeclared-capability": DEMO_TOOL,
    "server-stateless:sep-2575-missing-capability-http-400": DEMO_TOOL,
    "server-stateless:sep-2575-http-server-no-independent-requests-on-stream": DEMO_TOOL,
    "server-stateless:sep-2575-server-no-log-without-loglevel": DEMO_TOOL,
    "caching:sep-2549-prompts-list-caching-hints": NO_PROMPTS,
    "input-required-result-non-tool-request": "it asks for input from prompts/get; " + NO_PROMPTS,
    "input-required-result-tampered-state": "it tampers with the requestState of a demo tool "
                                            "(kb-server's own handles: test_server_modern.py)",
}
NOT_APPLICABLE.update({"tools-call-%s" % name: DEMO_TOOL for name in (
    "audio", "elicitation", "embedded-resource", "error", "image", "mixed-content",
    "sampling", "simple-text", "with-progress")})
NOT_APPLICABLE.update({"input-required-result-%s" % name: DEMO_TOOL for name in (
    "basic-elicitation", "basic-list-roots", "basic-sampling", "capability-check",
    "multi-round", "multiple-input-requests", "request-state", "result-type")})
NOT_APPLICABLE.update({"prompts-%s" % name: NO_PROMPTS for name in (
    "list", "get-simple", "get-with-args", "get-embedded-resource", "get-with-image")})
NOT_APPLICABLE.update({"resources-%s" % name: DEMO_RESOURCE for name in (
    "read-text", "read-binary", "templates-read")})
NOT_APPLICABLE.update({"tasks-%s" % name: TASKS for name in (
    "lifecycle", "capability-negotiation", "wire-fields", "request-state-removal",
    "mrtr-input", "request-headers", "dispatch-and-envelope", "required-task-error",
    "mrtr-composition")})

# What must pass in each run, at least: the suite ran, and ran these.
MUST_PASS = {"server-initialize", "ping", "tools-list", "dns-rebinding-protection",
             "server-sse-multiple-streams", "server-sse-polling", "server-stateless",
             "http-header-validation", "resources-list", "resources-subscribe",
             "resources-unsubscribe", "logging-set-level", "sep-2164-resource-not-found",
             "caching"}


def results(directory):
    """``{scenario: [its checks]}`` of one run's output folder."""
    found = {}
    for path in glob.glob(os.path.join(directory, "server-*", "checks.json")):
        name = re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", os.path.basename(os.path.dirname(path)))
        with open(path, encoding="utf-8") as fh:
            found[name[len("server-"):]] = json.load(fh)
    return found


def verdicts(found):
    """``(failures that apply, entries of NOT_APPLICABLE that now pass, the scenarios that
    passed every check that applies)`` of one run."""
    failures, stale, passed = [], [], set()
    for scenario, checks in sorted(found.items()):
        failing = {c["id"]: c for c in checks if c.get("status") == "FAILURE"}
        if scenario in NOT_APPLICABLE:
            if not failing:
                stale.append(scenario)
            continue
        applying = [(check_id, check) for check_id, check in sorted(failing.items())
                    if "%s:%s" % (scenario, check_id) not in NOT_APPLICABLE]
        failures += ["%s:%s: %s" % (scenario, check_id, (check.get("errorMessage") or "")[:300])
                     for check_id, check in applying]
        if not applying:
            passed.add(scenario)
        for key in NOT_APPLICABLE:
            name, _, check_id = key.partition(":")
            if name == scenario and check_id and check_id not in failing:
                stale.append(key)
    return failures, stale, passed


@pytest.mark.slow
def test_every_scenario_that_applies_passes(tmp_path):
    if shutil.which("npx") is None:
        if os.environ.get("CI"):
            pytest.fail("npx is missing: CI must run the conformance suite (.ci/run installs "
                        "Node.js)")
        pytest.skip("npx is not installed: the conformance suite cannot run here")
    made = make_db(tmp_path / "kb.db")
    with kbcite.KBStore(str(made.path)) as store:
        token = store.tokens.create("conformance", ["support"], "allow")
    server = Server(made.path)
    report = []
    try:
        with AuthProxy(server.port, token) as proxy:
            for version, args in RUNS:
                out = tmp_path / ("run-%s-%s" % (version, args[-1]))
                done = subprocess.run(
                    ["npx", "-y", "-p", "node@22", "-p",
                     "@modelcontextprotocol/conformance@%s" % version, "--", "conformance",
                     "server", "--url", proxy.url, "-o", str(out)] + args,
                    capture_output=True, text=True, timeout=600)
                found = results(str(out))
                if not found and not os.environ.get("CI") and (
                        "ENOTFOUND" in done.stderr or "E404" in done.stderr
                        or "ETIMEDOUT" in done.stderr):
                    pytest.skip("the conformance suite could not be fetched from the npm "
                                "registry: %s" % done.stderr.strip().splitlines()[-1])
                failures, stale, passed = verdicts(found)
                report.append((version, args, failures, stale, passed, done))
    finally:
        server.stop()
    for version, args, failures, stale, passed, done in report:
        where = "conformance %s %s" % (version, " ".join(args))
        assert failures == [], "%s: scenarios that apply failed:\n%s\n%s" % (
            where, "\n".join(failures), done.stdout[-3000:])
        assert stale == [], "%s: these now pass; take them out of NOT_APPLICABLE: %s" % (
            where, stale)
        ran = MUST_PASS & passed
        assert ran, "%s ran none of %s:\n%s%s" % (where, sorted(MUST_PASS), done.stdout[-2000:],
                                                  done.stderr[-2000:])
    everything = set().union(*(passed for _, _, _, _, passed, _ in report))
    assert MUST_PASS <= everything, sorted(MUST_PASS - everything)
