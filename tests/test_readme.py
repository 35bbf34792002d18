"""The README's quick example runs as written and prints what its comments say.

The README is the first page a user reads; its example is copied into editors more than any other
code in the project, so it is held to the docs' rule (every snippet runs) and a little more: a
``print(...)  # text`` line's comment is the output the reader is promised, and it is checked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SNIPPETS = re.findall(r"^```python\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
PROMISED = re.compile(r"^\s*print\(.*\)\s+#\s*(.+?)\s*$", re.MULTILINE)


def test_the_readme_starts_with_the_demo_and_test_commands() -> None:
    first_block = re.search(r"^```bash\n(.*?)^```", README, re.DOTALL | re.MULTILINE)
    assert first_block is not None
    assert README[: first_block.start()].strip() == "# pyadk", "the commands come first"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["pip install -e . && python examples/demo.py", "bash .ci/test"]
    assert (ROOT / "examples" / "demo.py").is_file() and (ROOT / ".ci" / "test").is_file()


def test_the_quick_example_prints_what_it_promises(tmp_path: Path) -> None:
    assert SNIPPETS, "the README has no python example"
    for snippet in SNIPPETS:
        promised = PROMISED.findall(snippet)
        done = subprocess.run(
            [sys.executable, "-c", snippet],
            cwd=tmp_path,  # as a user would run it: from anywhere, with the package installed
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == promised, snippet


def test_the_readme_leads_to_every_page_and_example() -> None:
    """The README is the index: a page or an example it does not name is one readers never find."""
    linked = _linked(README)
    pages = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    examples = {f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py")}
    assert pages | examples <= linked, sorted((pages | examples) - linked)


def _linked(readme: str) -> set[str]:
    """The pages and examples ``readme`` links to, as ``docs/x.md``: a link to a section of a
    page (``docs/x.md#y``), one written ``./docs/x.md`` and a name with a ``-`` link the file."""
    return set(re.findall(r"\]\((?:\./)?((?:docs|examples)/[^)#\s]+)(?:#[^)\s]*)?\)", readme))


def test_a_link_to_a_section_or_written_from_here_links_the_page() -> None:
    # Only "](docs/x.md)" counted: a page the README links at a section of it, or as
    # "./docs/x.md", or an example named with a "-", was reported as never linked.
    readme = (
        "[Layers](docs/architecture.md#layers), [tools](./docs/tools.md), "
        "[a service](examples/agent-service.py) and [demo](examples/demo.py)"
    )
    assert _linked(readme) == {
        "docs/architecture.md",
        "docs/tools.md",
        "examples/agent-service.py",
        "examples/demo.py",
    }
