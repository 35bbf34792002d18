"""The workloads in google-adk: ``LlmAgent`` with a ``BaseLlm`` subclass as the fake model.

google-adk cannot run without a session service, so every run creates a fresh in-memory session
(``auto_create_session=True``) and deletes it afterwards: reusing one session would grow the history
every run, and keeping them all would grow the heap. No artifact or memory service, no plugins; no
OpenTelemetry SDK is configured, so its tracer is the API's no-op one.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Awaitable, Callable
from importlib.metadata import version
from typing import Any

from google.adk.agents import BaseAgent, LlmAgent, SequentialAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from .._harness import awaits_floor

VERSIONS = {"google-adk": version("google-adk"), "pydantic": version("pydantic")}
Variant = Callable[[], Awaitable[object]]


# A real model reports usage; without it google-adk logs a warning on every call.
USAGE = types.GenerateContentResponseUsageMetadata(
    prompt_token_count=1, candidates_token_count=1, total_token_count=2
)


def _response(part: types.Part) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=USAGE)


class DoneLlm(BaseLlm):
    """Every call answers "done". With ``yields`` the fake models first yield to the event loop,
    as a model awaiting its server does (in-flight runs)."""

    model: str = "bench-done"
    yields: bool = False

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.yields:
            await asyncio.sleep(0)
        yield _response(types.Part(text="done"))


class AddLlm(BaseLlm):
    """Calls ``add(a=1, b=2)``; once the tool answered, replies ``sum=<result>``."""

    model: str = "bench-add"
    yields: bool = False

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if self.yields:
            await asyncio.sleep(0)
        last = llm_request.contents[-1]
        response = last.parts[0].function_response if last.parts else None
        if response is not None:
            text = f"sum={response.response['result']}"
            yield _response(types.Part(text=text))
            return
        call = types.FunctionCall(id="call_1", name="add", args={"a": 1, "b": 2})
        yield _response(types.Part(function_call=call))


async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


class Step(BaseAgent):
    """A trivial workflow step: one model-role message."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        yield Event(
            invocation_id=ctx.invocation_id,
            author=self.name,
            content=types.Content(role="model", parts=[types.Part(text="ok")]),
        )


_ids = itertools.count()


def _runner_variant(agent: Any, expected: str | None, events: int | None = None) -> Variant:
    sessions = InMemorySessionService()
    runner = Runner(
        agent=agent, app_name="bench", session_service=sessions, auto_create_session=True
    )
    message = types.Content(role="user", parts=[types.Part(text="hi")])

    async def one_run() -> None:
        session_id = f"s{next(_ids)}"
        texts: list[str] = []
        count = 0
        async for event in runner.run_async(
            user_id="u", session_id=session_id, new_message=message
        ):
            count += 1
            if event.content and event.content.parts and event.content.parts[0].text:
                texts.append(event.content.parts[0].text)
        await sessions.delete_session(app_name="bench", user_id="u", session_id=session_id)
        if expected is not None and (not texts or texts[-1] != expected):
            raise AssertionError(f"expected {expected!r}, got {texts!r}")
        if events is not None and count != events:
            raise AssertionError(f"expected {events} events, got {count}")

    return one_run


async def build(scenario: str) -> dict[str, Variant]:
    if scenario == "a":
        return {"run": _runner_variant(LlmAgent(name="bench", model=DoneLlm()), "done")}
    if scenario == "b":
        agent = LlmAgent(name="bench", model=AddLlm(), tools=[add])
        return {"run": _runner_variant(agent, "sum=3")}
    if scenario == "a.inflight":
        agent = LlmAgent(name="bench", model=DoneLlm(yields=True))
        return {"run": _runner_variant(agent, "done"), "floor": awaits_floor(1)}
    if scenario == "b.inflight":
        agent = LlmAgent(name="bench", model=AddLlm(yields=True), tools=[add])
        return {"run": _runner_variant(agent, "sum=3"), "floor": awaits_floor(2)}
    if scenario == "d":
        seq = SequentialAgent(name="seq", sub_agents=[Step(name=f"step{i}") for i in range(10)])
        return {"run": _runner_variant(seq, "ok", events=10)}
    raise NotImplementedError(f"google-adk: no scenario {scenario!r}")
