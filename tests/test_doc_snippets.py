"""Every ``python`` program in the concept docs runs as written, and links between pages land,
as do sections cited by name.

The snippets of a page run in one fresh subprocess (they call ``asyncio.run`` and register checkpoint types,
so they must not share the test suite's interpreter), each in its own namespace and working
directory; their printed comments are not checked, their own ``assert`` lines are. Blocks that are
not programs (no ``asyncio.run``) are listings and are skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = {
    "agents.md": 8,
    "composing.md": 4,
    "tools.md": 4,
    "models.md": 4,
    "mcp.md": 4,
    "interrupts.md": 12,
    "event_driven.md": 15,
    "service.md": 3,
    "eino.md": 4,
    "openai_agents.md": 6,
    "langgraph.md": 4,
    "pydantic_ai.md": 9,
    "crewai.md": 7,
    "llamaindex.md": 7,
    "autogen.md": 9,
    "prebuilt.md": 8,
    "google_adk.md": 3,
    "security.md": 1,
}
"""The pages whose snippets are programs, with how many each has at least (so a page whose code
blocks stop matching the pattern fails instead of passing with nothing run)."""
SNIPPET = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

_RUN_ALL = """
import json, os, sys, tempfile, traceback
# "-c" puts "" first on sys.path, which means whatever directory is current at each import: once
# a snippet has changed into its own, adk and prebuilt came from the editable install instead of
# the checkout under test (another worktree's code, tested in this one's name).
sys.path[0] = os.getcwd()
snippets = json.loads(sys.stdin.read())
failures = {}
for index, code in enumerate(snippets):
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            exec(compile(code, f"<snippet {index}>", "exec"), {"__name__": "__main__"})
        except BaseException:
            failures[index] = traceback.format_exc()
        finally:
            os.chdir("/")
print(json.dumps(failures))
"""


@pytest.mark.parametrize(("page", "at_least"), DOCS.items())
def test_every_snippet_runs(page: str, at_least: int) -> None:
    text = (ROOT / "docs" / page).read_text()
    programs = [code for code in SNIPPET.findall(text) if "asyncio.run(" in code]
    assert len(programs) >= at_least

    done = subprocess.run(
        [sys.executable, "-c", _RUN_ALL],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )

    assert done.returncode == 0, done.stderr
    failures = json.loads(done.stdout.splitlines()[-1])
    report = "\n\n".join(f"{programs[int(i)]}\n{trace}" for i, trace in failures.items())
    assert not failures, report


_LINK = re.compile(r"\]\(([^)#\s]*)(#[^)\s]*)?\)")
_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_a_code_fence_is_alone_on_its_line(page: Path) -> None:
    """A fence that closes a block with prose after it on its line (```` ``` To keep ...````) is
    no fence to a markdown renderer: the block runs on to the next fence, taking the prose with
    it, and every block after it opens where the last closed. ``SNIPPET`` takes it as a closing
    all the same, so the snippet ran and nothing failed."""
    wrong = []
    inside = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        fence = line.lstrip()
        if not fence.startswith("```"):
            continue
        if inside and fence.rstrip() != "```":
            wrong.append(f"line {number}: {line!r} closes a block with more on its line")
        elif not inside and not re.fullmatch(r"```[\w+-]*\s*", fence):
            wrong.append(f"line {number}: {line!r} opens a block with more than its language")
        inside = not inside
    assert not inside, f"{page.name}: a code block is never closed"
    assert not wrong, f"{page.name}: {wrong}"


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    prose = _FENCE.sub("", page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", prose, re.MULTILINE)}


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_links_between_pages_resolve(page: Path) -> None:
    """The concept pages send readers to each other's sections; a renamed heading must not leave
    a link going nowhere."""
    broken = []
    for match in _LINK.finditer(_FENCE.sub("", page.read_text())):
        target, anchor = match.group(1), match.group(2)
        if target.startswith(("http://", "https://")):
            continue
        linked = (page.parent / target) if target else page
        if not linked.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor[1:] not in _anchors(linked):
            broken.append(f"{target}{anchor}: no such heading")
    assert not broken, f"{page.name}: {broken}"


_CITED = re.compile(
    r"\b([a-z_]+\.md)`?(?:,|'s|:)?\s+((?:\"[^\"]{2,80}\"(?:,\s*|\s+and\s+|\s+or\s+)?)+)"
    r"|\"([^\"]{2,80})\"\s+in\s+`?(?:docs/)?([a-z_]+\.md)"
)
"""A page cited by a quoted section name or phrase: ``architecture.md, "Layers"``, ``agents.md,
"Usage of a run" and "Conversations across runs"``, ``"Python versions" in docs/architecture.md``."""


def _flat(text: str) -> str:
    """Text on one line, as a reader sees a citation that a line break (and a comment's ``#``)
    splits."""
    return re.sub(r"\s*\n\s*(?:#\s*)?", " ", text)


def _section_names(page: Path) -> set[str]:
    """The names a citation may give each section of ``page``: its heading as a reader reads it
    (backticks dropped, any case), and the heading's words before a colon (``"Calling a model
    from your agent"`` for ``Calling a model from your agent: `ctx.generate```). Headings only,
    not a code block's ``# comment`` lines."""
    names = set()
    for heading in re.findall(r"^#+ (.+)$", _FENCE.sub("", page.read_text()), re.MULTILINE):
        name = heading.replace("`", "").strip().lower()
        names.add(name)
        names.add(name.split(":", 1)[0].strip())
    return names


def test_sections_cited_by_name_exist() -> None:
    """Pages, docstrings, comments and CI scripts point readers at a section by its quoted heading
    (``docs/interrupts.md, "Resuming after a redeploy"``), which no link check sees: each must
    still be a heading of that page. (It used to pass as well when the words were anywhere on
    the page: a renamed section whose old name a sentence or a link's text still said, as
    cross-references do, went unnoticed.)"""
    sources = [
        ROOT / "README.md",
        ROOT / ".ci" / "run",
        *sorted((ROOT / "docs").glob("*.md")),
        *(
            path
            for folder in ("adk", "prebuilt", "tests", "examples", "benchmarks")
            for path in sorted((ROOT / folder).rglob("*.py"))
        ),
    ]
    pages = {path.name: path for path in (ROOT / "docs").glob("*.md")}
    cited = 0
    broken = []
    for source in sources:
        for match in _CITED.finditer(_flat(source.read_text())):
            if match.group(1):
                page, names = match.group(1), re.findall(r'"([^"]+)"', match.group(2))
            else:
                page, names = match.group(4), [match.group(3)]
            if page not in pages:
                continue
            sections = _section_names(pages[page])
            for name in names:
                cited += 1
                if _flat(name).replace("`", "").strip().lower() not in sections:
                    broken.append(f"{source.relative_to(ROOT)}: {page}, {name!r}")
    assert cited >= 10, "the pattern no longer finds the citations"
    assert not broken, broken


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_a_pages_contents_list_names_every_section(page: Path) -> None:
    """A page that opens with a list of its sections (``- [Callbacks](#callbacks)``) lists each
    ``##`` section, in order: a section added later and left out is one readers never find."""
    text = _FENCE.sub("", page.read_text())
    opening = text.split("\n## ", 1)[0]
    listed = re.findall(r"^- \[[^]]+\]\(#([^)]+)\)$", opening, re.MULTILINE)
    if not listed:
        return
    sections = [_slug(h) for h in re.findall(r"^## (.+)$", text, re.MULTILINE)]
    assert listed == sections


def test_the_loggers_the_tracing_page_lists_are_those_pyadk_logs_to() -> None:
    """An operator routes and filters pyadk's logs by logger name: the page's table of loggers
    must name every logger the package creates, and none it does not."""
    used: set[str] = set()
    for path in (ROOT / "adk").rglob("*.py"):
        used |= set(re.findall(r'getLogger\("([\w.]+)"\)', path.read_text()))
    page = (ROOT / "docs" / "tracing.md").read_text()
    section = page.split("\n## Logs\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(adk[\w.]*)` \|", section, re.MULTILINE))
    assert used and listed == used
