"""The measuring machinery, shared by the pyadk suite and the peer SDK scripts.

Standard library only: the peers mode runs this module with each peer's own interpreter, in a venv
where pyadk is not installed.

How a figure is made
--------------------
- Every scenario runs in a fresh subprocess (``python -m benchmarks._harness worker MODULE SCENARIO``)
  so one scenario's imports, caches and heap do not colour another's, and its peak RSS is its own.
- A workload module exposes ``async def build(scenario) -> dict[str, Variant]``: the agents are built
  once there; each variant is an ``async () -> None`` doing one complete run (and asserting its
  result). It may expose ``VERSIONS`` (dict) and ``EVENTS_PER_RUN`` (int).
- Warm-up first (at least 20 runs and 0.2 s), then the runs per round are calibrated so a round lasts
  about ``round_s`` seconds. Each round times K runs of each variant back to back, with the variants'
  order flipped every round so drift in machine load hits all of them alike.
- CPU time is ``time.process_time`` (all threads of the process, so SDKs that hop to worker threads pay
  for it); wall time is ``time.perf_counter``. Both are divided by K: µs per run.
- ``gather`` scenarios alternate G × K sequential runs with G ``asyncio.gather`` calls of K runs
  each (K = the concurrency, 1,000 by default; G gathers make a block of about three round
  lengths, at most 10) and report both, plus their ratio. A third arm measures asyncio's own share
  of the difference: the same gathers and sequential loop over a ``floor`` coroutine that does no
  work but awaits the event loop as the run does (the workload's ``floor`` variant, else a coroutine
  that returns at once), gathered minus sequential, per run. Each arm also records how many
  collections each generation of the cyclic GC made (``gc0``/``gc1``/``gc2``, from
  ``gc.get_stats()``: no callback, so no cost added to the arm).
- The garbage collector stays on (it is part of the real cost). Outside ``gather`` scenarios a
  ``gc.collect()`` between rounds keeps one round's garbage from being billed to the next. In
  ``gather`` scenarios it would be wrong: it resets the collector's generation counters, so no round
  would ever reach the full (oldest-generation) collections that a process serving batches of
  concurrent runs pays every few batches, and the concurrent figure would leave them out (for
  pyadk's (a) with a model that awaits once, about 6 µs per run). So those run without it, after
  a warm-up that lasts until the collector has made a full cycle (eleven middle-generation
  collections, or a full one) or thirty rounds' length has passed (3 s; no wait with the collector
  off); what one arm leaves to collect can land in the next one, at most about one collection per
  generation at each switch, which the blocks of G gathers dilute. (A run that leaves no garbage, like pyadk's sequential arm, triggers none.)
- Figures are the median of the rounds, with min–max beside them so noise is visible.
- ``python -m benchmarks._harness count MODULE SCENARIO VARIANT --runs N`` is the worker that
  ``benchmarks._callgrind`` runs under valgrind: no clock at all, a fixed warm-up and exactly N runs,
  so two processes with different N differ by those runs only.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import importlib
import json
import math
import os
import pstats
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "REPO",
    "Figure",
    "LiveWorker",
    "WorkerResult",
    "awaits_floor",
    "bench_env",
    "cache_dir",
    "format_table",
    "import_breakdown",
    "machine_info",
    "measure_import",
    "run_worker",
]

Variant = Callable[[], Awaitable[object]]
REPO = Path(__file__).resolve().parents[1]
RESULT_TAG = "BENCH-RESULT "
READY_TAG = "BENCH-READY "
ROUND_TAG = "BENCH-ROUND "


# -- statistics ---------------------------------------------------------------------------------
@dataclass
class Figure:
    """A median with the min and max of the samples it came from."""

    median: float
    low: float
    high: float
    samples: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Figure:
        if not values:
            raise ValueError("no samples")
        return cls(statistics.median(values), min(values), max(values), len(values))

    def scaled(self, factor: float) -> Figure:
        return Figure(self.median * factor, self.low * factor, self.high * factor, self.samples)

    def as_dict(self, unit: str) -> dict[str, float]:
        return {
            unit: round(self.median, 2),
            f"{unit}_min": round(self.low, 2),
            f"{unit}_max": round(self.high, 2),
        }

    def text(self, digits: int = 1) -> str:
        return f"{self.median:.{digits}f} ({self.low:.{digits}f}–{self.high:.{digits}f})"


# -- worker side (runs inside the measured process) ---------------------------------------------
def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def _timed(fn: Variant, runs: int) -> tuple[float, float]:
    """CPU and wall µs per run over ``runs`` sequential runs."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(runs):
        await fn()
    cpu1, wall1 = time.process_time(), time.perf_counter()
    return (cpu1 - cpu0) / runs * 1e6, (wall1 - wall0) / runs * 1e6


async def _timed_gather(fn: Variant, runs: int) -> tuple[float, float]:
    """CPU and wall µs per run for one ``asyncio.gather`` of ``runs`` concurrent runs."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(fn() for _ in range(runs)))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    return (cpu1 - cpu0) / runs * 1e6, (wall1 - wall0) / runs * 1e6


async def _timed_gathers(fn: Variant, runs: int, gathers: int) -> tuple[float, float]:
    """CPU and wall µs per run over ``gathers`` back-to-back gathers of ``runs`` concurrent runs."""
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(gathers):
        await asyncio.gather(*(fn() for _ in range(runs)))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    total = runs * gathers
    return (cpu1 - cpu0) / total * 1e6, (wall1 - wall0) / total * 1e6


async def _gather_share(floor: Variant, runs: int, gathers: int) -> tuple[float, float]:
    """asyncio's own per-run share of a gather: ``floor`` gathered minus ``floor`` awaited in turn.

    The run's sequential figure already pays for the floor's awaits (a fake model that yields once
    pays a loop iteration either way), so only the difference is asyncio's extra under gather: Task
    creation and scheduling, gather's callbacks and the collections its pending Tasks trigger."""
    seq_cpu, seq_wall = await _timed(floor, runs * gathers)
    gather_cpu, gather_wall = await _timed_gathers(floor, runs, gathers)
    return gather_cpu - seq_cpu, gather_wall - seq_wall


async def _gc_steady_state(fn: Variant, floor: Variant, runs: int, limit_s: float = 3.0) -> None:
    """Gather until the collector has gone through a full cycle under this load: eleven
    middle-generation collections (the point where CPython considers a full one) or a full one,
    or ``limit_s`` seconds (a slow peer, or a raised threshold). With the collector off there is
    no cycle to wait for: it returns at once (it waited out the whole limit)."""
    if not gc.isenabled():
        return
    start = time.perf_counter()
    first = _gc_collections()
    while True:
        await asyncio.gather(*(fn() for _ in range(runs)))
        await asyncio.gather(*(floor() for _ in range(runs)))
        now = _gc_collections()
        if now[1] - first[1] > 10 or now[2] > first[2] or time.perf_counter() - start > limit_s:
            return


def _gc_collections() -> list[int]:
    """Collections so far, per generation of the cyclic GC (free to read: no callback)."""
    return [generation["collections"] for generation in gc.get_stats()]


async def _nothing() -> None:
    return None


def awaits_floor(yields: int) -> Callable[[], Awaitable[None]]:
    """The ``floor`` variant of an in-flight workload: a coroutine doing the run's awaits of the
    event loop (one per model call) and nothing else, so that asyncio's share of a gather of such
    runs can be taken off (see ``_gather_share``). Shared by pyadk's and the peers' workloads."""

    async def floor() -> None:
        for _ in range(yields):
            await asyncio.sleep(0)

    return floor


async def _warm_up(variants: dict[str, Variant]) -> float:
    """Run each variant until it is warm; return the slowest variant's warm wall seconds per run
    (timed after the warm-up, so first-run costs such as lazy imports do not skew calibration)."""
    slowest = 0.0
    for fn in variants.values():
        start = time.perf_counter()
        runs = 0
        while runs < 20 or time.perf_counter() - start < 0.2:
            await fn()
            runs += 1
            if time.perf_counter() - start > 3.0 and runs >= 3:
                break  # a slow peer: enough warm-up
        start = time.perf_counter()
        runs = 0
        while runs < 3 or time.perf_counter() - start < 0.02:
            await fn()
            runs += 1
        slowest = max(slowest, (time.perf_counter() - start) / runs)
    return slowest


Arm = Callable[[], Awaitable[tuple[float, float]]]


@dataclass
class _Plan:
    """A scenario built, warm and calibrated: one timed call (arm) per variant, ready for rounds.

    Rounds are separate calls so that a served worker (``--serve``) can run them one at a time,
    when the parent asks, alternating with another SDK's worker."""

    arms: dict[str, Arm]
    runs: int
    gathers: int = 0
    events_per_run: int | None = None

    async def round(self, index: int) -> dict[str, dict[str, float]]:
        """One round: every arm once, in an order flipped every other round; the figures per arm
        (CPU and wall µs per run, and in gathers the GC's collections per generation)."""
        samples: dict[str, dict[str, float]] = {label: {} for label in self.arms}
        labels = list(self.arms)
        for label in labels if index % 2 == 0 else reversed(labels):
            if not self.gathers:
                gc.collect()  # in gathers it would be wrong: see "How a figure is made"
            before = _gc_collections()
            cpu, wall = await self.arms[label]()
            after = _gc_collections()
            samples[label].update(cpu=cpu, wall=wall)
            if self.gathers:
                for generation in range(3):
                    samples[label][f"gc{generation}"] = after[generation] - before[generation]
        return samples

    def header(self) -> dict[str, Any]:
        return {
            "runs_per_round": self.runs,
            "gathers_per_round": self.gathers,
            "events_per_run": self.events_per_run,
        }


async def _prepare(module: Any, scenario: str, round_s: float, concurrency: int) -> _Plan:
    """Build ``scenario``, warm it up and calibrate its rounds (see "How a figure is made")."""
    gather_mode = scenario.startswith("c_")
    variants: dict[str, Variant] = await module.build(scenario[2:] if gather_mode else scenario)
    per_run = await _warm_up(variants)
    if not gather_mode:
        runs = max(3, min(20_000, int(round_s / max(per_run, 1e-7))))
        events = getattr(module, "EVENTS_PER_RUN", None) if scenario == "events" else None
        arms = {name: _sequential_arm(fn, runs) for name, fn in variants.items()}
        return _Plan(arms, runs, events_per_run=events)
    fn = variants["run"]
    floor = variants.get("floor", _nothing)
    runs = concurrency
    start = time.perf_counter()
    await _timed_gather(fn, runs)  # warm the concurrent path (task and frame free lists)
    gathers = max(1, min(10, math.ceil(3 * round_s / (time.perf_counter() - start))))
    # The limit is thirty rounds' length: 3 s at the default 0.1 s, 0.6 s for a quick run's 0.02 s
    # (two rounds whose figures nothing compares need no more; a raised threshold waited 3 s).
    await _gc_steady_state(fn, floor, runs, limit_s=30 * round_s)
    # "asyncio" is asyncio's own share, paid by every SDK alike (see the module docstring).
    arms: dict[str, Arm] = {
        "sequential": _sequential_arm(fn, runs * gathers),
        "concurrent": lambda: _timed_gathers(fn, runs, gathers),
        "asyncio": lambda: _gather_share(floor, runs, gathers),
    }
    return _Plan(arms, runs, gathers)


def _sequential_arm(fn: Variant, runs: int) -> Arm:
    return lambda: _timed(fn, runs)


async def _measure(
    module: Any, scenario: str, rounds: int, round_s: float, concurrency: int
) -> dict[str, Any]:
    """All rounds of a one-shot worker, as series per arm (``{"cpu": [...], "wall": [...]}``)."""
    plan = await _prepare(module, scenario, round_s, concurrency)
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in plan.arms}
    for index in range(rounds):
        for label, figures in (await plan.round(index)).items():
            for key, value in figures.items():
                samples[label].setdefault(key, []).append(value)
    return {"variants": samples, "rounds": rounds, **plan.header()}


async def _serve(module: Any, scenario: str, round_s: float, concurrency: int) -> dict[str, Any]:
    """A served worker: prepare, say so (``READY_TAG``), then run one round per ``round`` line
    read from stdin and answer each with ``ROUND_TAG`` + its figures, until ``done``.

    The process sleeps in a blocking read between rounds, so it costs the machine nothing while
    another SDK's worker measures; the parent alternates the workers' rounds (peers mode)."""
    plan = await _prepare(module, scenario, round_s, concurrency)
    print(READY_TAG + json.dumps(plan.header()), flush=True)
    index = 0
    while sys.stdin.readline().strip() == "round":
        print(ROUND_TAG + json.dumps(await plan.round(index)), flush=True)
        index += 1
    return {"variants": {}, "rounds": index, **plan.header()}


async def _profile(module: Any, scenario: str, seconds: float, top: int) -> None:
    """Print cProfile's top functions (cumulative and self time) for a warm scenario."""
    gather_mode = scenario.startswith("c_")
    variants = await module.build(scenario[2:] if gather_mode else scenario)
    name = "run" if "run" in variants else next(iter(variants))
    fn = variants[name]
    per_run = await _warm_up({name: fn})
    profiler = cProfile.Profile()
    if gather_mode:
        profiler.enable()
        for _ in range(max(1, int(seconds / (per_run * 1000)))):
            await asyncio.gather(*(fn() for _ in range(1000)))
        profiler.disable()
        print(f"# gathers of 1,000 concurrent runs of {scenario[2:]}/{name}")
    else:
        runs = max(10, int(seconds / max(per_run, 1e-7)))
        profiler.enable()
        for _ in range(runs):
            await fn()
        profiler.disable()
        print(f"# {runs} runs of {scenario}/{name}")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.strip_dirs()
    print("\n## by cumulative time")
    stats.sort_stats("cumulative").print_stats(top)
    print("\n## by self time")
    stats.sort_stats("tottime").print_stats(top)


async def _count(module: Any, scenario: str, variant: str, runs: int, warmup: int) -> None:
    """Build ``scenario``, warm ``variant`` up for ``warmup`` runs, then do ``runs`` more runs.

    Deterministic on purpose (no clock, no calibration): callgrind counts the whole process, and
    only the number of runs may differ between the two processes whose counts are subtracted."""
    fn = (await module.build(scenario))[variant]
    for _ in range(warmup + runs):
        await fn()


def _count_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks._harness count")
    parser.add_argument("module")
    parser.add_argument("scenario")
    parser.add_argument("variant")
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    module = importlib.import_module(args.module)
    asyncio.run(_count(module, args.scenario, args.variant, args.runs, args.warmup))


def _worker_main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="benchmarks._harness worker")
    parser.add_argument("module")
    parser.add_argument("scenario")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-s", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--profile", type=float, default=0.0, help="profile for this many seconds")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--serve", action="store_true", help="rounds on request, from stdin")
    args = parser.parse_args(argv)
    module = importlib.import_module(args.module)
    if args.profile:
        asyncio.run(_profile(module, args.scenario, args.profile, args.top))
        return
    try:
        if args.serve:
            result = asyncio.run(_serve(module, args.scenario, args.round_s, args.concurrency))
        else:
            result = asyncio.run(
                _measure(module, args.scenario, args.rounds, args.round_s, args.concurrency)
            )
    except NotImplementedError as exc:
        result = {"unsupported": str(exc) or "not supported"}
    result["peak_rss_mib"] = round(_peak_rss_mib(), 1)
    result["versions"] = dict(getattr(module, "VERSIONS", {}))
    result["python"] = sys.version.split()[0]
    print(RESULT_TAG + json.dumps(result), flush=True)


# -- parent side --------------------------------------------------------------------------------
def cache_dir() -> Path:
    """Where the peer venvs and bytecode caches live: ``$PYADK_BENCH_CACHE`` or
    ``~/.cache/pyadk-bench``."""
    override = os.environ.get("PYADK_BENCH_CACHE")
    return Path(override).expanduser() if override else Path.home() / ".cache" / "pyadk-bench"


def bench_env(bytecode_cache: bool = True) -> dict[str, str]:
    """The environment of measured processes: the repository importable, a fixed hash seed, and
    bytecode caches on, kept under the cache directory (``PYTHONPYCACHEPREFIX``) so the work tree
    stays clean. Without caches (``PYTHONDONTWRITEBYTECODE=1``, set in some shells and CI
    images) every fresh process would recompile pyadk and import figures would measure the
    compiler."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONHASHSEED", "0")
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir() / "pycache")
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@dataclass
class WorkerResult:
    """Rounds of one scenario pooled over one or more worker processes."""

    variants: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    peak_rss_mib: list[float] = field(default_factory=list)
    runs_per_round: int = 0
    events_per_run: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    unsupported: str | None = None

    def cpu(self, variant: str) -> Figure:
        return Figure.of(self.variants[variant]["cpu"])

    def wall(self, variant: str) -> Figure:
        return Figure.of(self.variants[variant]["wall"])

    def paired(self, variant: str, base: str, op: Callable[[float, float], float]) -> Figure:
        """``op(variant, base)`` per round (the two ran back to back), e.g. a ratio or difference."""
        a, b = self.variants[variant]["cpu"], self.variants[base]["cpu"]
        return Figure.of([op(x, y) for x, y in zip(a, b, strict=True)])

    def concurrency_ratios(self) -> tuple[Figure, Figure]:
        """A gather scenario's concurrent cost over its sequential one per round, raw and net of
        asyncio's own share (the ``asyncio`` arm: what a gather of do-nothing coroutines costs
        over awaiting them in turn), as Figures over the rounds."""
        v = self.variants
        concurrent, sequential, share = (
            v[arm]["cpu"] for arm in ("concurrent", "sequential", "asyncio")
        )
        raw = [c / s for c, s in zip(concurrent, sequential, strict=True)]
        net = [(c - a) / s for c, s, a in zip(concurrent, sequential, share, strict=True)]
        return Figure.of(raw), Figure.of(net)

    def merge(self, other: WorkerResult) -> None:
        """Pool ``other``'s rounds into this result (several processes of one scenario)."""
        self.versions = other.versions or self.versions
        self.unsupported = other.unsupported or self.unsupported
        self.peak_rss_mib.extend(other.peak_rss_mib)
        self.runs_per_round = other.runs_per_round or self.runs_per_round
        self.events_per_run = other.events_per_run or self.events_per_run
        for name, series in other.variants.items():
            slot = self.variants.setdefault(name, {"cpu": [], "wall": []})
            for key, values in series.items():  # cpu, wall and any counters (gc0, gc1, gc2)
                slot.setdefault(key, []).extend(values)

    def gc_per_1000(self, variant: str) -> list[float] | None:
        """Collections per 1,000 runs for each GC generation (gen0, gen1, gen2), over all rounds.

        A mean, not a median: a full collection lands in one round of several, and its rate is what
        a long-running process pays."""
        series = self.variants.get(variant, {})
        if "gc0_per_1k" not in series:
            return None
        return [statistics.fmean(series[f"gc{g}_per_1k"]) for g in range(3)]

    def base_row(self, variant: str) -> dict[str, Any]:
        """The figures every JSON row carries: CPU and wall µs per run, peak RSS, sampling."""
        row: dict[str, Any] = {}
        row.update(self.cpu(variant).as_dict("cpu_us"))
        row.update(self.wall(variant).as_dict("wall_us"))
        row["peak_rss_mib"] = max(self.peak_rss_mib) if self.peak_rss_mib else None
        row["rounds"] = len(self.variants[variant]["cpu"])
        row["cpu_us_samples"] = [round(x, 2) for x in self.variants[variant]["cpu"]]
        row["runs_per_round"] = self.runs_per_round
        row["versions"] = self.versions
        return row


class BenchmarkError(RuntimeError):
    """A worker process failed; the message carries the end of its output."""


def run_worker(
    module: str,
    scenario: str,
    *,
    python: str = sys.executable,
    rounds: int = 7,
    round_s: float = 0.1,
    concurrency: int = 1000,
    repeat: int = 1,
    timeout: float = 900.0,
) -> WorkerResult:
    """Run ``scenario`` of ``module`` in ``repeat`` fresh processes and pool their rounds."""
    pooled = WorkerResult()
    env = bench_env()
    for _ in range(repeat):
        cmd = [python, "-m", "benchmarks._harness", "worker", module, scenario]
        cmd += ["--rounds", str(rounds), "--round-s", str(round_s)]
        cmd += ["--concurrency", str(concurrency)]
        proc = subprocess.run(
            cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(RESULT_TAG)]
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
            raise BenchmarkError(
                f"{module} {scenario} failed (exit {proc.returncode}):\n" + "\n".join(tail)
            )
        data = json.loads(lines[-1][len(RESULT_TAG) :])
        if "unsupported" in data:
            return WorkerResult(versions=data.get("versions", {}), unsupported=data["unsupported"])
        _add_gc_rates(data["variants"], data["runs_per_round"] * data["gathers_per_round"])
        pooled.merge(
            WorkerResult(
                variants=data["variants"],
                peak_rss_mib=[data["peak_rss_mib"]],
                runs_per_round=data["runs_per_round"],
                events_per_run=data.get("events_per_run"),
                versions=data.get("versions", {}),
            )
        )
    return pooled


def _add_gc_rates(variants: dict[str, dict[str, list[float]]], runs: int) -> None:
    """Add collections per 1,000 runs (``gcN_per_1k``) to gather arms' collections per round:
    processes calibrate their own gathers per round, so only rates pool. ``runs`` is the runs of
    one arm in one round (concurrency × gathers)."""
    if not runs:
        return
    for series in variants.values():
        for generation in range(3):
            counts = series.get(f"gc{generation}")
            if counts is not None:
                series[f"gc{generation}_per_1k"] = [c * 1000 / runs for c in counts]


class _Lines:
    """Lines from a worker's stdout, with a deadline: a hung worker fails the run, not freezes it.

    Reads the pipe's file descriptor directly (``select`` then ``os.read``): a buffered reader
    could hold a line that ``select`` no longer sees."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    def next(self, deadline: float) -> str | None:
        """The next line, or None once the worker has closed its stdout."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if not select.select([self._fd], [], [], left)[0]:
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                line, self._buffer = self._buffer, b""
                return line.decode(errors="replace") if line else None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")


class LiveWorker:
    """A served worker (``worker --serve``), started once and then asked for one round at a time.

    Why: this machine alternates between two speeds every few seconds, so figures from processes
    run one after the other can come from different speeds. Keeping every SDK's worker alive and
    alternating their rounds (0.1 s each) puts a peer's round within a fraction of a second of
    pyadk's rounds on either side; the idle workers wait in a blocking read, costing nothing."""

    def __init__(
        self,
        module: str,
        scenario: str,
        *,
        python: str = sys.executable,
        round_s: float = 0.1,
        concurrency: int = 1000,
        timeout: float = 900.0,
    ) -> None:
        self.label = f"{module} {scenario}"
        self.result = WorkerResult()
        self._timeout = timeout
        self._runs = 0  # runs of one arm in one round, for the GC rates
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        cmd = [python, "-m", "benchmarks._harness", "worker", module, scenario, "--serve"]
        cmd += ["--round-s", str(round_s), "--concurrency", str(concurrency)]
        self._proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=bench_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self._proc.stdout is not None
        self._lines = _Lines(self._proc.stdout.fileno())

    def start(self) -> WorkerResult:
        """Wait until the worker is built, warm and calibrated. The result has ``unsupported`` set
        (and the process is gone) when the SDK does not have the scenario."""
        tag, data = self._expect(READY_TAG, RESULT_TAG)
        if tag == RESULT_TAG:
            self.result.unsupported = data.get("unsupported", "not supported")
            self.result.versions = data.get("versions", {})
            self.close()
            return self.result
        self.result.runs_per_round = data["runs_per_round"]
        self.result.events_per_run = data.get("events_per_run")
        self._runs = data["runs_per_round"] * data.get("gathers_per_round", 0)
        return self.result

    def round(self) -> dict[str, dict[str, float]]:
        """One round (every arm once); also pooled into ``result``."""
        self._send("round")
        _, samples = self._expect(ROUND_TAG)
        series = {label: {k: [v] for k, v in arm.items()} for label, arm in samples.items()}
        _add_gc_rates(series, self._runs)
        self.result.merge(WorkerResult(variants=series))
        return samples

    def finish(self) -> WorkerResult:
        """End the worker; ``result`` with its peak RSS and versions."""
        self._send("done")
        _, data = self._expect(RESULT_TAG)
        self.result.peak_rss_mib.append(data["peak_rss_mib"])
        self.result.versions = data.get("versions", {})
        self.close()
        return self.result

    def close(self) -> None:
        """Kill the worker if it still runs (after a failure) and release its pipes."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()

    def _send(self, command: str) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(command.encode() + b"\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            raise self._failure() from None

    def _expect(self, *tags: str) -> tuple[str, dict[str, Any]]:
        """The next line carrying one of ``tags`` (other output is the SDK's own, ignored)."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                line = self._lines.next(deadline)
            except TimeoutError:
                self.close()
                raise BenchmarkError(
                    f"{self.label} timed out after {self._timeout:.0f} s"
                ) from None
            if line is None:
                raise self._failure()
            for tag in tags:
                if line.startswith(tag):
                    data: dict[str, Any] = json.loads(line[len(tag) :])
                    return tag, data

    def _failure(self) -> BenchmarkError:
        code = self._proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().decode(errors="replace").strip().splitlines()[-15:]
        self.close()
        return BenchmarkError(f"{self.label} failed (exit {code}):\n" + "\n".join(tail))


_IMPORT_PROBE = """
import json, resource, sys, time
def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
before = rss()
cpu0, wall0 = time.process_time(), time.perf_counter()
exec(sys.argv[1])
cpu1, wall1 = time.process_time(), time.perf_counter()
print(json.dumps({"wall_ms": (wall1 - wall0) * 1e3, "cpu_ms": (cpu1 - cpu0) * 1e3,
                  "rss_mib": rss(), "rss_before_mib": before,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "modules": len(sys.modules)}))
"""


def measure_import(
    statement: str, *, python: str = sys.executable, repeat: int = 7, bytecode_cache: bool = True
) -> dict[str, Any]:
    """Time ``statement`` (e.g. ``import adk``) in ``repeat`` fresh interpreters (after one untimed
    run that writes the bytecode caches); RSS is the process's resident size right after it.

    ``bytecode_cache=False`` measures what an environment with ``PYTHONDONTWRITEBYTECODE=1`` pays:
    the repository's own modules are compiled on every import (installed packages keep the caches
    pip wrote for them)."""
    env = bench_env(bytecode_cache)
    samples: list[dict[str, float]] = []
    for i in range(repeat + 1):
        proc = subprocess.run(
            [python, "-c", _IMPORT_PROBE, statement],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-10:]
            raise BenchmarkError(f"{statement!r} failed:\n" + "\n".join(tail))
        if i:
            samples.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {
        "wall_ms": Figure.of([s["wall_ms"] for s in samples]),
        "cpu_ms": Figure.of([s["cpu_ms"] for s in samples]),
        "rss_mib": Figure.of([s["rss_mib"] for s in samples]),
        "rss_before_mib": Figure.of([s["rss_before_mib"] for s in samples]),
        "modules": int(statistics.median(s["modules"] for s in samples)),
    }


def import_breakdown(
    statement: str, *, python: str = sys.executable, top: int = 15
) -> list[tuple[int, int, str]]:
    """``python -X importtime``: the ``top`` modules by cumulative µs as (self, cumulative, name)."""
    proc = subprocess.run(
        [python, "-X", "importtime", "-c", statement],
        cwd=REPO,
        env=bench_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    rows: list[tuple[int, int, str]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        self_us, cumulative, name = line[len("import time:") :].split("|")
        rows.append((int(self_us), int(cumulative), name.rstrip()))
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


def machine_info() -> dict[str, Any]:
    """What the figures were measured on: CPU model and count, Python, load, kernel, commit."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cpu_model": model,
        "nproc": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": sys.platform,
        "kernel": os.uname().release,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "git_commit": commit,
        "time": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


# -- tables -------------------------------------------------------------------------------------
def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A pipe table: aligned for the terminal and valid Markdown for docs/performance.md."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(row) for row in rows)
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        _worker_main(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "count":
        _count_main(sys.argv[2:])
    else:
        sys.exit(
            "usage: python -m benchmarks._harness worker MODULE SCENARIO [options]\n"
            "       python -m benchmarks._harness count MODULE SCENARIO VARIANT --runs N"
        )
