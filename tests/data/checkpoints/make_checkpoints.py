"""Write the checkpoints of ``tests/checkpoint_scenarios.py``'s paused runs, as the pyadk on
``PYTHONPATH`` saves them, to ``tests/data/checkpoints/<commit>/<scenario>.ckpt``.

Run from the root of this repository against a worktree of an older commit::

    git worktree add --detach /tmp/pyadk-old <commit>
    PYTHONPATH=/tmp/pyadk-old python tests/data/checkpoints/make_checkpoints.py <commit> [scenario...]

With scenario names, only those are written (the others' bytes are kept as they are).

A scenario the commit cannot run (an
MCP tool's approval before MCPToolset took require_approval) is skipped, saying why. Each
scenario runs to its first pause over an in-memory store (the bytes are the same whatever
store keeps them) and its checkpoint's bytes are written as they are. ``tests/test_checkpoint_upgrade.py``
resumes them with the pyadk of the repository.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import AsyncExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for checkpoint_scenarios

from checkpoint_scenarios import LOG, SCENARIOS, SESSION  # noqa: E402

import adk  # noqa: E402
from adk.checkpoint import InMemoryCheckpointStore  # noqa: E402


async def main(commit: str, names: list[str]) -> None:
    out = HERE / commit
    out.mkdir(exist_ok=True)
    print(f"pyadk from {Path(adk.__file__).parent}")
    for scenario in SCENARIOS:
        if names and scenario.name not in names:
            continue
        LOG.clear()
        store = InMemoryCheckpointStore()
        try:
            async with AsyncExitStack() as stack:
                agent = await scenario.build(stack)
                runner = adk.Runner(agent, checkpoint_store=store)
                paused = await runner.invoke(
                    scenario.input, checkpoint_id=scenario.name, session=dict(SESSION)
                )
        except Exception as exc:  # a feature this commit does not have (MCP approval): skipped
            print(f"{scenario.name}: skipped, {type(exc).__name__}: {exc}")
            continue
        if paused.interrupt is None:
            raise SystemExit(f"{scenario.name} did not pause: {paused.text!r}")
        data = await store.get(scenario.name)
        assert data is not None
        (out / f"{scenario.name}.ckpt").write_bytes(data)
        print(f"{scenario.name}: {len(data)} bytes, points {paused.interrupt.point_ids}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
