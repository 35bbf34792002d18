"""An app test's own file run as a second process, as the app tests resume their pauses: the
same app over the same files, in a new interpreter, as another replica of a service would."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

_CHECKOUT = str(Path(__file__).resolve().parent.parent)


async def run_as_process(script: str, *args: str) -> Any:
    """Run ``script`` with ``args`` in a new Python process over this checkout's adk and give the
    JSON it printed; a process that fails fails the test with what it wrote to stderr."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        script,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": _CHECKOUT},
    )
    out, err = await child.communicate()
    assert child.returncode == 0, err.decode()
    return json.loads(out)
