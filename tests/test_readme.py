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
    linked = set(re.findall(r"\]\(((?:docs|examples)/[\w.]+)\)", README))
    pages = {f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")}
    examples = {f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py")}
    assert pages | examples <= linked, sorted((pages | examples) - linked)
