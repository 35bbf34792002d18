"""What the event-driven layer costs: per event, per model turn, per keyed record.

- ``actions.per_event``: an ``ActionAgent`` whose input action sends 1,000 custom events, each taken
  by a sync action; the cost per event is the difference to a run that sends one, divided by 999.
- ``actions.turn_b`` against ``react.turn_b``: workload (b) of the main suite (the model calls
  ``add(a=1, b=2)``, then answers ``sum=3``, asserted) done by an ``ActionAgent`` through the built-in
  chat and tool actions, and by a ``ReActAgent``, with the same minimal model. Their ratio is what
  routing a model turn through events costs.
- ``execution.per_record``: 1,000 records over 100 keys through ``LocalExecutionEnvironment`` with a
  trivial ``ActionAgent``, against the same 1,000 runs invoked one after another: the environment's
  own cost per record (key lookup, per-key queues, session copy, output records).

Figures are CPU µs (``time.process_time``), medians over rounds, with min–max. Run from the
repository root: ``python -m benchmarks.action_agents`` (the table below), or as part of the suite:
``python -m benchmarks --only action_agents``.

``python -m benchmarks --only action_agents --instructions`` also counts each row with callgrind
(``build``: the workloads rounds 15 and 16 of docs/performance.md counted, smaller than the timed
ones: 100 ticks of ``_Fanout`` a run, the ``_Adder`` turn, 100 records over 10 keys a run), under
each of ``COUNT_SEEDS`` (hash seeds), the median with its min–max: the per-record count moved
~1.5k between seeds of the same code, and ~3k between two checkouts of it in round 16.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from adk import Message, Resources, Runner
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from adk.execution import LocalExecutionEnvironment
from prebuilt import ReActAgent

from .pyadk_workloads import _AddModel, add  # the main suite's (b): the same model and tool

EVENTS = 1_000
RECORDS = 1_000
KEYS = 100
# The counted workloads (``build``) and their run counts, as rounds 15 and 16 counted them.
COUNTED_EVENTS = 100
COUNTED_RECORDS = 100
COUNTED_KEYS = 10
COUNT_SEEDS = (0, 1, 2)


class _Tick(Event):
    n: int


class _Fanout(ActionAgent):
    """Sends ``count`` ticks from its input action; each tick is taken by one sync action."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.seen = 0
        super().__init__("fanout", max_events=count + 10)

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        for n in range(self.count):
            ctx.send_event(_Tick(n=n))

    @action(_Tick)
    def tick(self, event: _Tick, ctx: ActionContext) -> None:
        self.seen += 1


class _Adder(ActionAgent):
    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        messages = [Message.user(event.input)]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["add"]))

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


@action(InputEvent)
def _echo(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.input))


async def build(scenario: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The counted workloads as the harness's count worker takes them (variant ``run``):
    ``per_event``, a ``_Fanout`` run of ``COUNTED_EVENTS`` ticks; ``turn``, the ``_Adder`` turn
    (asserted ``sum=3``); ``per_record``, ``COUNTED_RECORDS`` records over ``COUNTED_KEYS`` keys
    through ``LocalExecutionEnvironment``."""
    if scenario == "per_event":
        fanout = _Fanout(COUNTED_EVENTS)
        runner = Runner(fanout)

        async def ticks() -> None:
            fanout.seen = 0
            await runner.invoke("go")
            assert fanout.seen == COUNTED_EVENTS

        return {"run": ticks}
    if scenario == "turn":
        resources = Resources()
        resources.add_model("m", _AddModel())
        resources.add_tool(add)
        adder = Runner(_Adder("adder", resources=resources))

        async def turn() -> None:
            assert (await adder.invoke("1+2?")).text == "sum=3"

        return {"run": turn}
    if scenario == "per_record":
        records = [{"key": f"k{n % COUNTED_KEYS}", "n": n} for n in range(COUNTED_RECORDS)]
        echo = ActionAgent("echo", actions=[_echo])
        env = LocalExecutionEnvironment(max_concurrency=COUNTED_KEYS)

        async def keyed() -> None:
            outputs = await env.from_list(records, key="key").apply(echo).to_list()
            assert len(outputs) == COUNTED_RECORDS

        return {"run": keyed}
    raise NotImplementedError(f"unknown scenario {scenario!r}")


def _counted(scenario: str, per: int, unit: str, runs: tuple[int, int]) -> dict[str, Any]:
    """How ``python -m benchmarks --instructions`` counts a row (see the module docstring)."""
    return {
        "count": [scenario, "run"],
        "count_runs": list(runs),
        "count_seeds": list(COUNT_SEEDS),
        "count_per": per,
        "count_unit": unit,
    }


def _rounds_us(body: Callable[[], Awaitable[Any]], rounds: int, per: int) -> list[float]:
    """CPU µs of each of ``rounds`` calls of ``await body()``, divided by ``per``, after one
    warm-up."""

    async def measure() -> list[float]:
        await body()
        found = []
        for _ in range(rounds):
            start = time.process_time()
            await body()
            found.append((time.process_time() - start) * 1e6 / per)
        return found

    return asyncio.run(measure())


def _spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def _cpu_us(
    body: Callable[[], Awaitable[Any]], rounds: int, per: int
) -> tuple[float, float, float]:
    """Median, min and max CPU µs of ``await body()`` divided by ``per``."""
    return _spread(_rounds_us(body, rounds, per))


def _row(name: str, unit: str, figures: tuple[float, float, float], **extra: Any) -> dict[str, Any]:
    median, low, high = figures
    return {
        "benchmark": name,
        "unit": unit,
        "median": round(median, 2),
        "min": round(low, 2),
        "max": round(high, 2),
        **extra,
    }


def run(rounds: int = 7, quick: bool = False) -> list[dict[str, Any]]:
    rounds = 2 if quick else rounds
    rows: list[dict[str, Any]] = []

    many, one = Runner(_Fanout(EVENTS)), Runner(_Fanout(1))
    # Per round: the run sending 1,000 events minus the median run sending one.
    one_us = statistics.median(_rounds_us(lambda: one.invoke("go"), rounds * 5, 1))
    many_us = _rounds_us(lambda: many.invoke("go"), rounds, 1)
    rows.append(
        _row(
            "actions.per_event",
            "µs/event",
            _spread([(m - one_us) / (EVENTS - 1) for m in many_us]),
            **_counted("per_event", COUNTED_EVENTS, "event", (20, 60)),
        )
    )

    resources = Resources()
    resources.add_model("m", _AddModel())
    resources.add_tool(add)
    actions_runner = Runner(_Adder("adder", resources=resources))
    react_runner = Runner(ReActAgent("adder", _AddModel(), tools=[add]))

    async def actions_turn() -> None:
        assert (await actions_runner.invoke("1+2?")).text == "sum=3"

    async def react_turn() -> None:
        assert (await react_runner.invoke("1+2?")).text == "sum=3"

    actions_us = _cpu_us(actions_turn, rounds * 20, 1)
    react_us = _cpu_us(react_turn, rounds * 20, 1)
    rows.append(
        _row("actions.turn_b", "µs/run", actions_us, **_counted("turn", 1, "run", (100, 300)))
    )
    rows.append(_row("react.turn_b", "µs/run", react_us, actions_ratio=actions_us[0] / react_us[0]))

    records = [{"key": f"k{n % KEYS}", "n": n} for n in range(RECORDS)]
    echo = ActionAgent("echo", actions=[_echo])
    sequential = Runner(echo)
    env = LocalExecutionEnvironment(max_concurrency=KEYS)

    async def keyed() -> None:
        outputs = await env.from_list(records, key="key").apply(echo).to_list()
        assert len(outputs) == RECORDS

    async def one_by_one() -> None:
        for record in records:
            await sequential.invoke(str(record["n"]))

    keyed_us = _cpu_us(keyed, rounds, RECORDS)
    plain_us = _cpu_us(one_by_one, rounds, RECORDS)
    rows.append(
        _row(
            "execution.per_record",
            "µs/record",
            keyed_us,
            plain_run_us=round(plain_us[0], 2),
            environment_us=round(keyed_us[0] - plain_us[0], 2),
            **_counted("per_record", COUNTED_RECORDS, "record", (5, 15)),
        )
    )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    head = f"{'benchmark':<22} {'median':>9} {'min':>9} {'max':>9}  unit       notes"
    lines = [head, "-" * len(head)]
    for row in rows:
        notes = ", ".join(
            f"{k}={v}"
            for k, v in row.items()
            if k not in {"benchmark", "unit", "median", "min", "max"}
        )
        lines.append(
            f"{row['benchmark']:<22} {row['median']:>9.2f} {row['min']:>9.2f} {row['max']:>9.2f}"
            f"  {row['unit']:<10} {notes}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per figure")
    print(_table(run(parser.parse_args().rounds)))
