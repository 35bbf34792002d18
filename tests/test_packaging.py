"""What ``pip install pyadk`` gives a user, not the checkout: the sdist and the wheel built from the
source tree, their files and metadata, and what a missing extra says.

The distributions are built once per module, offline, by calling the build backend's PEP 517 hooks
(``setuptools.build_meta``, the ``dev`` extra installs a version ``[build-system]`` accepts) in a
subprocess, on a copy of the files git does not ignore: what pip's isolated build does, without
fetching the backend. The wheel is built from the sdist, as ``python -m build`` does, so an sdist
that cannot build its wheel fails here too.
"""

from __future__ import annotations

import email.parser
import email.policy
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import adk

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Run in the copy of the source tree: the sdist, then the wheel from the unpacked sdist. A
# deprecation the backend reports (a pyproject form it will stop reading) is an error: setuptools
# gives such forms a date after which the build fails.
_BUILD = """
import json, os, sys, tarfile, warnings
from setuptools import build_meta
from setuptools.warnings import SetuptoolsDeprecationWarning

warnings.simplefilter("error", SetuptoolsDeprecationWarning)
out = sys.argv[1]
sdist = build_meta.build_sdist(out)
with tarfile.open(os.path.join(out, sdist)) as archive:  # our own archive; filter= from 3.11.4
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    archive.extractall(os.path.join(out, "unpacked"), **safe)
os.chdir(os.path.join(out, "unpacked", sdist.removesuffix(".tar.gz")))
wheel = build_meta.build_wheel(out)
print(json.dumps({"sdist": sdist, "wheel": wheel}))
"""


@dataclass
class _Built:
    sdist: Path
    wheel: Path
    source: set[str]  # the source tree's files (relative, '/'-separated)


def _source_files(root: Path = ROOT) -> set[str]:
    """The files of the source tree: git's tracked and untracked files it does not ignore, that
    exist (a file deleted but not yet committed is gone)."""
    if not (root / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs in a git checkout: the source tree's files come from git")
        pytest.skip("not a git checkout (an unpacked sdist): no list of the source's files")
    # Told the checkout is safe: as root, git reads none of another user's ('dubious ownership').
    git = ["git", "-c", f"safe.directory={root}"]
    listed = subprocess.run(
        [*git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return {name for name in listed.split("\0") if name and (root / name).is_file()}


def _check_backend() -> None:
    """The installed setuptools is one ``[build-system]`` accepts (the build below uses it)."""
    [wanted] = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    installed = importlib.metadata.version(wanted.name)
    assert wanted.specifier.contains(installed, prereleases=True), (
        f"[build-system] requires {wanted}, {installed} is installed: pip install -e '.[dev]'"
    )


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away"
)
def test_the_source_tree_is_listed_from_a_checkout_another_user_owns(tmp_path: Path) -> None:
    """CI runs as root, on a checkout that may be another user's (a container given the runner's
    checkout): git refuses to read a repository of another owner ('detected dubious
    ownership') unless told it is safe, and the build fixture failed on that, not on the sdist."""
    checkout = tmp_path / "checkout"
    (checkout / "adk").mkdir(parents=True)
    (checkout / "adk" / "__init__.py").write_text("", encoding="utf-8")
    (checkout / "notes.txt").write_text("untracked, not ignored\n", encoding="utf-8")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", "adk"], ["commit", "-q", "-m", "one"]):
        subprocess.run([*git, *args], cwd=checkout, check=True, capture_output=True)
    for path in [checkout, *checkout.rglob("*")]:
        os.lchown(path, 65534, 65534)  # nobody's
    assert _source_files(checkout) == {"adk/__init__.py", "notes.txt"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> _Built:
    _check_backend()
    source = _source_files()
    tree = tmp_path_factory.mktemp("source")
    for name in source:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tree / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-c", _BUILD, str(out)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"the build failed\n{done.stdout}\n{done.stderr}"
    names = json.loads(done.stdout.strip().splitlines()[-1])
    return _Built(out / names["sdist"], out / names["wheel"], source)


def _metadata(text: str) -> Message:
    return email.parser.Parser(policy=email.policy.compat32).parsestr(text)


@pytest.fixture(scope="module")
def wheel_metadata(built: _Built) -> Message:
    with zipfile.ZipFile(built.wheel) as wheel:
        return _metadata(wheel.read(f"pyadk-{adk.__version__}.dist-info/METADATA").decode())


def _package_files(names: Iterator[str] | set[str]) -> set[str]:
    return {name for name in names if name.split("/")[0] in ("adk", "prebuilt")}


def test_the_wheel_holds_every_module_of_both_packages_and_nothing_else(built: _Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
    dist_info = {name for name in names if name.startswith(f"pyadk-{adk.__version__}.dist-info/")}
    assert names - dist_info == _package_files(built.source)
    # PEP 561: without the marker a user's type checker reads neither package's annotations.
    assert {"adk/py.typed", "prebuilt/py.typed"} <= names
    # Apache-2.0 asks that a copy of the license go with every copy of the work.
    assert f"pyadk-{adk.__version__}.dist-info/licenses/LICENSE" in dist_info


def test_the_sdist_holds_the_source_tree(built: _Built) -> None:
    """The sdist is the source tree, tests, docs and examples included (their tests read the
    docs and run the examples), so that it can be tested where it is unpacked: setuptools alone
    took ``tests/test_*.py`` without conftest.py, the servers and helpers they import."""
    top = built.sdist.name.removesuffix(".tar.gz") + "/"
    with tarfile.open(built.sdist) as archive:
        names = {m.name.removeprefix(top) for m in archive.getmembers() if m.isfile()}
    made = {"PKG-INFO", "setup.cfg"} | {n for n in names if n.startswith("pyadk.egg-info/")}
    assert names - made == built.source


def test_the_metadata_says_what_pyproject_says(wheel_metadata: Message) -> None:
    project = PYPROJECT["project"]
    assert wheel_metadata["Name"] == project["name"] == "pyadk"
    # One version: the one the package reports (``pyadk --version``) is the one pip installed.
    assert wheel_metadata["Version"] == project["version"] == adk.__version__
    assert wheel_metadata["Requires-Python"] == project["requires-python"]
    # An SPDX expression (PEP 639): the TOML table form is deprecated, with a date after which
    # setuptools refuses to build.
    assert wheel_metadata["License-Expression"] == "Apache-2.0"
    wanted = {str(Requirement(r)) for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        wanted |= {f'{Requirement(r)}; extra == "{extra}"' for r in requirements}
    assert {str(Requirement(r)) for r in wheel_metadata.get_all("Requires-Dist")} == {
        str(Requirement(r)) for r in wanted
    }
    assert set(wheel_metadata.get_all("Provides-Extra")) == set(project["optional-dependencies"])


def test_the_console_script_is_the_cli(built: _Built, capsys: pytest.CaptureFixture[str]) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        entry_points = wheel.read(f"pyadk-{adk.__version__}.dist-info/entry_points.txt").decode()
    assert "[console_scripts]\npyadk = adk.cli:main" in entry_points
    from adk.cli import main

    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out == f"pyadk {adk.__version__}\n"


# A user who installed pyadk without an extra and names what needs it: each name says which extra
# to install. Run in a subprocess where the extra's packages cannot be imported (a None in
# sys.modules makes their import a ModuleNotFoundError), as in an environment without them.
_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
exec(sys.argv[2])
"""


def _run_without(modules: str, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT, modules, code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("modules", "name", "extra"),
    [
        ("redis", "adk.checkpoint.RedisCheckpointStore", "redis"),
        ("asyncpg", "adk.checkpoint.PostgresCheckpointStore", "postgres"),
        # PyFlink brings cloudpickle: without the extra neither is there, and _flink imports
        # cloudpickle first (a bare "No module named 'cloudpickle'" before).
        ("pyflink,cloudpickle", "adk.execution.FlinkExecutionEnvironment", "flink"),
    ],
)
def test_a_name_needing_a_missing_extra_says_which(modules: str, name: str, extra: str) -> None:
    module, _, attribute = name.rpartition(".")
    done = _run_without(modules, f"from {module} import {attribute}")
    assert done.returncode == 1
    assert f"pip install 'pyadk[{extra}]'" in done.stderr.splitlines()[-1], done.stderr


@pytest.mark.parametrize(
    ("modules", "where", "extra"),
    [
        ("redis", ["--redis", "redis://127.0.0.1:1/0"], "redis"),
        # a bare "pyadk: No module named 'asyncpg'" before
        ("asyncpg", ["--postgres", "postgresql://u@127.0.0.1:1/db"], "postgres"),
    ],
)
def test_the_cli_says_which_extra_a_store_needs(modules: str, where: list[str], extra: str) -> None:
    code = "from adk.cli import main; raise SystemExit(main(sys.argv[3:]))"
    done = _run_without(modules, code, "checkpoint", "list", *where)
    assert done.returncode == 1
    assert f"pip install 'pyadk[{extra}]'" in done.stderr, done.stderr
    assert done.stdout == ""


def test_the_lowest_versions_allowed_are_the_ones_the_docs_say_were_tested() -> None:
    """architecture.md's "Dependency versions" names the versions the tests were run on: a bound
    raised or lowered in pyproject.toml without running them there is caught here."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("\n## Dependency versions\n", 1)[1].split("\n## ", 1)[0]
    tested = section.split("\n\n", 1)[0].replace("\n", " ")
    for dependency in PYPROJECT["project"]["dependencies"]:
        requirement = Requirement(dependency)
        [lowest] = [s.version for s in requirement.specifier if s.operator == ">="]
        assert f"{requirement.name} {lowest}" in tested, (requirement.name, lowest)
