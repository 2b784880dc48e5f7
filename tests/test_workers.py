"""The suite under ``pytest -n`` (tests/conftest.py): the tests that share a module fixture run
on one worker, so that the fixture (the 200-seed run, the built wheel, a browser) is set up
once, whatever the versions of pytest and pytest-xdist."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Where each setup of ``shared`` notes its process, when the check below runs this module.
SETUPS = "KB_TEST_SETUPS"


@pytest.fixture(scope="module")
def shared():
    """A module fixture that says where it was set up."""
    path = os.environ.get(SETUPS)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("%d\n" % os.getpid())
    return os.getpid()


@pytest.mark.parametrize("n", range(4))
def test_sharing(shared, n):
    assert shared == os.getpid()


@pytest.mark.slow
@pytest.mark.py39
def test_a_module_fixture_is_set_up_once_under_two_workers(tmp_path):
    pytest.importorskip("xdist", reason="pytest-xdist is not installed (the test extra)")
    setups = tmp_path / "setups"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2",
         "tests/test_workers.py::test_sharing"], cwd=str(ROOT), capture_output=True,
        text=True, timeout=300, env=dict(os.environ, **{SETUPS: str(setups)}))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout, done.stdout[-3000:]
    assert len(setups.read_text(encoding="utf-8").splitlines()) == 1, done.stdout[-3000:]
