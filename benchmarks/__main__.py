"""``python -m benchmarks``: run the pyadk suite, print a table, write JSON results.

Options (``--help`` lists them all):
  --quick           few rounds (smoke test); other modules' benchmarks are skipped unless named
  --only NAME,...   run only these: import, a, b, c (c_a, c_b, their in-flight variants
                    c_a.inflight, c_b.inflight, and those after gc.freeze(), c_a.inflight.frozen,
                    c_b.inflight.frozen), d, events, scripted, or the name of another
                    benchmark module in benchmarks/ (openai_adapter, tracing_overhead, ...);
                    with --peers: import, a, b, c (or c_a, c_b, c_a.inflight, c_b.inflight), d
  --rounds N        rounds per process (default 7, quick 2); with --peers: rounds per peer and
                    repeat (default 5), alternated with pyadk's rounds in live workers
  --repeat N        run every scenario in N fresh processes and pool their rounds (peers: N fresh
                    sets of workers per scenario, default 2)
  --import-samples N  fresh interpreters timed per import row of pyadk (default 11, quick 3)
  --peers           the side-by-side peers mode (downloads pinned SDKs into venvs; not CI)
  --instructions    also count instructions per run with valgrind's callgrind (deterministic,
                    unlike this machine's timings); skipped, with a note, if valgrind is missing
  --profile NAME    cProfile a pyadk scenario (or ``-X importtime`` for ``import``) and print the
                    top functions, instead of measuring

Results go to ``benchmarks/results/latest.json`` (peers: ``peers-latest.json``) unless ``--output``.
What the figures mean, the targets and the latest numbers: docs/performance.md.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._callgrind import count_instructions, over_seeds, runs_for, valgrind
from ._harness import (
    REPO,
    BenchmarkError,
    Figure,
    WorkerResult,
    format_table,
    import_breakdown,
    machine_info,
    measure_import,
    run_worker,
)

PYADK = "benchmarks.pyadk_workloads"
RESULTS = REPO / "benchmarks" / "results"
SUITE = ("import", "a", "b", "c", "d", "events", "scripted")
ALIASES = {
    "c": (
        "c_a",
        "c_b",
        "c_a.inflight",
        "c_b.inflight",
        "c_a.inflight.frozen",
        "c_b.inflight.frozen",
    ),
    "scripted": ("a.scripted", "b.scripted"),
}
# Modules of benchmarks/ that are not benchmarks of their own.
NOT_EXTRAS = {"__init__", "__main__", "pyadk_workloads"}

TITLES = {
    "a": "(a) ReActAgent turn, model answers 'done'",
    "b": "(b) ReActAgent + add(a=1, b=2) tool, answers 'sum=3'",
    "c_a": "(c) 1,000 concurrent runs of (a), per run",
    "c_b": "(c) 1,000 concurrent runs of (b), per run",
    "c_a.inflight": "(c) 1,000 runs of (a) in flight (model awaits), per run",
    "c_b.inflight": "(c) 1,000 runs of (b) in flight (model awaits), per run",
    "c_a.inflight.frozen": "(c) 1,000 runs of (a) in flight, after gc.freeze(), per run",
    "c_b.inflight.frozen": "(c) 1,000 runs of (b) in flight, after gc.freeze(), per run",
    "d": "(d) SequentialAgent of 10 custom agents",
    "events": "per-event overhead through a Runner",
    "a.scripted": "(a) with ScriptedModel(record=False)",
    "b.scripted": "(b) with ScriptedModel(record=False)",
}
TARGETS: dict[str, float] = {
    "a": 60.0,  # CPU µs per run
    "b": 150.0,
    "c_a": 1.2,  # concurrent / sequential CPU per run
    "c_b": 1.2,
    "c_a.inflight": 1.2,
    "c_b.inflight": 1.2,
    "c_a.inflight.frozen": 1.2,
    "c_b.inflight.frozen": 1.2,
    "d": 100.0,
    "events": 5.0,  # CPU µs per event
    "import": 150.0,  # ms
    "import_rss": 35.0,  # MiB
}


# -- rows -----------------------------------------------------------------------------------------
def _row(
    scenario: str,
    title: str,
    value: Figure,
    unit: str,
    target: float | None,
    base: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One JSON row: the figure compared with the target (``value`` ≤ ``target``) plus details."""
    row: dict[str, Any] = {"benchmark": f"pyadk.{scenario}", "sdk": "pyadk", "scenario": scenario}
    row["title"] = title
    row.update(base or {})
    row.update(extra)
    row.update(
        value=round(value.median, 3),
        value_min=round(value.low, 3),
        value_max=round(value.high, 3),
        unit=unit,
        target=target,
        ok=None if target is None else value.median <= target,
    )
    return row


def _worker_rows(scenario: str, result: WorkerResult) -> list[dict[str, Any]]:
    title = TITLES[scenario]
    target = TARGETS.get(scenario)
    if scenario.startswith("c_"):
        ratio, net = result.concurrency_ratios()
        seq = result.cpu("sequential")
        floor = result.cpu("asyncio")
        return [
            _row(
                scenario,
                title,
                ratio,
                "× sequential",
                target,
                result.base_row("concurrent"),
                sequential_cpu_us=round(seq.median, 2),
                asyncio_gather_us=round(floor.median, 2),
                ratio_net_of_asyncio=round(net.median, 3),
                concurrency=result.runs_per_round,
                **_gc_rates(result),
            )
        ]
    if scenario == "events":
        n = result.events_per_run or 1
        per_event = result.paired("run", "bare", lambda r, b: (r - b) / n)
        bare = result.cpu("bare")
        return [
            _row(
                scenario,
                title,
                per_event,
                "µs/event",
                target,
                result.base_row("run"),
                events_per_run=n,
                bare_cpu_us=round(bare.median, 2),
            )
        ]
    return [_row(scenario, title, result.cpu("run"), "µs/run", target, result.base_row("run"))]


def _gc_rates(result: WorkerResult) -> dict[str, list[float]]:
    """Collections per 1,000 runs (gen0, gen1, gen2) of the concurrent and sequential arms: what
    1,000 runs in flight cost the cyclic GC shows here before it shows in the ratio."""
    rates = {}
    for arm in ("concurrent", "sequential"):
        per_generation = result.gc_per_1000(arm)
        if per_generation is not None:
            rates[f"gc_per_1000_runs_{arm}"] = [round(x, 3) for x in per_generation]
    return rates


# -- instruction counts ---------------------------------------------------------------------------
def _countable(scenario: str) -> bool:
    """Counted with callgrind: every timed scenario but the gathers of 1,000 runs (too long under
    callgrind's ~50× slowdown; their sequential arm is the scenario they gather)."""
    return scenario != "import" and not scenario.startswith("c_")


def _count(scenario: str, variant: str, cpu_us: float, quick: bool) -> dict[str, Any]:
    """One row's instruction figures, or a note saying why there are none."""
    runs = runs_for(cpu_us, quick)
    print(
        f"[pyadk] {scenario}/{variant}: instructions, {runs[0]} vs {runs[1]} runs ...", flush=True
    )
    try:
        count = count_instructions(PYADK, scenario, variant, python=sys.executable, runs=runs)
    except (BenchmarkError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return {"instructions_error": str(exc).splitlines()[0]}
    return count.as_dict()


def _add_instructions(row: dict[str, Any], result: WorkerResult, quick: bool) -> None:
    """Instructions per run into ``row``; for the per-event row also per event (run minus the bare
    generator, over the events), the deterministic twin of its µs/event figure."""
    scenario = row["scenario"]
    row.update(_count(scenario, "run", result.cpu("run").median, quick))
    if scenario == "events" and "instructions_per_run" in row:
        bare = _count(scenario, "bare", result.cpu("bare").median, quick)
        if "instructions_per_run" in bare:
            n = result.events_per_run or 1
            per_event = (row["instructions_per_run"] - bare["instructions_per_run"]) / n
            row["instructions_per_event"] = round(per_event)
            row["bare_instructions_per_run"] = bare["instructions_per_run"]


def _count_extra(name: str, rows: list[dict[str, Any]], quick: bool) -> None:
    """Instructions of another module's rows that say how to count them (``"count"``:
    ``[scenario, variant]`` of the module as a harness workload, and ``"us"``, its native time).

    A row may also give ``"count_seeds"``, the hash seeds to count it under (the figure is then
    the median over them, with its min–max and each seed's count: see ``SeededCount``;
    ``--quick`` counts under the first alone), and ``"count_per"`` with ``"count_unit"``, the
    units one run does (100 deltas a run: the figure is ``instructions_per_delta``), and
    ``"count_runs"``, ``[N1, N2]`` to count with instead of those sized from ``"us"``."""
    for row in rows:
        scenario, variant = row.get("count") or (None, None)
        if scenario is None:
            continue
        given = row.get("count_runs")  # a row's own, to count as earlier rounds did
        runs = (
            (int(given[0]), int(given[1]))
            if given
            else runs_for(float(row.get("us", 1000.0)), quick)
        )
        seeds = [int(s) for s in row.get("count_seeds") or ()][: 1 if quick else None]
        how = f"{runs[0]} vs {runs[1]} runs"
        if seeds:
            how += f", hash seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
        print(f"[{name}] {scenario}/{variant}: instructions, {how} ...", flush=True)
        module = f"benchmarks.{name}"
        try:
            if seeds:
                seeded = over_seeds(
                    module, scenario, variant, python=sys.executable, runs=runs, seeds=seeds
                )
                per, unit = int(row.get("count_per", 1)), str(row.get("count_unit", "run"))
                row.update(seeded.as_dict(per, unit))
            else:
                count = count_instructions(
                    module, scenario, variant, python=sys.executable, runs=runs
                )
                row.update(count.as_dict())
        except (BenchmarkError, ValueError) as exc:
            print(exc, file=sys.stderr)
            row["instructions_error"] = str(exc).splitlines()[0]


def _import_rows(quick: bool, samples: int | None = None) -> list[dict[str, Any]]:
    repeat = samples or (3 if quick else 11)
    rows = []
    for statement, name, target, cached in (
        ("import adk", "import", TARGETS["import"], True),
        ("import adk, prebuilt", "import_prebuilt", None, True),
        ("import adk", "import_nocache", None, False),
    ):
        m = measure_import(statement, repeat=repeat, bytecode_cache=cached)
        base = {
            "cpu_ms": round(m["cpu_ms"].median, 2),
            "rss_mib": round(m["rss_mib"].median, 1),
            "interpreter_rss_mib": round(m["rss_before_mib"].median, 1),
            "modules": m["modules"],
            "samples": repeat,
        }
        how = "fresh interpreter" if cached else "fresh interpreter, no bytecode cache"
        rows.append(_row(name, f"`{statement}` ({how})", m["wall_ms"], "ms", target, base))
        if name == "import":
            rss_target = TARGETS["import_rss"]
            rows.append(
                _row("import_rss", "RSS after `import adk`", m["rss_mib"], "MiB", rss_target, base)
            )
    return rows


def _text(row: dict[str, Any], key: str, digits: int = 1) -> str:
    if row.get(key) is None:
        return "–"
    return f"{row[key]:.{digits}f} ({row[key + '_min']:.{digits}f}–{row[key + '_max']:.{digits}f})"


def _verdict(row: dict[str, Any]) -> str:
    ok = row.get("ok")
    return "–" if ok is None else ("pass" if ok else "FAIL")


def _net(row: dict[str, Any]) -> str:
    net = row.get("ratio_net_of_asyncio")
    return "" if net is None else f"; {net:.3f}× net of asyncio's gather"


def _gc_cell(row: dict[str, Any]) -> str:
    concurrent = row.get("gc_per_1000_runs_concurrent")
    if concurrent is None:
        return "–"
    sequential = row.get("gc_per_1000_runs_sequential") or [0.0, 0.0, 0.0]
    return (
        "/".join(f"{x:.2f}" for x in concurrent)
        + " ("
        + "/".join(f"{x:.2f}" for x in sequential)
        + ")"
    )


def _instructions_cell(row: dict[str, Any], note: str | None) -> str:
    if "instructions_per_run" in row:
        text = f"{row['instructions_per_run'] / 1000:,.1f}"
        if "instructions_per_event" in row:
            text += f" ({row['instructions_per_event'] / 1000:.2f}k/event)"
        return text
    if "instructions_error" in row:
        return f"error: {row['instructions_error']}"[:60]
    return note if note and _countable(row["scenario"]) else "–"


def suite_table(
    rows: Sequence[dict[str, Any]], instructions: bool = False, note: str | None = None
) -> str:
    """The pyadk table: CPU and wall µs per run (median, min–max), peak RSS, figure vs target; for
    the gathers the GC's collections per 1,000 runs, and with ``instructions`` the callgrind
    counts (``note`` fills their cells when there are none, e.g. no valgrind)."""
    headers = ["scenario", "CPU µs/run", "wall µs/run", "peak RSS MiB"]
    if instructions:
        headers.append("k instr/run")
    headers += ["figure", "target", "ok", "GC/1k runs gen0/1/2: concurrent (sequential)"]
    lines = []
    for row in rows:
        digits = 3 if row["unit"].startswith("×") else 1
        figure = f"{row['value']:.{digits}f} ({row['value_min']:.{digits}f}–{row['value_max']:.{digits}f})"
        rss = row.get("peak_rss_mib")
        target = "–" if row["target"] is None else f"≤ {row['target']:g} {row['unit']}"
        line = [row["title"], _text(row, "cpu_us"), _text(row, "wall_us")]
        line.append("–" if rss is None else f"{rss:.1f}")
        if instructions:
            line.append(_instructions_cell(row, note))
        line += [f"{figure} {row['unit']}" + _net(row), target, _verdict(row), _gc_cell(row)]
        lines.append(line)
    return format_table(headers, lines)


# -- other modules' benchmarks ------------------------------------------------------------------------
def extra_modules() -> list[str]:
    """Benchmark modules other sessions keep in benchmarks/ (each exposes ``run() -> list[dict]``)."""
    names = []
    for path in sorted((REPO / "benchmarks").glob("*.py")):
        if path.stem not in NOT_EXTRAS and not path.stem.startswith("_"):
            names.append(path.stem)
    return names


OUR_PACKAGES = frozenset({"adk", "prebuilt", "benchmarks"})


def _extra_worker(module_name: str, out: str, quick: bool) -> None:
    """Child process: import ``benchmarks.<module_name>``, call ``run()``, write its rows."""
    try:
        module = importlib.import_module(f"benchmarks.{module_name}")
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in OUR_PACKAGES:
            raise  # our own code moved: a failure, not an optional dependency missing
        Path(out).write_text(json.dumps({"skipped": f"{type(exc).__name__}: {exc}"}))
        return
    run: Callable[..., Any] | None = getattr(module, "run", None)
    if run is None:
        Path(out).write_text(json.dumps({"skipped": "no run() function"}))
        return
    kwargs = {"quick": True} if quick and "quick" in inspect.signature(run).parameters else {}
    rows = run(**kwargs)
    Path(out).write_text(json.dumps({"rows": rows}, default=str))


def run_extra(name: str, quick: bool) -> dict[str, Any]:
    """Run one module's ``run()`` in a fresh process. A module that cannot be imported (an optional
    dependency missing) is ``skipped``; one that crashes or hangs is ``failed``, which fails the
    suite: a benchmark broken by a refactor must not pass as a skip."""
    out = RESULTS / f".extra-{name}-{os.getpid()}.json"  # two suites at once must not share it
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "benchmarks", "--extra-worker", name, str(out)]
    if quick:
        cmd.append("--quick")
    print(f"[extra] {name} ...", flush=True)
    try:
        proc = subprocess.run(
            cmd, cwd=REPO, capture_output=True, text=True, timeout=1800, check=False
        )
    except subprocess.TimeoutExpired:
        return {"failed": "timed out after 30 minutes"}
    if not out.exists():
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return {"failed": f"exit {proc.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(out.read_text())
    out.unlink()
    return result


def extras_table(extras: dict[str, dict[str, Any]]) -> str:
    lines = []
    for name, result in extras.items():
        if "skipped" in result or "failed" in result:
            reason = "skipped" if "skipped" in result else "FAILED"
            lines.append([name, f"{reason}: {result.get('skipped') or result['failed']}"[:160]])
            continue
        for row in result["rows"]:
            label = str(row.get("benchmark", name))
            figures = ", ".join(f"{k}={v}" for k, v in row.items() if k != "benchmark")
            lines.append([label, figures])
    return format_table(["benchmark", "figures"], lines)


# -- command line -------------------------------------------------------------------------------------
def _selected(only: str | None) -> tuple[list[str], list[str]]:
    """(pyadk scenarios, extra modules) chosen by ``--only``."""
    extras = extra_modules()
    if not only:
        scenarios: list[str] = []
        for name in SUITE:
            scenarios.extend(ALIASES.get(name, (name,)))
        return scenarios, extras
    chosen: list[str] = []
    chosen_extras: list[str] = []
    valid = [*SUITE, *TITLES, *extras]
    for name in (n.strip() for n in only.split(",") if n.strip()):
        if name in extras:
            chosen_extras.append(name)
        elif name in ALIASES:
            chosen.extend(ALIASES[name])
        elif name in SUITE or name in TITLES:
            chosen.append(name)
        else:
            sys.exit(f"unknown benchmark {name!r}; choose from {', '.join(valid)}")
    return chosen, chosen_extras


def _profile(name: str, args: argparse.Namespace) -> None:
    if name == "import":
        print("# python -X importtime -c 'import adk': top modules by cumulative time")
        rows = import_breakdown("import adk", top=args.top)
        print(
            format_table(
                ["self µs", "cumulative µs", "module"], [[str(a), str(b), c] for a, b, c in rows]
            )
        )
        return
    scenario = {"c": "c_b"}.get(name, name)
    cmd = [sys.executable, "-m", "benchmarks._harness", "worker", PYADK, scenario]
    cmd += ["--profile", str(args.seconds), "--top", str(args.top)]
    subprocess.run(cmd, cwd=REPO, check=True)


def _at_least_one(text: str) -> int:
    """An argparse type: an integer of at least 1 (no sample is no figure)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="few rounds, for smoke tests")
    parser.add_argument("--only", help="comma-separated benchmark names")
    parser.add_argument(
        "--rounds", type=int, help="rounds per process (default 7, quick 2; peers: per peer, 5)"
    )
    parser.add_argument(
        "--repeat", type=int, help="fresh processes per scenario (default 1; peers 2, quick 1)"
    )
    parser.add_argument(
        "--import-samples",
        type=_at_least_one,
        help="fresh interpreters timed per pyadk import row (default 11, quick 3)",
    )
    parser.add_argument("--peers", action="store_true", help="side by side with peer SDKs")
    parser.add_argument("--peer", action="append", help="with --peers: only this peer (repeatable)")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions per run (callgrind)"
    )
    parser.add_argument("--profile", metavar="NAME", help="profile a pyadk scenario instead")
    parser.add_argument("--seconds", type=float, default=3.0, help="with --profile: how long")
    parser.add_argument("--top", type=int, default=30, help="with --profile: how many functions")
    parser.add_argument("--output", type=Path, help="where to write the JSON results")
    parser.add_argument("--extra-worker", nargs=2, help=argparse.SUPPRESS)
    return parser


def _peers(args: argparse.Namespace) -> int:
    """The peers mode: every peer round is paired with the pyadk rounds around it, so 5 rounds
    per peer in each of 2 sets of fresh workers give 10 paired ratios (quick: 2 in 1)."""
    from .peers import run_peers, select

    try:
        select(args.only)
    except ValueError as exc:
        sys.exit(str(exc))
    return run_peers(
        args.peer,
        rounds=args.rounds or (2 if args.quick else 5),
        repeat=args.repeat or (1 if args.quick else 2),
        quick=args.quick,
        output=args.output or RESULTS / "peers-latest.json",
        only=args.only,
        instructions=args.instructions,
    )


def _measure_scenarios(
    scenarios: Sequence[str], args: argparse.Namespace, failures: list[str]
) -> tuple[list[dict[str, Any]], dict[str, WorkerResult]]:
    """Time every selected scenario (each in fresh processes); failures become messages."""
    rounds = args.rounds or (2 if args.quick else 7)
    round_s = 0.02 if args.quick else 0.1
    rows: list[dict[str, Any]] = []
    results: dict[str, WorkerResult] = {}
    if "import" in scenarios:
        print("[pyadk] import ...", flush=True)
        rows.extend(_import_rows(args.quick, args.import_samples))
    for scenario in (s for s in scenarios if s != "import"):
        print(f"[pyadk] {scenario} ...", flush=True)
        try:
            result = run_worker(
                PYADK, scenario, rounds=rounds, round_s=round_s, repeat=args.repeat or 1
            )
        except BenchmarkError as exc:
            failures.append(str(exc))
            print(exc, file=sys.stderr)
            continue
        results[scenario] = result
        rows.extend(_worker_rows(scenario, result))
    return rows, results


def _suite(args: argparse.Namespace, argv: Sequence[str] | None) -> int:
    """The pyadk suite: timings, then the other modules' benchmarks, then (with
    ``--instructions``) the callgrind counts, which never overlap a timing."""
    scenarios, extras = _selected(args.only)
    if args.quick and not args.only:
        extras = []  # a smoke run does not start other modules' servers
    started = time.time()
    machine = machine_info()
    failures: list[str] = []
    rows, results = _measure_scenarios(scenarios, args, failures)
    extra_results = {name: run_extra(name, args.quick) for name in extras}
    failures += [f"{name}: {r['failed']}" for name, r in extra_results.items() if "failed" in r]
    note = None
    if args.instructions:
        note = None if valgrind() else "n/a: valgrind not installed"
        for row in rows:
            # Import rows (import, import_rss, ...) have no worker result: nothing to count.
            result = results.get(row["scenario"])
            if note is None and result is not None and _countable(row["scenario"]):
                _add_instructions(row, result, args.quick)
        for name, extra in extra_results.items():
            if note is None and "rows" in extra:
                _count_extra(name, extra["rows"], args.quick)

    print()
    print(
        f"pyadk {machine['git_commit']} · {machine['cpu_model']} · {machine['nproc']} CPUs · "
        f"Python {machine['python']} · load {machine['load_avg']}"
    )
    if rows:
        print(suite_table(rows, args.instructions, note))
    if extra_results:
        print()
        print(extras_table(extra_results))
    output = args.output or RESULTS / "latest.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    machine["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    document = {
        "machine": machine,
        "command": ["python", "-m", "benchmarks", *(argv if argv is not None else sys.argv[1:])],
        "seconds": round(time.time() - started, 1),
        "rows": rows,
        "extras": extra_results,
        "failures": failures,
    }
    if args.instructions:
        document["instructions"] = {"note": note}
    output.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"\nresults: {output}")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.extra_worker:
        _extra_worker(args.extra_worker[0], args.extra_worker[1], args.quick)
        return 0
    if args.profile:
        _profile(args.profile, args)
        return 0
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.peers:
        return _peers(args)
    return _suite(args, argv)


if __name__ == "__main__":
    sys.exit(main())
