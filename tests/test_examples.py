"""Every example program runs to completion.

Conventions for ``examples/*.py`` (read from the source with ``ast``; the example is not imported):

- A file is run when it defines ``main()`` (``def`` or ``async def``) at module level. It is run as
  ``python examples/<file>.py`` from the project root and must exit with code 0 and print something.
- Files named ``*_server.py`` are helpers for other examples (servers they start) and are not run;
  neither are private modules (``_*.py``).
- ``EXAMPLE_SKIP = "reason"`` at module level skips an example that needs a service the test
  environment does not have (an API key, a Flink cluster); the reason shows in the pytest report.
- ``EXAMPLE_EXPECT = ("text", ...)`` at module level lists text the output must contain.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TIMEOUT = 60


def _module_constant(tree: ast.Module, name: str) -> Any:
    """The literal value assigned to ``name`` at module level, or None."""
    for node in tree.body:
        if isinstance(node, ast.Assign):
            named = any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            named = isinstance(node.target, ast.Name) and node.target.id == name
        else:
            continue
        if named and node.value is not None:
            return ast.literal_eval(node.value)
    return None


def _has_main(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main"
        for node in tree.body
    )


def _examples() -> list[Any]:
    params = []
    for path in sorted(EXAMPLES.glob("*.py")):
        if path.name.endswith("_server.py") or path.name.startswith("_"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        if not _has_main(tree):
            continue
        skip = _module_constant(tree, "EXAMPLE_SKIP")
        expect = tuple(_module_constant(tree, "EXAMPLE_EXPECT") or ())
        marks = [pytest.mark.skip(reason=str(skip))] if skip else []
        params.append(pytest.param(path, expect, id=path.stem, marks=marks))
    return params


def test_the_research_pipeline_example_is_discovered() -> None:
    assert "research_pipeline" in [p.id for p in _examples()]


@pytest.mark.parametrize(("path", "expect"), _examples())
def test_example_runs(path: Path, expect: tuple[str, ...]) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    report = f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    assert done.returncode == 0, report
    assert done.stdout.strip(), f"{path.name} printed nothing\n{report}"
    for text in expect:
        assert text in done.stdout, f"{path.name} should print {text!r}\n{report}"


_IMPORT_NAMES = {"opentelemetry-sdk": "opentelemetry"}
"""Distributions whose import name is not their own."""


def _provided() -> set[str]:
    """What ``pip install pyadk`` makes importable: the project's packages, its dependencies (by
    import name) and the standard library."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[\[<>=!~; ]", dep, maxsplit=1)[0] for dep in project["dependencies"]}
    return {_IMPORT_NAMES.get(name, name) for name in names} | {"adk", "prebuilt"}


def _imported(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names)


def test_an_example_needing_more_than_pyadk_says_what_in_the_readme() -> None:
    """The README says to ``pip install -e .`` and run ``python examples/<name>.py``: an example
    that imports a package pyadk does not depend on (Starlette, uvicorn: dev extras) failed with a
    ModuleNotFoundError for a newcomer who followed it; its row in the README's table names what
    to install."""
    readme = (ROOT / "README.md").read_text()
    provided = _provided() | {path.stem for path in EXAMPLES.glob("*.py")}
    missing = {}
    for path in sorted(EXAMPLES.glob("*.py")):
        extra = _imported(ast.parse(path.read_text(encoding="utf-8"))) - provided
        if not extra:
            continue
        [row] = [line for line in readme.splitlines() if f"(examples/{path.name})" in line]
        unnamed = sorted(name for name in extra if f"`{name}`" not in row)
        if unnamed or "pip install" not in row:
            missing[path.name] = unnamed
    assert not missing, missing
