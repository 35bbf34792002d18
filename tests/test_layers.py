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


def _layers(page: str | None = None) -> dict[str, int]:
    """Module (or package) → its line in the diagram, top line 0."""
    if page is None:
        page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("\n## Layers\n", 1)[1]
    drawing = re.search(r"^```\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert drawing is not None
    rank: dict[str, int] = {}
    for level, line in enumerate(drawing.group(1).splitlines()):
        # The names come first, apart from their description by the line's widest gap (the
        # last, of equal ones): a description may hold a wide gap of its own, never that wide.
        line = line.strip()
        gaps = list(re.finditer(r"\s{2,}", line))
        if gaps:
            widest = max(len(gap.group()) for gap in gaps)
            line = line[: [gap for gap in gaps if len(gap.group()) == widest][-1].start()]
        for token in line.split():
            if token != "prebuilt/":
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
    return _imports_of(path.read_text(), package)


def _imports_of(source: str, package: list[str]) -> list[str]:
    """The adk modules ``source``, a module of ``package``, imports when it loads: relative and
    absolute (``from adk.runner import Runner``) imports at module level, in its ``if`` and
    ``try`` blocks too, but not under ``TYPE_CHECKING`` (they run no code); ``import adk``
    binds the package alone, whose modules load on first access (the page says so)."""
    found: list[str] = []
    for node in _loaded(ast.parse(source).body):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source_module = ".".join([*base, node.module] if node.module else base)
            elif node.module == "adk" or (node.module or "").startswith("adk."):
                source_module = node.module.partition(".")[2]  # type: ignore[union-attr]
            else:
                continue
            for alias in node.names:
                named = f"{source_module}.{alias.name}" if source_module else alias.name
                found.append(named if named in MODULES else source_module)
        elif isinstance(node, ast.Import):
            found.extend(
                alias.name.partition(".")[2]
                for alias in node.names
                if alias.name.startswith("adk.")
            )
    return found


def _loaded(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of ``body`` that run when the module loads, its ``if``/``try`` blocks'
    included (an ``if TYPE_CHECKING:`` block's body excepted, its ``else`` included)."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            checking = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
            found += _loaded(node.orelse if checking else [*node.body, *node.orelse])
        elif isinstance(node, ast.Try):
            handled = [statement for handler in node.handlers for statement in handler.body]
            found += _loaded([*node.body, *handled, *node.orelse, *node.finalbody])
        else:
            found.append(node)
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


def test_a_description_with_a_wide_gap_is_not_read_as_module_names() -> None:
    # A description was every group of the line but the last: one with two spaces in it (after
    # a full stop, say) failed the test as "names no one module", a harmless edit.
    page = (ROOT / "docs" / "architecture.md").read_text()
    edited = page.replace("AgentEvent / AgentOutput", "AgentEvent.  AgentOutput", 1)
    assert edited != page
    assert _layers(edited) == _layers(page)


def test_absolute_and_nested_imports_are_read() -> None:
    # Only relative imports at the top level were read: "from adk.runner import Runner", or an
    # import inside a try block, pointing upward passed unseen.
    source = """
from typing import TYPE_CHECKING
from adk.runner import Runner
import adk.agent_tool
import adk
try:
    from .actions import agent
except ImportError:
    from adk import execution
if TYPE_CHECKING:
    from adk import workflows
"""
    assert _imports_of(source, []) == ["runner", "agent_tool", "actions.agent", "execution"]
