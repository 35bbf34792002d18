"""What OpenTelemetry tracing costs a run: off, no SDK, no-op API, SDK with an in-memory exporter.

Workloads are the ReActAgent ones (``benchmarks/pyadk_workloads.py``): ``a``, the model answers
"done" (2 spans: ``invoke_agent``, ``chat``); ``b``, one ``add`` tool call then the answer (4 spans:
``invoke_agent``, ``chat``, ``execute_tool``, ``chat``). Variants, all built once per process:

- ``off``: a plain ``Runner``; OpenTelemetry's API is imported but no SDK is configured, so the
  runner carries no hooks at all. This is the baseline.
- ``noop``: ``Runner(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())``;
  the no-op providers are detected and the runner carries no hooks either (should equal ``off``).
- ``noop_api``: the tracing hooks forced on over the no-op providers (detection bypassed): what
  every span would cost if pyadk did not detect that nothing records.
- ``sdk``: the OpenTelemetry SDK, ``SimpleSpanProcessor`` + ``InMemorySpanExporter`` (cleared each
  run) and a ``MeterProvider`` with an ``InMemoryMetricReader``: spans and the histograms (model
  calls' token usage and duration, the agent run's and the tool call's duration).
- ``callbacks``: no tracing, one ``Callbacks`` object with a no-op ``before_model`` and
  ``before_tool``: the cost of the callback layer.

Each scenario runs in a fresh process through ``benchmarks/_harness.py`` (warm-up, calibrated
rounds, variants alternated per round; CPU µs per run, median and min–max). ``per_span_us`` is the
variant's CPU time over ``off`` divided by the spans a run makes.

Run from the repository root: ``python -m benchmarks.tracing_overhead [--rounds N]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk
from adk import Runner
from adk._instrument import _Instrumented
from adk.callbacks import Callbacks
from adk.tracing import _GenAITracing
from benchmarks._harness import format_table, run_worker
from benchmarks.pyadk_workloads import _AddModel, _DoneModel, add
from prebuilt import ReActAgent

__all__ = ["SPANS_PER_RUN", "VERSIONS", "build", "run"]

VERSIONS = {"pyadk": adk.__version__, "opentelemetry-sdk": version("opentelemetry-sdk")}
SPANS_PER_RUN = {"a": 2, "b": 4}
VARIANTS = ("off", "noop", "noop_api", "sdk", "callbacks")

Variant = Callable[[], Awaitable[object]]


def _agent(scenario: str) -> tuple[ReActAgent, str]:
    if scenario == "a":
        return ReActAgent("bench", _DoneModel()), "done"
    if scenario == "b":
        return ReActAgent("bench", _AddModel(), tools=[add]), "sum=3"
    raise NotImplementedError(f"unknown scenario {scenario!r}")


def _invoke(runner: Runner, expected: str, after: Callable[[], None] | None = None) -> Variant:
    async def one_run() -> None:
        result = await runner.invoke("hi")
        if result.text != expected:
            raise AssertionError(f"expected {expected!r}, got {result.text!r}")
        if after is not None:
            after()

    return one_run


def _noop(*args: Any) -> None:
    return None


async def build(scenario: str) -> dict[str, Variant]:
    """The variants of ``scenario`` (``a`` or ``b``), built once."""
    agent, expected = _agent(scenario)
    off = Runner(agent)
    noop = Runner(
        agent,
        tracer_provider=trace.NoOpTracerProvider(),
        meter_provider=metrics.NoOpMeterProvider(),
    )
    if off._hooks is not None or noop._hooks is not None:
        raise AssertionError("tracing hooks present although nothing records")

    noop_api = Runner(agent)
    noop_api._hooks = _Instrumented(_GenAITracing(trace.NoOpTracer(), None, False), None)

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    sdk = Runner(agent, tracer_provider=tracer_provider, meter_provider=meter_provider)
    spans = SPANS_PER_RUN[scenario]

    def check_and_clear() -> None:
        if len(exporter.get_finished_spans()) != spans:
            raise AssertionError(f"expected {spans} spans a run")
        exporter.clear()

    callbacks = Runner(agent, callbacks=[Callbacks(before_model=_noop, before_tool=_noop)])
    return {
        "off": _invoke(off, expected),
        "noop": _invoke(noop, expected),
        "noop_api": _invoke(noop_api, expected),
        "sdk": _invoke(sdk, expected, check_and_clear),
        "callbacks": _invoke(callbacks, expected),
    }


def run(rounds: int = 7, round_s: float = 0.1, quick: bool = False) -> list[dict[str, Any]]:
    """One row per workload and variant: CPU µs per run, overhead over ``off``, per span
    (``quick``: two short rounds, a smoke test)."""
    if quick:
        rounds, round_s = 2, 0.02
    rows: list[dict[str, Any]] = []
    for scenario in ("a", "b"):
        result = run_worker("benchmarks.tracing_overhead", scenario, rounds=rounds, round_s=round_s)
        base = result.cpu("off").median
        for variant in VARIANTS:
            cpu = result.cpu(variant)
            overhead = cpu.median - base
            rows.append(
                {
                    "benchmark": f"tracing_overhead.{scenario}.{variant}",
                    "workload": scenario,
                    "variant": variant,
                    **cpu.as_dict("cpu_us"),
                    "overhead_us": round(overhead, 2),
                    "overhead_pct": round(100 * overhead / base, 1),
                    "per_span_us": round(overhead / SPANS_PER_RUN[scenario], 2),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenTelemetry tracing overhead per run and span")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--round-s", type=float, default=0.1)
    args = parser.parse_args()
    rows = run(args.rounds, args.round_s)
    headers = ["workload", "variant", "CPU µs/run (min–max)", "over off µs", "%", "µs per span"]
    table = [
        [
            str(r["workload"]),
            str(r["variant"]),
            f"{r['cpu_us']:.1f} ({r['cpu_us_min']:.1f}–{r['cpu_us_max']:.1f})",
            f"{r['overhead_us']:+.1f}",
            f"{r['overhead_pct']:+.1f}",
            f"{r['per_span_us']:+.2f}",
        ]
        for r in rows
    ]
    print(format_table(headers, table))


if __name__ == "__main__":
    main()
