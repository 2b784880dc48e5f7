"""The README's first lines are the two commands of a fresh machine; CI runs the second."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def first_code_block():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.strip().splitlines()]


def test_readme_opens_with_the_main_job_and_the_tests():
    main_job, tests = first_code_block()
    assert main_job == "python sim.py --seeds 1-5"
    assert "pip install" in tests and "pytest" in tests


def test_ci_runs_the_readmes_test_command_verbatim():
    _, tests = first_code_block()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "TEST_COMMAND='%s'" % tests in ci
