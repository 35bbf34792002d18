"""Every ``python`` snippet in docs/performance.md runs as written (in a fresh interpreter: the
snippets call ``gc.freeze()`` and ``asyncio.run``, which must not touch the suite's process)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNIPPETS = re.findall(
    r"^```python\n(.*?)^```", (ROOT / "docs" / "performance.md").read_text(), re.DOTALL | re.M
)


def test_the_page_has_snippets() -> None:
    assert SNIPPETS


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_the_snippet_runs(index: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SNIPPETS[index]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
