"""The built package: an sdist that carries its tests and builds the wheel, a wheel that installs
working commands.

Builds with ``python -m build`` (the ``test`` extra installs it) from a copy of the project:
the sdist first, then the wheel from the unpacked sdist, so the wheel installed here proves
the sdist builds. Checks both archives' contents and metadata, installs the wheel into a
fresh virtual environment and runs the console scripts from another folder, and from the
unpacked sdist collects every test module and runs a few (the suite itself runs from the
checkout). Building fetches setuptools from the package index into an isolated environment:
where that cannot be done, the tests are skipped and say why.
"""

import email
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import kbcite

# Builds the package and installs it into a new environment: a minute. Python 3.9's CI leg
# runs it too (py39): the package must build and install there.
pytestmark = [pytest.mark.slow, pytest.mark.py39]

ROOT = Path(__file__).resolve().parent.parent
IGNORED = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info", "build",
                                 "dist", ".pytest_cache", "*.db", "*.db-*", "*.sqlite3",
                                 "node_modules")
# What the sdist's own tests and benchmarks need besides the modules.
SDIST_NEEDS = ["LICENSE", "README.md", "pyproject.toml", "tests/conftest.py",
               "tests/support/store_worker.py", "tests/golden/sim-seeds-1-5.json",
               "tests/data/tools-list.json", "bench/run.py", "bench/common.py",
               "examples/transcript.py", "docs/cli.md", "kb_store.py", "sim.py",
               "kbcite/__init__.py", "kbcite/store.py", "kbcite/server/cli.py",
               "kbcite/sim/cli.py", "kbcite/testing.py"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(wheel, sdist, source)``: built from ``source``, a copy of the project."""
    pytest.importorskip("build", reason="python -m build is not installed (the test extra)")
    work = tmp_path_factory.mktemp("pkg")
    source = work / "src"
    shutil.copytree(str(ROOT), str(source), ignore=IGNORED)
    # No --sdist --wheel: build makes the sdist, then the wheel from the unpacked sdist.
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(work / "dist"),
                           str(source)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        offline = any(word in done.stderr for word in (
            "Could not find a version", "No matching distribution", "NewConnectionError",
            "Temporary failure in name resolution", "Network is unreachable"))
        if offline:
            pytest.skip("cannot build: setuptools cannot be fetched here (%s)"
                        % done.stderr.strip().splitlines()[-1])
        pytest.fail("python -m build failed:\n%s\n%s" % (done.stdout[-2000:], done.stderr[-3000:]))
    [wheel] = (work / "dist").glob("*.whl")
    [sdist] = (work / "dist").glob("*.tar.gz")
    return wheel, sdist, source


def test_the_sdist_carries_what_its_tests_need(built):
    _, sdist, _ = built
    with tarfile.open(str(sdist)) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = [need for need in SDIST_NEEDS if need not in names]
    assert not missing, missing
    assert not [n for n in names if n.endswith((".pyc", ".db", ".sqlite3"))]


# A few of the sdist's own tests, run from the unpacked sdist on its own copy of the package
# (each names a file the sdist must carry: the live tool list, the CLI's docs, the store).
SDIST_TESTS = ["tests/test_store.py::test_tool_names_and_order_match_the_live_list",
               "tests/test_store.py::test_search_hit_has_snippet_version_and_citation[sqlite]",
               "tests/test_cli.py::test_version_and_help_on_every_argument",
               "tests/test_cli.py::test_search_read_and_json_are_the_tools_own_results",
               "tests/test_layout.py"]


def source_files(root, folder):
    """The ``.py`` files under ``root/folder``, relative to ``root``, as POSIX paths."""
    return {p.relative_to(root).as_posix() for p in (root / folder).rglob("*.py")
            if "__pycache__" not in p.parts}


def test_the_sdist_metadata_names_the_project(built):
    _, sdist, _ = built
    with tarfile.open(str(sdist)) as tar:
        [info] = [m for m in tar.getmembers() if m.name.count("/") == 1
                  and m.name.endswith("/PKG-INFO")]
        metadata = email.message_from_bytes(tar.extractfile(info).read())
    assert metadata["Name"] == "kbcite" and metadata["Version"] == kbcite.__version__
    assert metadata["License-Expression"] == "MIT" and metadata["Requires-Python"] == ">=3.9"
    # The extras the README's install lines name (others may join them).
    assert {"postgres", "http", "semantic", "test"} <= set(metadata.get_all("Provides-Extra"))
    assert sdist.name == "kbcite-%s.tar.gz" % kbcite.__version__


def test_the_sdist_collects_every_test_and_runs_a_few(built, tmp_path):
    _, sdist, source = built
    with tarfile.open(str(sdist)) as tar:
        tar.extractall(str(tmp_path))
    [unpacked] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert source_files(unpacked, "tests") == source_files(source, "tests")
    assert source_files(unpacked, "kbcite") == source_files(source, "kbcite")
    env = dict(os.environ, PYTHONPATH=str(unpacked))
    env.pop("KB_DB", None)

    def pytest_in_sdist(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
                              + list(args), cwd=str(unpacked), env=env, capture_output=True,
                              text=True, timeout=600)
    # Every module imports from the sdist alone (its conftest, support modules and data).
    collected = pytest_in_sdist("-q", "-rs", "--collect-only", "tests")
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    lines = collected.stdout.splitlines()
    assert "error" not in lines[-1], collected.stdout[-3000:]
    # Each module gave tests, or was skipped whole for a missing extra (mcp on Python 3.9).
    modules = {line.split("::")[0] for line in lines if "::" in line}
    modules |= {line.split()[2].split(":")[0] for line in lines if line.startswith("SKIPPED")}
    assert modules == {p for p in source_files(source, "tests") if p.startswith("tests/test_")}
    # A few run, on the sdist's copy of the package (its conftest puts it first).
    done = pytest_in_sdist("-q", *SDIST_TESTS)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
    where = subprocess.run([sys.executable, "-c", "import kbcite; print(kbcite.__file__)"],
                           cwd=str(unpacked), env=env, capture_output=True, text=True)
    assert Path(where.stdout.strip()).parent == unpacked / "kbcite", where.stderr


def test_the_wheel_holds_the_package_and_its_commands(built):
    wheel, _, source = built
    assert wheel.name == "kbcite-%s-py3-none-any.whl" % kbcite.__version__
    with zipfile.ZipFile(str(wheel)) as archive:
        names = set(archive.namelist())
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode("utf-8")
    assert source_files(source, "kbcite") <= names and "kb_store.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/"))
                or n.endswith((".pyc", ".db", ".sqlite3"))]
    for line in ("kb = kbcite.cli:main", "kb-server = kbcite.server.cli:main",
                 "kb-sim = kbcite.sim.cli:main"):
        assert line in scripts


def test_the_wheel_installs_working_commands(built, tmp_path):
    wheel, _, _ = built
    env_dir = tmp_path / "venv"
    # No pip of its own (ensurepip costs seconds): this process's pip installs into it
    # (``pip --python``, pip 22.3 and later).
    venv.EnvBuilder(with_pip=False).create(str(env_dir))
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bin_dir / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "KB_DB")}

    def run(*argv):
        done = subprocess.run([str(bin_dir / argv[0])] + list(argv[1:]), cwd=str(elsewhere),
                              env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (argv, done.stderr)
        return done.stdout

    assert "import" in run("kb", "--help")
    assert "--grant" in run("kb-server", "--help")
    assert "Simulated support day" in run("kb-sim", "--seeds", "1", "--questions", "10")
    assert "created knowledge base support" in run("kb", "init", "--db", "kb.sqlite3", "support")
    assert run("kb", "--db", "kb.sqlite3", "audit") == "audit: ok\n"
    # The package and the project's original top-level module, from anywhere.
    done = subprocess.run([str(python), "-c", "import kb_store, kbcite; "
                           "print(kb_store.KBStore is kbcite.KBStore, kbcite.__version__)"],
                          capture_output=True, text=True, cwd=str(elsewhere), env=env)
    assert done.stdout.split() == ["True", kbcite.__version__], done.stderr
    metadata = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                               "d = m.metadata('kbcite'); "
                               "print(d.get('License-Expression'), d.get_all('License-File'))"],
                              capture_output=True, text=True, cwd=str(elsewhere), env=env)
    assert metadata.stdout.split() == ["MIT", "['LICENSE']"]
