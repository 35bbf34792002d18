"""The workloads in openai-agents: an ``Agent`` with a custom ``Model`` subclass as the fake model.

Tracing is disabled both globally (``set_tracing_disabled``) and per run (``RunConfig``). The SDK has
no sequential workflow agent, so scenario ``d`` is reported as unsupported.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib.metadata import version
from typing import Any

from agents import (
    Agent,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from .._harness import awaits_floor

VERSIONS = {"openai-agents": version("openai-agents"), "pydantic": version("pydantic")}
Variant = Callable[[], Awaitable[object]]
set_tracing_disabled(True)
RUN_CONFIG = RunConfig(tracing_disabled=True)


def _text(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class _FakeModel(Model):
    """Answers from ``reply(input)``; streaming is not used by these workloads. With ``yields``
    it first yields to the event loop, as a model awaiting its server does (in-flight runs)."""

    def __init__(self, yields: bool = False) -> None:
        self.yields = yields

    def reply(self, input: str | list[Any]) -> list[Any]:
        raise NotImplementedError

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        if self.yields:
            await asyncio.sleep(0)
        return ModelResponse(output=self.reply(input), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the benchmark does not stream")


class DoneModel(_FakeModel):
    def reply(self, input: str | list[Any]) -> list[Any]:
        return [_text("done")]


class AddModel(_FakeModel):
    """Calls ``add(a=1, b=2)``; once the tool answered, replies ``sum=<output>``."""

    def reply(self, input: str | list[Any]) -> list[Any]:
        last = input[-1] if isinstance(input, list) else None
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            return [_text(f"sum={last['output']}")]
        call = ResponseFunctionToolCall(
            id="fc_1",
            call_id="call_1",
            type="function_call",
            name="add",
            arguments='{"a": 1, "b": 2}',
        )
        return [call]


@function_tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def _variant(agent: Agent[Any], expected: str) -> Variant:
    async def one_run() -> None:
        result = await Runner.run(agent, "hi", run_config=RUN_CONFIG)
        if result.final_output != expected:
            raise AssertionError(f"expected {expected!r}, got {result.final_output!r}")

    return one_run


async def build(scenario: str) -> dict[str, Variant]:
    if scenario == "a":
        return {"run": _variant(Agent(name="bench", model=DoneModel()), "done")}
    if scenario == "b":
        return {"run": _variant(Agent(name="bench", model=AddModel(), tools=[add]), "sum=3")}
    if scenario == "a.inflight":
        agent = Agent(name="bench", model=DoneModel(yields=True))
        return {"run": _variant(agent, "done"), "floor": awaits_floor(1)}
    if scenario == "b.inflight":
        agent = Agent(name="bench", model=AddModel(yields=True), tools=[add])
        return {"run": _variant(agent, "sum=3"), "floor": awaits_floor(2)}
    if scenario == "d":
        raise NotImplementedError("openai-agents has no sequential workflow agent")
    raise NotImplementedError(f"openai-agents: no scenario {scenario!r}")
