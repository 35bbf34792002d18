"""The layers docs/architecture.md draws are the imports the code has.

The page's "Layers" diagram says which modules sit on which, and that imports only point
downward; a reader learns the core's shape from it, and a module moved or a new import across it
would leave the drawing wrong without anyone seeing. This reads the diagram and every module-level
import of the modules it names (``TYPE_CHECKING`` imports excepted: they run no code).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADK = ROOT / "adk"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ADK).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path) for path in ADK.rglob("*.py")}


def _named(token: str) -> str:
    """The module (or package) a diagram token names: ``tools/base``, ``actions/``, or a module's
    own name where it is unique (``_snapshot``)."""
    name = token.strip("/").replace("/", ".")
    if name in MODULES:
        return name
    matches = [module for module in MODULES if module.rsplit(".", 1)[-1] == name]
    assert len(matches) == 1, f"the diagram's {token!r} names no one module: {matches}"
    return matches[0]


def _layers() -> dict[str, int]:
    """Module (or package) → its line in the diagram, top line 0."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("\n## Layers\n", 1)[1]
    drawing = re.search(r"^```\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert drawing is not None
    rank: dict[str, int] = {}
    for level, line in enumerate(drawing.group(1).splitlines()):
        names = re.split(r"\s{2,}", line.strip())
        # The names come first, then their description after a wider gap: a line's names are
        # the tokens up to the first one that is not a module of the drawing's packages.
        for token in names[0].split() if len(names) == 1 else names[:-1]:
            if token == "prebuilt/":
                continue
            rank[_named(token)] = level
    return rank


def _layer(module: str, rank: dict[str, int]) -> int | None:
    """A module's line: its own, else its package's."""
    while module:
        if module in rank:
            return rank[module]
        module = module.rpartition(".")[0]
    return None


def _imports(path: Path, module: str) -> list[str]:
    """The adk modules a module imports when it loads."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            source = ".".join([*base, node.module] if node.module else base)
            for alias in node.names:
                named = f"{source}.{alias.name}" if source else alias.name
                found.append(named if named in MODULES else source)
    return found


def test_the_diagram_names_the_core() -> None:
    rank = _layers()
    assert {"messages", "events", "context", "_driver", "runner", "checkpoint"} <= set(rank)


def test_imports_only_point_downward() -> None:
    rank = _layers()
    upward = []
    for path in sorted(ADK.rglob("*.py")):
        module = _module(path)
        level = _layer(module, rank)
        if level is None:
            continue
        for imported in _imports(path, module):
            above = _layer(imported, rank)
            if above is not None and above > level:
                upward.append(f"{module} (line {level}) imports {imported} (line {above})")
    assert not upward, upward


def test_the_core_never_imports_prebuilt() -> None:
    importing = [
        _module(path)
        for path in ADK.rglob("*.py")
        if re.search(r"^\s*(from|import) prebuilt\b", path.read_text(), re.MULTILINE)
    ]
    assert not importing
