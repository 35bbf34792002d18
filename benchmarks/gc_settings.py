"""What the cyclic GC costs 1,000 runs in flight, and what a service's GC settings take off.

With a model that awaits once (``a.inflight``, ``b.inflight`` in ``benchmarks/pyadk_workloads.py``)
1,000 gathered runs are alive together; every 700 GC-tracked objects they hold trigger a young
collection, and older collections walk everything alive in their generations. Sequential runs free
everything by reference counting and trigger none. Settings, each in its own fresh process, set up
after the agents are built:

- ``default``: CPython's collector as it comes (threshold 700, 10, 10);
- ``frozen``: ``gc.collect(); gc.freeze()``: what start-up built leaves the collector's view;
- ``tuned``: ``frozen`` plus ``gc.set_threshold(20_000, 10, 10)``: young collections every 20,000
  new objects;
- ``nogc``: ``gc.disable()``: the reference point, what the runs cost without the collector.

Each row is the harness's gather measurement (``benchmarks/_harness.py``: warm-up through a full
collector cycle, sequential, concurrent and asyncio's share alternated per round): the concurrent per
run cost over the sequential one, raw and net of asyncio's own gather cost, and the collections per
1,000 concurrent runs. docs/performance.md ("Concurrency") explains the figures.

Run from the repository root: ``python -m benchmarks.gc_settings [--rounds N] [--repeat N]``.
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks._harness import format_table, run_worker
from benchmarks.pyadk_workloads import GC_SETTINGS

WORKLOADS = ("a.inflight", "b.inflight")
SETTINGS = ("default", *GC_SETTINGS)  # default, frozen, tuned, nogc


def _scenario(workload: str, setting: str) -> str:
    """The gathered scenario name (``c_`` prefix) with the setting's suffix, if any."""
    return f"c_{workload}" if setting == "default" else f"c_{workload}.{setting}"


def run(
    rounds: int = 7, round_s: float = 0.1, repeat: int = 2, quick: bool = False
) -> list[dict[str, Any]]:
    """One row per workload and setting (``quick``: two short rounds in one process)."""
    if quick:
        rounds, round_s, repeat = 2, 0.02, 1
    rows: list[dict[str, Any]] = []
    for workload in WORKLOADS:
        for setting in SETTINGS:
            result = run_worker(
                "benchmarks.pyadk_workloads",
                _scenario(workload, setting),
                rounds=rounds,
                round_s=round_s,
                repeat=repeat,
            )
            raw, net = result.concurrency_ratios()
            gc_rates = result.gc_per_1000("concurrent") or [0.0, 0.0, 0.0]
            rows.append(
                {
                    "benchmark": f"gc_settings.{workload}.{setting}",
                    "workload": workload,
                    "setting": setting,
                    "sequential_cpu_us": round(result.cpu("sequential").median, 2),
                    "concurrent_cpu_us": round(result.cpu("concurrent").median, 2),
                    "asyncio_gather_us": round(result.cpu("asyncio").median, 2),
                    "ratio": round(raw.median, 3),
                    "ratio_net_of_asyncio": round(net.median, 3),
                    "gc_per_1000_runs": [round(x, 2) for x in gc_rates],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="cyclic GC cost of 1,000 runs in flight")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rows = run(args.rounds, repeat=args.repeat)
    headers = [
        "workload",
        "GC setting",
        "sequential µs/run",
        "concurrent µs/run",
        "× sequential",
        "net of asyncio",
        "GC/1k runs gen0/1/2",
    ]
    table = [
        [
            str(r["workload"]),
            str(r["setting"]),
            f"{r['sequential_cpu_us']:.1f}",
            f"{r['concurrent_cpu_us']:.1f}",
            f"{r['ratio']:.2f}",
            f"{r['ratio_net_of_asyncio']:.2f}",
            "/".join(f"{x:.2f}" for x in r["gc_per_1000_runs"]),
        ]
        for r in rows
    ]
    print(format_table(headers, table))


if __name__ == "__main__":
    main()
