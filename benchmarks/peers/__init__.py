"""Peers mode: the same workloads in google-adk, openai-agents, pydantic-ai and langgraph.

Each peer gets its own virtual environment under a cache directory (``PYADK_BENCH_CACHE``, default
``~/.cache/pyadk-bench``) with PINNED versions, so figures from different days compare the same code
and no peer's dependencies leak into pyadk's environment or another peer's. A venv is (re)built only
when its pins change (a ``.pins`` file records what it holds). The peer scripts (one per SDK, next
to this file) import nothing from pyadk: only ``benchmarks._harness``, which is standard library.

Not part of CI: building the environments downloads a few hundred MB from PyPI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._callgrind import count_instructions, runs_for, valgrind
from .._harness import (
    BenchmarkError,
    LiveWorker,
    WorkerResult,
    cache_dir,
    machine_info,
    measure_import,
)
from .._pairing import Sample, interleaved, paired_ratios
from ._report import Key, peers_tables, round_figures, row_label, scenario_rows, summarise

__all__ = ["PEERS", "Peer", "cache_dir", "ensure_env", "peers_tables", "run_peers", "select"]

PYADK_MODULE = "benchmarks.pyadk_workloads"
PYADK_IMPORTS = (
    "from adk import Runner, SequentialAgent, BaseAgent, tool; from prebuilt import ReActAgent"
)
SCENARIOS = ("a", "b", "c_a", "c_b", "c_a.inflight", "c_b.inflight", "d")
ALIASES = {"c": ("c_a", "c_b", "c_a.inflight", "c_b.inflight")}
# Instruction counts: not the gather scenarios (1,000 runs per gather is too long under callgrind).
COUNTED = ("a", "b", "d")


@dataclass(frozen=True)
class Peer:
    """One peer SDK: the pinned requirements of its venv and the script holding its workloads."""

    name: str
    pins: tuple[str, ...]
    module: str  # benchmarks.peers.<script>, run with the venv's interpreter
    imports: str  # the imports the workloads need (timed in a fresh interpreter)


# Versions looked up with `pip index versions NAME`; bump deliberately, then re-run the peers mode.
PEERS: dict[str, Peer] = {
    "google-adk": Peer(
        "google-adk",
        ("google-adk==2.13.0",),
        "benchmarks.peers.google_adk",
        "from google.adk.agents import LlmAgent, SequentialAgent, BaseAgent; "
        "from google.adk.runners import Runner; "
        "from google.adk.sessions import InMemorySessionService; "
        "from google.adk.models.base_llm import BaseLlm",
    ),
    "openai-agents": Peer(
        "openai-agents",
        ("openai-agents==0.24.0",),
        "benchmarks.peers.openai_agents",
        "from agents import Agent, Runner, Model, function_tool",
    ),
    "pydantic-ai": Peer(
        "pydantic-ai",
        ("pydantic-ai-slim==2.68.0",),
        "benchmarks.peers.pydantic_ai",
        "from pydantic_ai import Agent; from pydantic_ai.models.function import FunctionModel; "
        "from pydantic_graph import GraphBuilder",
    ),
    "langgraph": Peer(
        "langgraph",
        # langchain-core >= 1.7.3 needs certifi >= 2026.10.19, which the registry here lacks.
        ("langgraph==1.2.22", "langchain-core==1.7.2", "langchain==1.4.7"),
        "benchmarks.peers.langgraph",
        "from langchain.agents import create_agent; "
        "from langchain_core.language_models import BaseChatModel; "
        "from langgraph.graph import StateGraph",
    ),
}


def python_of(env: Path) -> Path:
    return env / "bin" / "python"


def ensure_env(peer: Peer, log: bool = True) -> Path:
    """The interpreter of ``peer``'s venv, creating it and installing the pins when needed."""
    env = cache_dir() / f"{peer.name}-py{sys.version_info[0]}{sys.version_info[1]}"
    marker = env / ".pins"
    wanted = "\n".join(peer.pins)
    if marker.exists() and marker.read_text() == wanted and python_of(env).exists():
        return python_of(env)
    if log:
        print(
            f"[peers] creating {env} with {' '.join(peer.pins)} (downloads from PyPI)", flush=True
        )
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    pip = [str(python_of(env)), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", *peer.pins], check=True)
    marker.write_text(wanted)
    return python_of(env)


# -- the peers run ----------------------------------------------------------------------------------
def select(only: str | None) -> tuple[list[str], bool]:
    """The scenarios ``--only`` names in peers mode (``a``, ``b``, ``c_a``, ``c_b``,
    ``c_a.inflight``, ``c_b.inflight``, ``d``; ``c`` is the four gathers) and whether to time the
    imports (``import``; always without --only)."""
    if not only:
        return list(SCENARIOS), True
    chosen: set[str] = set()
    imports = False
    for name in (n.strip() for n in only.split(",") if n.strip()):
        if name == "import":
            imports = True
        elif name in ALIASES or name in SCENARIOS:
            chosen.update(ALIASES.get(name, (name,)))
        else:
            valid = ", ".join(["import", *ALIASES, *SCENARIOS])
            raise ValueError(f"unknown peers benchmark {name!r}; choose from {valid}")
    return [s for s in SCENARIOS if s in chosen], imports


@dataclass
class _Run:
    """What a peers run has gathered: results pooled per SDK and scenario, errors, and for each
    scenario and repeat its rounds in run order (the input of the pairing)."""

    results: dict[Key, WorkerResult] = field(default_factory=dict)
    errors: dict[Key, str] = field(default_factory=dict)
    timelines: dict[str, list[list[Sample]]] = field(default_factory=dict)

    def unsupported(self, sdk: str, scenario: str) -> bool:
        """A peer without this scenario (openai-agents has no workflow) is not started again."""
        result = self.results.get((sdk, scenario))
        return result is not None and result.unsupported is not None

    def fail(self, sdk: str, scenario: str, exc: BenchmarkError) -> None:
        self.errors[(sdk, scenario)] = str(exc).splitlines()[-1]
        print(exc, file=sys.stderr)

    def pool(self, sdk: str, scenario: str, result: WorkerResult) -> None:
        self.results.setdefault((sdk, scenario), WorkerResult()).merge(result)

    def ratios(self, scenario: str) -> dict[str, list[float]]:
        """Every row's paired ratios to pyadk, over all repeats of ``scenario``."""
        pooled: dict[str, list[float]] = {}
        for timeline in self.timelines.get(scenario, []):
            for label, values in paired_ratios(timeline).items():
                pooled.setdefault(label, []).extend(values)
        return pooled


def _start(
    run: _Run, sdks: list[str], scenario: str, where: dict[str, tuple[str, str]], round_s: float
) -> dict[str, LiveWorker]:
    """Fresh workers of ``scenario`` for ``sdks``, started one after the other (each imports,
    builds and warms up alone); those that fail or lack the scenario are left out."""
    live: dict[str, LiveWorker] = {}
    for sdk in sdks:
        print(f"[peers] {sdk} {scenario}: starting ...", flush=True)
        python, module = where[sdk]
        worker = LiveWorker(module, scenario, python=python, round_s=round_s)
        try:
            result = worker.start()
        except BenchmarkError as exc:
            run.fail(sdk, scenario, exc)
            continue
        if result.unsupported is not None:
            run.pool(sdk, scenario, result)
        else:
            live[sdk] = worker
    return live


def _alternate(run: _Run, live: dict[str, LiveWorker], scenario: str, rounds: int) -> None:
    """Rounds of the live workers in :func:`interleaved` order, then each worker's end; a worker
    that fails drops out, its rounds so far kept."""
    timeline: list[Sample] = []
    order = interleaved("pyadk", [sdk for sdk in live if sdk != "pyadk"], rounds)
    print(f"[peers] {scenario}: {len(order)} alternating rounds ...", flush=True)
    for sdk in order:
        worker = live.get(sdk)
        if worker is None:
            continue
        try:
            samples = worker.round()
        except BenchmarkError as exc:
            run.fail(sdk, scenario, exc)
            run.pool(sdk, scenario, live.pop(sdk).result)
            continue
        timeline.append((sdk, round_figures(sdk, scenario, samples)))
    for sdk, worker in live.items():
        try:
            run.pool(sdk, scenario, worker.finish())
        except BenchmarkError as exc:
            run.fail(sdk, scenario, exc)
            run.pool(sdk, scenario, worker.result)
    run.timelines.setdefault(scenario, []).append(timeline)


def _count_all(
    run: _Run, sdks: list[str], scenarios: list[str], where: dict[str, tuple[str, str]], quick: bool
) -> dict[Key, dict[str, Any]]:
    """Instructions per run of every row of the counted scenarios (see ``benchmarks._callgrind``),
    each sized from the row's pooled CPU figure; a failed count becomes a note in its row."""
    counts: dict[Key, dict[str, Any]] = {}
    for scenario in (s for s in scenarios if s in COUNTED):
        for sdk in sdks:
            result = run.results.get((sdk, scenario))
            if result is None or result.unsupported is not None:
                continue
            python, module = where[sdk]
            for variant in result.variants:
                label = row_label(sdk, variant)
                runs = runs_for(result.cpu(variant).median, quick)
                print(f"[peers] {label} {scenario}: instructions, {runs[0]} vs {runs[1]} runs ...")
                try:
                    count = count_instructions(module, scenario, variant, python=python, runs=runs)
                except (BenchmarkError, ValueError) as exc:
                    print(exc, file=sys.stderr)
                    counts[(label, scenario)] = {"instructions_error": str(exc).splitlines()[0]}
                    continue
                counts[(label, scenario)] = count.as_dict()
    return counts


def _import_rows(
    sdks: list[str], where: dict[str, tuple[str, str]], statements: dict[str, str], quick: bool
) -> list[dict[str, Any]]:
    rows = []
    for sdk in sdks:
        print(f"[peers] {sdk} import ...", flush=True)
        m = measure_import(statements[sdk], python=where[sdk][0], repeat=3 if quick else 7)
        rows.append(
            {
                "sdk": sdk,
                "statement": statements[sdk],
                "import_ms": round(m["wall_ms"].median, 1),
                "import_ms_min": round(m["wall_ms"].low, 1),
                "import_ms_max": round(m["wall_ms"].high, 1),
                "rss_mib": round(m["rss_mib"].median, 1),
                "modules": m["modules"],
            }
        )
    return rows


def run_peers(
    names: list[str] | None,
    *,
    rounds: int,
    repeat: int,
    quick: bool,
    output: Path,
    only: str | None = None,
    instructions: bool = False,
) -> int:
    """Build the venvs, run pyadk and every peer on the same workloads, print and save the tables.

    Each of the ``repeat`` repeats runs scenario by scenario: it starts a fresh worker per SDK
    (imports, build, warm-up, calibration), then alternates their rounds (pyadk, peer 1, pyadk,
    peer 2, ..., pyadk, ``rounds`` rounds per peer) so every peer round sits between two pyadk
    rounds a fraction of a second away: its ratio to pyadk is taken from those neighbours
    (``benchmarks._pairing``), not from figures pooled over a run long enough to span both of the
    machine's speeds. With ``instructions`` the rows of (a), (b) and (d) also get callgrind counts
    after the timings (never during them).
    """
    scenarios, time_imports = select(only)
    peers = [PEERS[n] for n in (names or list(PEERS))]
    where = {"pyadk": (sys.executable, PYADK_MODULE)}
    where.update({p.name: (str(ensure_env(p)), p.module) for p in peers})
    sdks = list(where)
    started = time.time()
    machine = machine_info()
    run = _Run()
    round_s = 0.02 if quick else 0.1
    for _ in range(repeat):
        for scenario in scenarios:
            chosen = [sdk for sdk in sdks if not run.unsupported(sdk, scenario)]
            live = _start(run, chosen, scenario, where, round_s)
            if "pyadk" in live:
                _alternate(run, live, scenario, rounds)
            else:
                for worker in live.values():
                    worker.close()
    statements = {"pyadk": PYADK_IMPORTS, **{p.name: p.imports for p in peers}}
    imports = _import_rows(sdks, where, statements, quick) if time_imports else []
    counts: dict[Key, dict[str, Any]] | None = None
    note = None
    if instructions:
        note = None if valgrind() else "valgrind not installed"
        counts = _count_all(run, sdks, scenarios, where, quick) if note is None else {}
    rows: list[dict[str, Any]] = []
    for scenario in scenarios:
        rows += scenario_rows(scenario, sdks, run.results, run.errors, run.ratios(scenario), counts)
    machine["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    document: dict[str, Any] = {
        "machine": machine,
        "command": ["python", "-m", "benchmarks", *sys.argv[1:]],
        "seconds": round(time.time() - started, 1),
        "pins": {p.name: list(p.pins) for p in peers},
        "rounds_per_peer": rounds,
        "repeat": repeat,
        "rows": rows,
        "summary": summarise(rows, scenarios),
        "imports": imports,
        "errors": {f"{k[0]}.{k[1]}": v for k, v in run.errors.items()},
    }
    if instructions:
        document["instructions"] = {
            "note": note,
            "scenarios": [s for s in scenarios if s in COUNTED],
        }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2) + "\n")
    print()
    print(peers_tables(document))
    print(f"\nresults: {output}")
    return 1 if run.errors else 0


def main() -> None:
    """``python -m benchmarks.peers [NAME ...]``: build (or check) the peer venvs only."""
    names = sys.argv[1:] or list(PEERS)
    for name in names:
        print(name, ensure_env(PEERS[name]), flush=True)


if __name__ == "__main__":
    main()
