"""Instructions per run, counted with valgrind's callgrind: a figure the machine's speed cannot move.

This machine alternates between two speeds (±1.5×) every few seconds, so microseconds from two
runs an hour apart disagree; the number of CPU instructions a run executes does not. Callgrind
counts every instruction of a process, start-up and imports included, so each count is taken as a
difference: the count worker (``python -m benchmarks._harness count``) does a fixed warm-up and
then N runs, and two processes with N1 and N2 runs differ by exactly N2 − N1 runs:
``(c2 − c1) / (N2 − N1)`` is the cost of one warm run, with interpreter start-up, imports, building
the agents and the warm-up cancelled out.

Reproducible to about a thousand instructions per run: ``PYTHONHASHSEED=0`` fixes string hashes
(and with them the layout of every dict and set; counts otherwise vary by a few thousand), the
worker reads no clock, and the bytecode caches are written by a native run before counting.
That reproduces one tree's count, not a comparison's: a change of code lays dicts and sets out
anew, which moves a workload of many string-keyed lookups by a few per cent, so such rows are
counted under several seeds (:func:`over_seeds`) and given as a median with its min–max.
Callgrind runs a program ~50× slower, so the run counts are sized from the native CPU figure
(:func:`runs_for`), and the two processes of a count run side by side (counts do not depend on
what else the machine does).

Standard library only, like ``benchmarks._harness``.
"""

from __future__ import annotations

import functools
import re
import shutil
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._harness import REPO, BenchmarkError, bench_env

__all__ = [
    "InstructionCount",
    "SeededCount",
    "count_instructions",
    "over_seeds",
    "parse_collected",
    "per_run",
    "real_interpreter",
    "runs_for",
    "valgrind",
]

_COLLECTED = re.compile(r"^==\d+== Collected\s*:\s*(\d+)\s*$", re.MULTILINE)
# Differences of 1, 2 or 5 × 10^k runs: run counts that do not wobble with the measured speed.
_LADDER = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000)


@dataclass(frozen=True)
class InstructionCount:
    """Instructions per warm run, from two callgrind processes of ``runs[0]`` and ``runs[1]`` runs."""

    per_run: float
    runs: tuple[int, int]
    collected: tuple[int, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "instructions_per_run": round(self.per_run),
            "instructions_runs": list(self.runs),
            "instructions_collected": list(self.collected),
        }


@dataclass(frozen=True)
class SeededCount:
    """Instructions per warm run counted once per hash seed: the median and the spread.

    One seed fixes the layout of every dict and set, so a count reproduces; but a change of code
    moves that layout too, and for a workload of dict lookups by string key (the OpenAI SDK's
    models, pydantic's) the same code counts up to ~3 % apart under two seeds. A difference
    between two trees smaller than this spread is not one of their code."""

    by_seed: dict[int, float]
    runs: tuple[int, int]

    @property
    def median(self) -> float:
        return statistics.median(self.by_seed.values())

    def as_dict(self, per: int = 1, unit: str = "run") -> dict[str, Any]:
        """``instructions_per_<unit>`` (the median over seeds, a run's count divided by ``per``,
        the units a run does), its ``_min`` and ``_max``, and every seed's count."""
        values = [v / per for v in self.by_seed.values()]
        key = f"instructions_per_{unit}"
        return {
            key: round(statistics.median(values)),
            f"{key}_min": round(min(values)),
            f"{key}_max": round(max(values)),
            "instructions_seeds": {str(k): round(v / per) for k, v in self.by_seed.items()},
            "instructions_runs": list(self.runs),
        }


def over_seeds(
    module: str,
    scenario: str,
    variant: str = "run",
    *,
    python: str,
    runs: tuple[int, int],
    seeds: Sequence[int],
    timeout: float = 1800.0,
) -> SeededCount:
    """:func:`count_instructions` once per hash seed in ``seeds``."""
    if not seeds:
        raise ValueError("no hash seeds to count with")
    found = {}
    for seed in seeds:
        count = count_instructions(
            module, scenario, variant, python=python, runs=runs, timeout=timeout, seed=seed
        )
        found[seed] = count.per_run
    return SeededCount(found, runs)


def valgrind() -> str | None:
    """valgrind's path, or None when it is not installed (the counts are then skipped)."""
    return shutil.which("valgrind")


def parse_collected(stderr: str) -> int:
    """The total of callgrind's ``==PID== Collected : N`` line (instructions executed)."""
    found = _COLLECTED.findall(stderr)
    if not found:
        tail = " | ".join(stderr.strip().splitlines()[-5:])
        raise ValueError(f"no 'Collected :' line in callgrind's output: {tail}")
    return int(found[-1])


def per_run(counts: tuple[int, int], runs: tuple[int, int]) -> float:
    """Instructions per run from two processes that differ only by their number of runs."""
    (c1, c2), (n1, n2) = counts, runs
    if n2 <= n1:
        raise ValueError(f"the second process must do more runs ({n1} vs {n2})")
    return (c2 - c1) / (n2 - n1)


def runs_for(cpu_us: float, quick: bool = False) -> tuple[int, int]:
    """(N1, N2) for a run costing ``cpu_us`` natively: the counted difference covers ~40 ms of
    native CPU (~8 ms with ``quick``), rounded down to 1, 2 or 5 × 10^k runs, at least 10.

    Why that size: start-up under callgrind already costs ~10 s for pyadk and more for the peers,
    so a difference worth ~2 s of callgrind keeps the whole count start-up bound, while it still
    averages over hundreds of runs (the cyclic GC's collections included) for a fast workload.
    """
    budget_us = 8_000 if quick else 40_000
    wanted = budget_us / max(cpu_us, 1e-3)
    diff = max([n for n in _LADDER if n <= wanted], default=_LADDER[0])
    first = diff // 2
    return first, first + diff


@functools.cache
def real_interpreter(python: str) -> str:
    """The interpreter binary itself, for valgrind: ``sys.executable`` of this process may be a
    launcher script (a pyenv shim), under which callgrind would count the shell, not Python.

    Asking the interpreter for its own ``sys.executable`` gets past launchers while keeping a
    venv's ``bin/python`` (resolving symlinks with ``realpath`` would leave the venv)."""
    proc = subprocess.run(
        [python, "-c", "import sys; print(sys.executable)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    binary = proc.stdout.strip()
    with open(binary, "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise BenchmarkError(f"{binary} (from {python}) is not an executable binary")
    return binary


def _count_cmd(python: str, module: str, scenario: str, variant: str, runs: int) -> list[str]:
    return [
        python,
        "-m",
        "benchmarks._harness",
        "count",
        module,
        scenario,
        variant,
        "--runs",
        str(runs),
    ]


def count_instructions(
    module: str,
    scenario: str,
    variant: str = "run",
    *,
    python: str,
    runs: tuple[int, int],
    timeout: float = 1800.0,
    seed: int = 0,
) -> InstructionCount:
    """Instructions per warm run of ``variant`` of ``scenario`` (see the module docstring), with
    ``PYTHONHASHSEED=seed`` (the same in both processes: a difference is only that of one seed's
    layout; :func:`over_seeds` makes a figure of several)."""
    tool = valgrind()
    if tool is None:
        raise BenchmarkError("valgrind is not installed")
    binary = real_interpreter(python)
    env = bench_env()
    env["PYTHONHASHSEED"] = str(seed)
    # A native run first: it writes the bytecode caches (so neither counted process compiles)
    # and fails fast, with a readable error, if the workload does.
    native = subprocess.run(
        _count_cmd(binary, module, scenario, variant, 1),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if native.returncode != 0:
        tail = "\n".join(native.stderr.strip().splitlines()[-10:])
        raise BenchmarkError(f"{module} {scenario}/{variant} failed:\n{tail}")
    prefix = [tool, "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    procs = [
        subprocess.Popen(
            prefix + _count_cmd(binary, module, scenario, variant, n),
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in runs
    ]
    try:
        outputs = [_finish(proc, timeout) for proc in procs]
    finally:
        for proc in procs:  # the other one, when one failed
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    counts = (parse_collected(outputs[0]), parse_collected(outputs[1]))
    return InstructionCount(per_run(counts, runs), runs, counts)


def _finish(proc: subprocess.Popen[str], timeout: float) -> str:
    """Wait for one callgrind process; its stderr, or an error carrying the end of it."""
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise BenchmarkError(f"callgrind timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = "\n".join(stderr.strip().splitlines()[-10:])
        raise BenchmarkError(f"callgrind run failed (exit {proc.returncode}):\n{tail}")
    return stderr
