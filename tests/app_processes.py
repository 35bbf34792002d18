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


async def resume_as_process(
    script: str, model_url: str, files: Path, checkpoint_id: str, resume: Any
) -> dict[str, Any]:
    """Resume the pause ``checkpoint_id`` with ``resume`` in another process (``script``, an app
    test's own file, run with the model's URL, the files folder and the order as JSON); what it
    saw, as it printed it."""
    seen: dict[str, Any] = await run_as_process(
        script,
        model_url,
        str(files),
        json.dumps({"checkpoint_id": checkpoint_id, "resume": resume}),
    )
    return seen
