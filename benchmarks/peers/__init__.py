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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._harness import (
    BenchmarkError,
    Figure,
    WorkerResult,
    cache_dir,
    format_table,
    machine_info,
    measure_import,
    run_worker,
)

__all__ = ["PEERS", "Peer", "cache_dir", "ensure_env", "run_peers"]

PYADK_MODULE = "benchmarks.pyadk_workloads"
PYADK_IMPORTS = (
    "from adk import Runner, SequentialAgent, BaseAgent, tool; from prebuilt import ReActAgent"
)
SCENARIOS = ("a", "b", "c_a", "c_b", "d")
TITLES = {
    "a": "(a) one turn, model answers 'done'",
    "b": "(b) add(a=1, b=2) tool, then 'sum=3'",
    "c_a": "(c) 1,000 concurrent (a), per run",
    "c_b": "(c) 1,000 concurrent (b), per run",
    "d": "(d) sequential workflow of 10 steps",
}
TARGET_FACTOR = 20.0  # pyadk needs at least this much less CPU per run than the fastest peer


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
def _cell(result: WorkerResult | None, scenario: str, variant: str) -> Figure | None:
    if result is None or result.unsupported is not None:
        return None
    name = "concurrent" if scenario.startswith("c_") else variant
    return result.cpu(name) if name in result.variants else None


def _net_ratio(result: WorkerResult) -> Figure:
    """Concurrent over sequential CPU per run, after taking off asyncio's own gather cost; per
    round, as the three were timed back to back."""
    v = result.variants
    return Figure.of(
        [
            (c - f) / s
            for c, s, f in zip(
                v["concurrent"]["cpu"], v["sequential"]["cpu"], v["asyncio"]["cpu"], strict=True
            )
        ]
    )


def run_peers(names: list[str] | None, rounds: int, repeat: int, quick: bool, output: Path) -> int:
    """Build the venvs, run pyadk and every peer on the same workloads, print and save the tables.

    The loop runs scenario by scenario and, inside, SDK by SDK, ``repeat`` times over, so a burst
    of load from elsewhere on the machine lands on every SDK's figures rather than on one.
    """
    peers = [PEERS[n] for n in (names or list(PEERS))]
    pythons = {peer.name: str(ensure_env(peer)) for peer in peers}
    sdks: list[tuple[str, str, str]] = [("pyadk", sys.executable, PYADK_MODULE)]
    sdks += [(p.name, pythons[p.name], p.module) for p in peers]
    started = time.time()
    machine = machine_info()
    results: dict[tuple[str, str], WorkerResult] = {}
    errors: dict[tuple[str, str], str] = {}
    round_s = 0.02 if quick else 0.1
    for _ in range(repeat):
        for scenario in SCENARIOS:
            for sdk, python, module in sdks:
                print(f"[peers] {sdk} {scenario} ...", flush=True)
                try:
                    result = run_worker(
                        module, scenario, python=python, rounds=rounds, round_s=round_s
                    )
                except BenchmarkError as exc:
                    errors[(sdk, scenario)] = str(exc).splitlines()[-1]
                    print(exc, file=sys.stderr)
                    continue
                slot = results.setdefault((sdk, scenario), WorkerResult())
                slot.merge(result)
    imports: dict[str, dict[str, Any]] = {}
    statements = {"pyadk": PYADK_IMPORTS, **{p.name: p.imports for p in peers}}
    for sdk, python, _ in sdks:
        print(f"[peers] {sdk} import ...", flush=True)
        imports[sdk] = measure_import(statements[sdk], python=python, repeat=3 if quick else 7)

    rows: list[dict[str, Any]] = []
    for scenario in SCENARIOS:
        pyadk = _cell(results.get(("pyadk", scenario)), scenario, "run")
        for sdk, _, _ in sdks:
            found = results.get((sdk, scenario))
            if found is None:
                rows.append(
                    {"sdk": sdk, "scenario": scenario, "error": errors.get((sdk, scenario))}
                )
                continue
            result = found
            if result.unsupported is not None:
                rows.append({"sdk": sdk, "scenario": scenario, "unsupported": result.unsupported})
                continue
            variants = ["run"] if scenario.startswith("c_") else list(result.variants)
            for variant in variants:
                label = sdk if variant == "run" else f"{sdk} [{variant}]"
                measured = "concurrent" if scenario.startswith("c_") else variant
                row: dict[str, Any] = {
                    "benchmark": f"{sdk}.{scenario}",
                    "sdk": label,
                    "scenario": scenario,
                }
                row.update(result.base_row(measured))
                cpu = result.cpu(measured)
                if scenario.startswith("c_"):
                    ratio = result.paired("concurrent", "sequential", lambda c, s: c / s)
                    row["sequential_cpu_us"] = round(result.cpu("sequential").median, 2)
                    row["concurrent_over_sequential"] = round(ratio.median, 3)
                    if "asyncio" in result.variants:
                        row["asyncio_gather_us"] = round(result.cpu("asyncio").median, 2)
                        row["net_of_asyncio"] = round(_net_ratio(result).median, 3)
                if pyadk is not None:
                    row["x_pyadk"] = round(cpu.median / pyadk.median, 1)
                rows.append(row)
    summary: list[dict[str, Any]] = []
    for scenario in SCENARIOS:
        candidates = [
            r for r in rows if r["scenario"] == scenario and r["sdk"] != "pyadk" and "x_pyadk" in r
        ]
        if not candidates:
            continue
        fastest = min(candidates, key=lambda r: r["x_pyadk"])
        summary.append(
            {
                "scenario": scenario,
                "fastest_peer": fastest["sdk"],
                "x_pyadk": fastest["x_pyadk"],
                "target": TARGET_FACTOR,
                "ok": fastest["x_pyadk"] >= TARGET_FACTOR,
            }
        )
    import_rows = []
    for sdk, m in imports.items():
        import_rows.append(
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
    machine["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    document = {
        "machine": machine,
        "command": ["python", "-m", "benchmarks", *sys.argv[1:]],
        "seconds": round(time.time() - started, 1),
        "pins": {p.name: list(p.pins) for p in peers},
        "rows": rows,
        "summary": summary,
        "imports": import_rows,
        "errors": {f"{k[0]}.{k[1]}": v for k, v in errors.items()},
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=2) + "\n")
    print()
    print(peers_tables(document))
    print(f"\nresults: {output}")
    return 1 if errors else 0


def peers_tables(document: dict[str, Any]) -> str:
    """The side-by-side tables (also used to write docs/performance.md)."""

    def fig(row: dict[str, Any], key: str) -> str:
        return f"{row[key]:.0f} ({row[key + '_min']:.0f}–{row[key + '_max']:.0f})"

    lines = []
    for row in document["rows"]:
        title = TITLES[row["scenario"]]
        if "unsupported" in row or "error" in row:
            note = row.get("unsupported") or f"error: {row.get('error')}"
            lines.append([title, row["sdk"], f"n/a: {note}", "", "", "", ""])
            continue
        ratio = row.get("x_pyadk")
        concurrency = "–"
        if "concurrent_over_sequential" in row:
            concurrency = f"{row['concurrent_over_sequential']:.2f}×"
            if "net_of_asyncio" in row:
                concurrency += f" ({row['net_of_asyncio']:.2f}×)"
        lines.append(
            [
                title,
                row["sdk"],
                fig(row, "cpu_us"),
                fig(row, "wall_us"),
                f"{row['peak_rss_mib']:.0f}",
                "–" if ratio is None else f"{ratio:.1f}×",
                concurrency,
            ]
        )
    headers = [
        "scenario",
        "SDK",
        "CPU µs/run",
        "wall µs/run",
        "peak RSS MiB",
        "CPU vs pyadk",
        "concurrent / sequential (net of asyncio)",
    ]
    out = [format_table(headers, lines), ""]
    summary = [
        [
            TITLES[s["scenario"]],
            s["fastest_peer"],
            f"{s['x_pyadk']:.1f}×",
            f"≥ {s['target']:g}×",
            "pass" if s["ok"] else "FAIL",
        ]
        for s in document["summary"]
    ]
    out.append(
        format_table(["scenario", "fastest peer", "its CPU / pyadk's", "target", "ok"], summary)
    )
    out.append("")
    imports = [
        [
            r["sdk"],
            f"{r['import_ms']:.0f} ({r['import_ms_min']:.0f}–{r['import_ms_max']:.0f})",
            f"{r['rss_mib']:.1f}",
            str(r["modules"]),
        ]
        for r in document["imports"]
    ]
    out.append(format_table(["SDK", "import ms", "RSS after import MiB", "modules"], imports))
    return "\n".join(out)


def main() -> None:
    """``python -m benchmarks.peers [NAME ...]``: build (or check) the peer venvs only."""
    names = sys.argv[1:] or list(PEERS)
    for name in names:
        print(name, ensure_env(PEERS[name]), flush=True)


if __name__ == "__main__":
    main()
