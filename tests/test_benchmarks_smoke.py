"""Smoke test of the benchmark harness: it runs, prints its table and writes its JSON.

Not a timing test: the figures are not compared with anything here (they depend on the machine and
its load); the benchmark itself, with its targets, is ``python -m benchmarks``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import adk
import benchmarks.__main__ as suite
from benchmarks import _callgrind, checkpoints
from benchmarks._callgrind import InstructionCount

REPO = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    # The timeout only stops a hung harness: a quick run takes seconds, but under callgrind on a
    # loaded 2-CPU machine (another callgrind run beside it) one went past 120 s.
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _extra_rows(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    """Runs the quick ``--only name`` extra and returns the rows it wrote under ``extras``; a
    failing run fails here with its output."""
    output = tmp_path / "results.json"
    proc = _bench("--quick", "--only", name, "--output", str(output))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows: list[dict[str, Any]] = json.loads(output.read_text())["extras"][name]["rows"]
    return rows


def test_quick_run_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    proc = _bench("--quick", "--only", "d,events", "--output", str(output))
    assert proc.returncode == 0, proc.stderr
    assert "| scenario" in proc.stdout
    assert "(d) SequentialAgent of 10 custom agents" in proc.stdout
    assert "per-event overhead through a Runner" in proc.stdout
    document = json.loads(output.read_text())
    rows = {row["scenario"]: row for row in document["rows"]}
    assert set(rows) == {"d", "events"}
    # The workload asserted its own result (10 events per run); the figures are real measurements.
    assert rows["d"]["cpu_us"] > 0 and rows["d"]["rounds"] == 2
    assert rows["d"]["target"] == 100.0 and isinstance(rows["d"]["ok"], bool)
    assert rows["events"]["events_per_run"] == 1000
    assert document["machine"]["nproc"] >= 1


def test_unknown_benchmark_name_is_a_clear_error(tmp_path: Path) -> None:
    proc = _bench("--quick", "--only", "nope", "--output", str(tmp_path / "r.json"))
    assert proc.returncode != 0
    assert "unknown benchmark 'nope'" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_other_modules_benchmarks_run_and_a_broken_one_fails_the_suite(tmp_path: Path) -> None:
    """``checkpoints`` uses private runtime names; a refactor that breaks it must fail the suite
    (exit 1, FAILED in the table), not turn into a quiet skip."""
    output = tmp_path / "results.json"
    proc = _bench("--quick", "--only", "checkpoints", "--output", str(output))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    extras = json.loads(output.read_text())["extras"]
    rows = extras["checkpoints"]["rows"]
    assert {row["benchmark"] for row in rows} >= {
        "checkpoints.memory.10ev",
        "checkpoints.sqlite.1000ev",
    }
    sized = [row for row in rows if "count" not in row]
    assert all(row["bytes"] > 0 and row["save_ms"] > 0 for row in sized)
    # The nested run's rows: one per action, each saying how --instructions counts it.
    nested = {row["benchmark"]: row for row in rows if "count" in row}
    assert set(nested) == {
        f"checkpoints.nested.{size}.{how}.{action}"
        for size in ("small", "long")
        for how in ("codec", "memory", "sqlite")
        for action in ("save", "load")
    }
    assert nested["checkpoints.nested.long.sqlite.save"]["messages"] > 100
    assert all(row["bytes"] > 0 and row["us"] > 0 for row in nested.values())


def test_instructions_count_the_rows_of_other_modules_that_say_how(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--instructions`` counts an extra module's rows that carry ``count`` (its scenario and
    variant as a harness workload), with the module as the workload, and leaves the others."""
    counted: list[tuple[str, str, str]] = []

    def count(module: str, scenario: str, variant: str, **options: Any) -> InstructionCount:
        counted.append((module, scenario, variant))
        return InstructionCount(1234.0, options["runs"], (1, 2))

    monkeypatch.setattr(suite, "count_instructions", count)
    rows: list[dict[str, Any]] = [
        {"benchmark": "checkpoints.memory.10ev", "save_ms": 1.0},
        {"benchmark": "n", "us": 500.0, "count": ["nested.long.codec", "save"]},
    ]
    suite._count_extra("checkpoints", rows, quick=True)
    assert counted == [("benchmarks.checkpoints", "nested.long.codec", "save")]
    assert "instructions_per_run" not in rows[0]
    assert rows[1]["instructions_per_run"] == 1234


def test_a_row_counted_under_several_hash_seeds_gives_their_median_and_spread_per_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row with ``count_seeds`` is counted once per seed (the same code counts a few per cent
    apart under two seeds): the figure is the median, per ``count_per`` units a run, with the
    min–max and every seed's count; ``--quick`` counts the first seed alone; ``count_runs`` are
    the run counts used as given."""
    counted: list[tuple[str, int, tuple[int, int]]] = []
    per_seed = {0: 3000.0, 1: 2900.0, 2: 3300.0}

    def count(module: str, scenario: str, variant: str, **options: Any) -> InstructionCount:
        counted.append((scenario, options["seed"], options["runs"]))
        return InstructionCount(per_seed[options["seed"]], options["runs"], (1, 2))

    monkeypatch.setattr(_callgrind, "count_instructions", count)

    def row() -> dict[str, Any]:
        return {
            "benchmark": "openai_adapter.delta.text",
            "count": ["delta.text", "run"],
            "count_runs": [10, 30],
            "count_seeds": [0, 1, 2],
            "count_per": 100,
            "count_unit": "delta",
        }

    full, quick = row(), row()
    suite._count_extra("openai_adapter", [full], quick=False)
    assert counted == [("delta.text", seed, (10, 30)) for seed in (0, 1, 2)]
    assert full["instructions_per_delta"] == 30  # the median of 29, 30 and 33 a delta
    assert (full["instructions_per_delta_min"], full["instructions_per_delta_max"]) == (29, 33)
    assert full["instructions_seeds"] == {"0": 30, "1": 29, "2": 33}
    counted.clear()
    suite._count_extra("openai_adapter", [quick], quick=True)
    assert counted == [("delta.text", 0, (10, 30))]
    assert quick["instructions_per_delta"] == quick["instructions_per_delta_max"] == 30


def test_the_per_delta_and_event_driven_workloads_run_as_the_count_worker_runs_them() -> None:
    """What the count worker runs for the adapter's per-delta rows (each checks the chunk the
    decoder made of its delta) and the event-driven rows (each asserts its answer)."""
    from benchmarks import action_agents, openai_adapter

    async def each() -> None:
        for scenario in openai_adapter.DELTAS:
            await (await openai_adapter.build(scenario))["run"]()
        for scenario in ("per_event", "turn", "per_record"):
            run = (await action_agents.build(scenario))["run"]
            await run()
            await run()  # a second run of the same workload, as the count worker does
        with pytest.raises(NotImplementedError, match="unknown scenario"):
            await openai_adapter.build("delta.nope")

    asyncio.run(each())


def test_the_nested_checkpoint_workload_saves_and_loads() -> None:
    """What the count worker runs for a nested row: the harness's workload protocol."""

    async def both() -> None:
        variants = await checkpoints.build("nested.small.memory")
        assert await variants["save"]() > 0
        await variants["load"]()

    asyncio.run(both())


def test_a_crashing_extra_benchmark_is_a_failure() -> None:
    """A module of our own that cannot be imported is a failure (only a missing third-party
    dependency is a skip)."""
    from benchmarks.__main__ import extras_table, run_extra

    result = run_extra("no_such_module_for_test", quick=True)
    assert "skipped" not in result
    assert "benchmarks.no_such_module_for_test" in result["failed"]
    assert "FAILED" in extras_table({"no_such_module_for_test": result})


# The suite's 120 s limit would stop it before _bench's own guard: callgrind on a loaded
# machine took longer (it passed alone in 24 s).
@pytest.mark.timeout(900)
def test_instruction_counts_skip_the_import_rows(tmp_path: Path) -> None:
    """``--instructions`` with the import rows selected: those rows have no worker to count (this
    crashed with a KeyError once); a timed row gets its count, or a note where valgrind is missing.
    One import sample per row (``--import-samples 1``): their number is not what this pins."""
    output = tmp_path / "results.json"
    proc = _bench(
        "--quick",
        "--only",
        "import,d",
        "--instructions",
        "--import-samples",
        "1",
        "--output",
        str(output),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {row["scenario"]: row for row in json.loads(output.read_text())["rows"]}
    assert {"import", "import_rss", "d"} <= set(rows)
    assert rows["import"]["samples"] == 1
    assert "instructions_per_run" not in rows["import"]
    if shutil.which("valgrind"):
        assert rows["d"]["instructions_per_run"] > 0
    else:
        assert "k instr/run" in proc.stdout and "valgrind not installed" in proc.stdout


@pytest.mark.parametrize("samples", ["0", "-2", "x"])
def test_an_import_sample_count_below_one_is_refused(
    samples: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exited:
        suite.main(
            ["--quick", "--only", "import", "--import-samples", samples, "--output", str(output)]
        )
    assert exited.value.code == 2
    assert "--import-samples" in capsys.readouterr().err
    assert not output.exists()


def test_the_frozen_in_flight_scenario_runs_in_its_own_process(tmp_path: Path) -> None:
    """``c_b.inflight.frozen`` calls ``gc.freeze()`` in its worker (never here): it reports the
    concurrent/sequential ratio and the collections per generation like the unfrozen row."""
    output = tmp_path / "results.json"
    proc = _bench("--quick", "--only", "c_b.inflight.frozen", "--output", str(output))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "after gc.freeze()" in proc.stdout
    (row,) = json.loads(output.read_text())["rows"]
    assert row["scenario"] == "c_b.inflight.frozen" and row["unit"].startswith("×")
    assert row["value"] > 0 and len(row["gc_per_1000_runs_concurrent"]) == 3


def test_gc_settings_are_applied_in_their_workers(tmp_path: Path) -> None:
    """Each setting reaches its worker: the collector off collects nothing, the raised threshold
    collects far less often than the default (collection counts, not timings)."""
    rows = _extra_rows(tmp_path, "gc_settings")
    young = {(r["workload"], r["setting"]): r["gc_per_1000_runs"][0] for r in rows}
    assert set(young) == {
        (w, s) for w in ("a.inflight", "b.inflight") for s in ("default", "frozen", "tuned", "nogc")
    }
    for workload in ("a.inflight", "b.inflight"):
        assert young[workload, "nogc"] == 0
        assert young[workload, "default"] > 10 * young[workload, "tuned"] > 0


def test_the_event_driven_benchmark_reports_each_figure(tmp_path: Path) -> None:
    """``action_agents`` runs its workloads (each asserts its own answer, e.g. ``sum=3``) and
    reports every row with a positive median and its min–max."""
    rows = _extra_rows(tmp_path, "action_agents")
    by_name = {row["benchmark"]: row for row in rows}
    assert set(by_name) == {
        "actions.per_event",
        "actions.turn_b",
        "react.turn_b",
        "execution.per_record",
    }
    for row in rows:
        assert row["min"] <= row["median"] <= row["max"]
    assert by_name["actions.turn_b"]["median"] > 0 and by_name["react.turn_b"]["actions_ratio"] > 0
    assert "environment_us" in by_name["execution.per_record"]
    # How --instructions counts the three rows rounds 15 to 17 counted (react.turn_b: (b)'s).
    counted = {row["benchmark"]: row["count"] for row in rows if "count" in row}
    assert counted == {
        "actions.per_event": ["per_event", "run"],
        "actions.turn_b": ["turn", "run"],
        "execution.per_record": ["per_record", "run"],
    }


def test_the_soak_reports_growth_per_store_and_tracing_setting(tmp_path: Path) -> None:
    """``soak`` drives its three workloads (each asserts its answer) through one runner each and
    reports, per store and tracing setting, what grew; a quick run leaves no fd and no task."""
    rows = _extra_rows(tmp_path, "soak")
    by_name = {row["benchmark"]: row for row in rows}
    assert set(by_name) == {
        "soak.memory",
        "soak.memory.traced",
        "soak.sqlite",
        "soak.sqlite.traced",
    }
    for row in rows:
        assert row["runs"] == 50 and row["fd_growth"] == 0 and row["tasks_left"] == 0
        assert isinstance(row["tracemalloc_growth_kib"], float)


async def test_the_mixed_soak_passes_its_own_cancellation_through_a_cut_off_run() -> None:
    """Ctrl-C stops ``soak --mixed``: ``asyncio.run`` cancels its task, which, every iteration,
    waits for a request it cancelled inside a tool to unwind. That wait swallowed the soak's own
    cancellation too (``suppress(CancelledError)`` around the ``await``): a Ctrl-C that came
    then was lost, the soak going on (with its task's cancellation count left at 1)."""
    from adk import Runner
    from adk.testing import ScriptedModel
    from benchmarks import soak
    from prebuilt import ReActAgent

    unwinding, unwind = asyncio.Event(), asyncio.Event()

    @adk.tool
    async def stuck(x: int) -> int:
        """Never returns; cancelled, it unwinds when the test says."""
        try:
            await asyncio.Event().wait()
        finally:
            unwinding.set()
            await unwind.wait()
        return x

    clerk = ReActAgent("clerk", ScriptedModel(soak._clerk_says, record=False), tools=[stuck])
    async with Runner(clerk) as runner:
        cutting = asyncio.ensure_future(soak._cancelled_inside_a_tool(runner))
        # Until the soak has cancelled the request in the tool, and waits for it to unwind.
        unwound = asyncio.ensure_future(unwinding.wait())
        await asyncio.wait([cutting, unwound], return_when=asyncio.FIRST_COMPLETED)
        unwound.cancel()
        assert unwinding.is_set() and not cutting.done()
        cutting.cancel()  # Ctrl-C
        unwind.set()
        with pytest.raises(asyncio.CancelledError):
            await cutting


def test_the_gc_warm_up_of_a_gather_waits_for_no_cycle_with_the_collector_off() -> None:
    """With the collector off there is no cycle to reach: the warm-up returns at once, where it
    waited out its whole limit (3 s per ``nogc`` worker); with it on, it gathers."""
    from benchmarks._harness import _gc_steady_state

    gathered = 0

    async def run() -> None:
        nonlocal gathered
        gathered += 1

    enabled = gc.isenabled()
    gc.disable()
    try:
        asyncio.run(_gc_steady_state(run, run, 10, limit_s=3600.0))
    finally:
        if enabled:
            gc.enable()
    assert gathered == 0
    asyncio.run(_gc_steady_state(run, run, 10, limit_s=0.0))
    assert gathered == 20  # one gather of each, then the (zero) limit is past
