"""Overhead of ``OpenAIChatModel`` over calling ``AsyncOpenAI`` directly, against a local server.

Both sides send the same request (a system and a user message, one tool) to the same local
OpenAI-compatible server (tests/openai_server.py, run in its own process so its CPU time is not
measured) through identically configured clients (``max_retries=0``). Each round runs a small batch of
raw calls and a small batch of adapter calls back to back (order flipped every round); the ratio is the
median over rounds of adapter/raw batch time. Pairing neighbouring batches cancels the machine's drift
(other processes, CPU frequency), which on a shared 2-core box moves absolute times by tens of percent
between runs while the paired ratio stays within a percent or two. The raw stream is consumed event by
event, the adapter's chunk by chunk, so the ratio is what the adapter adds: request mapping, the retry
wrapper, and turning SDK objects into pyadk messages and chunks. Target: ratio <= 1.05.

The adapter's own cost per streamed delta is too small for a ratio over a whole call to show (a
call is ~1 ms of HTTP and SDK work; a delta ~30k instructions of it), so two more rows count it
alone: ``delta.text`` (a text delta) and ``delta.args`` (a tool call's argument fragment), each
``ChatStreamDecoder.feed`` of the same ``ChatCompletionChunk`` built as the SDK's stream builds it
(``construct_type``), ``FEEDS`` a run to a decoder warmed on the call's head. Their native µs per
delta are timed here; ``python -m benchmarks --only openai_adapter --instructions`` also counts
them with callgrind under each of ``DELTA_SEEDS`` (hash seeds), the median with its min–max: the
same code counts ~3 % apart under two seeds, so a single count cannot tell a change of that size.

Run from the repository root: ``python -m benchmarks.openai_adapter [--rounds N] [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import openai

from adk.messages import Message, MessageChunk
from adk.models._openai_chat import ChatStreamDecoder
from adk.models.openai import OpenAIChatModel
from adk.tools.base import ToolSpec

SERVER = Path(__file__).resolve().parents[1] / "tests" / "openai_server.py"
TARGET = 1.05
MODEL = "bench-model"

TOOL = ToolSpec(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)
MESSAGES = [Message.system("You are terse."), Message.user("Say ok.")]
CHAT_MESSAGES: Any = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say ok."},
]
CHAT_TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": TOOL.name,
            "parameters": TOOL.parameters,
            "description": TOOL.description,
        },
    }
]
RESPONSES_TOOLS: Any = [
    {
        "type": "function",
        "name": TOOL.name,
        "parameters": TOOL.parameters,
        "strict": False,
        "description": TOOL.description,
    }
]

Call = Callable[[], Awaitable[Any]]

# -- per streamed delta ---------------------------------------------------------------------------
FEEDS = 100  # deltas per counted run: the run's own await is ~1 % of one delta, shared by 100
DELTA_SEEDS = (0, 1, 2, 3, 4)
_HEAD = {
    "role": "assistant",
    "tool_calls": [
        {
            "index": 0,
            "id": "call_1",
            "type": "function",
            "function": {"name": "add", "arguments": ""},
        }
    ],
}
DELTAS: dict[str, dict[str, Any]] = {
    "delta.text": {"content": "hello"},
    "delta.args": {"tool_calls": [{"index": 0, "function": {"arguments": '{"a"'}}]},
}


def _chunk(delta: dict[str, Any]) -> Any:
    """A ``ChatCompletionChunk`` as the SDK's stream makes one from an event's JSON (its
    ``construct_type``, which validates nothing), so ``feed`` reads what it reads in a stream."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    value = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
    }
    return construct_type(type_=ChatCompletionChunk, value=value)


def _checked(scenario: str, out: MessageChunk | None) -> None:
    """The decoder's chunk for the delta is the one it should be (the workload does real work)."""
    if out is None:
        raise AssertionError(f"{scenario}: the delta gave no chunk")
    if scenario == "delta.text" and out.content != "hello":
        raise AssertionError(f"{scenario}: content {out.content!r}")
    if scenario == "delta.args" and [(c.index, c.arguments) for c in out.tool_calls] != [
        (0, '{"a"')
    ]:
        raise AssertionError(f"{scenario}: tool calls {out.tool_calls!r}")


async def build(scenario: str) -> dict[str, Callable[[], Awaitable[None]]]:
    """The per-delta workloads as the harness's count worker takes them: ``delta.text`` or
    ``delta.args``, variant ``run``: ``FEEDS`` deltas fed to one decoder, after the call's head
    (a delta of arguments continues the call the head began, as in a stream)."""
    if scenario not in DELTAS:
        raise NotImplementedError(f"unknown scenario {scenario!r}; choose from {sorted(DELTAS)}")
    decoder = ChatStreamDecoder()
    decoder.feed(_chunk(_HEAD))
    body = _chunk(DELTAS[scenario])
    feed = decoder.feed

    async def run() -> None:
        out = None
        for _ in range(FEEDS):
            out = feed(body)
        _checked(scenario, out)

    return {"run": run}


def _delta_rows(rounds: int) -> list[dict[str, Any]]:
    """Native CPU µs per delta (median and min–max over rounds of 20 runs), and how
    ``--instructions`` counts each row."""

    async def timed(scenario: str) -> list[float]:
        run = (await build(scenario))["run"]
        for _ in range(20):  # warm-up
            await run()
        found = []
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(20):
                await run()
            found.append((time.process_time() - start) * 1e6 / (20 * FEEDS))
        return found

    rows = []
    for scenario in DELTAS:
        us = asyncio.run(timed(scenario))
        rows.append(
            {
                "benchmark": f"openai_adapter.{scenario}",
                "us_per_delta": round(statistics.median(us), 2),
                "us_per_delta_min": round(min(us), 2),
                "us_per_delta_max": round(max(us), 2),
                # What ``python -m benchmarks --instructions`` counts the row by (a run of FEEDS).
                "us": round(statistics.median(us) * FEEDS, 1),
                "count": [scenario, "run"],
                "count_seeds": list(DELTA_SEEDS),
                "count_per": FEEDS,
                "count_unit": "delta",
            }
        )
    return rows


def _cases(
    raw: openai.AsyncOpenAI, chat: OpenAIChatModel, resp: OpenAIChatModel
) -> dict[str, tuple[Call, Call]]:
    async def raw_chat() -> Any:
        return await raw.chat.completions.create(
            model=MODEL, messages=CHAT_MESSAGES, tools=CHAT_TOOLS
        )

    async def raw_chat_stream() -> None:
        stream = await raw.chat.completions.create(
            model=MODEL,
            messages=CHAT_MESSAGES,
            tools=CHAT_TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        async for _ in stream:
            pass

    async def raw_responses() -> Any:
        return await raw.responses.create(model=MODEL, input=CHAT_MESSAGES, tools=RESPONSES_TOOLS)

    async def raw_responses_stream() -> None:
        stream = await raw.responses.create(
            model=MODEL,
            input=CHAT_MESSAGES,
            tools=RESPONSES_TOOLS,
            stream=True,
        )
        async for _ in stream:
            pass

    async def adapter_chat() -> Message:
        return await chat.generate(MESSAGES, tools=[TOOL])

    async def adapter_chat_stream() -> None:
        async for _ in chat.stream(MESSAGES, tools=[TOOL]):
            pass

    async def adapter_responses() -> Message:
        return await resp.generate(MESSAGES, tools=[TOOL])

    async def adapter_responses_stream() -> None:
        async for _ in resp.stream(MESSAGES, tools=[TOOL]):
            pass

    return {
        "chat.generate": (raw_chat, adapter_chat),
        "chat.stream": (raw_chat_stream, adapter_chat_stream),
        "responses.generate": (raw_responses, adapter_responses),
        "responses.stream": (raw_responses_stream, adapter_responses_stream),
    }


async def _batch(fn: Call, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls * 1e6


async def _measure(base_url: str, rounds: int, calls: int) -> list[dict[str, Any]]:
    raw = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    chat = OpenAIChatModel(MODEL, base_url=base_url, api_key="bench")
    resp = OpenAIChatModel(MODEL, base_url=base_url, api_key="bench", api="responses")
    rows = []
    try:
        for name, (raw_call, adapter_call) in _cases(raw, chat, resp).items():
            await _batch(raw_call, 50)  # warm up connections, lazy imports, caches
            await _batch(adapter_call, 50)
            raw_times: list[float] = []
            adapter_times: list[float] = []
            for round_ in range(rounds):
                pairs = [(raw_call, raw_times), (adapter_call, adapter_times)]
                for fn, times in pairs if round_ % 2 == 0 else reversed(pairs):
                    times.append(await _batch(fn, calls))
            ratios = [a / r for a, r in zip(adapter_times, raw_times, strict=True)]
            rows.append(
                {
                    "benchmark": f"openai_adapter.{name}",
                    "us_per_call": round(statistics.median(adapter_times), 1),
                    "baseline_us_per_call": round(statistics.median(raw_times), 1),
                    "ratio": round(statistics.median(ratios), 3),
                    "target": TARGET,
                }
            )
    finally:
        await chat.aclose()
        await resp.aclose()
        await raw.close()
    return rows


def run(rounds: int = 30, calls: int = 20) -> list[dict[str, Any]]:
    """Measure every case; one row each with the adapter's and the raw client's µs per call, then
    the per-delta rows (``_delta_rows``)."""
    return _calls(rounds, calls) + _delta_rows(min(rounds, 15))


def _calls(rounds: int, calls: int) -> list[dict[str, Any]]:
    server = subprocess.Popen(
        [sys.executable, str(SERVER)], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the benchmark server did not start: {line!r}")
        base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        return asyncio.run(_measure(base_url, rounds, calls))
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAIChatModel overhead vs AsyncOpenAI")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20, help="calls per batch")
    args = parser.parse_args()
    rows = run(args.rounds, args.calls)
    print(f"{'benchmark':<36} {'adapter µs':>11} {'raw µs':>9} {'ratio':>7}  target")
    for row in rows:
        if "us_per_delta" in row:
            print(f"{row['benchmark']:<36} {row['us_per_delta']:>11.2f} µs a delta")
            continue
        verdict = "ok" if row["ratio"] <= TARGET else "OVER"
        print(
            f"{row['benchmark']:<36} {row['us_per_call']:>11.1f} "
            f"{row['baseline_us_per_call']:>9.1f} {row['ratio']:>7.3f}  <= {TARGET} {verdict}"
        )


if __name__ == "__main__":
    main()
