"""A typed user's event-driven agent run over keyed records (checked by mypy --strict, not run)."""

from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import Any, assert_type

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider

from adk import ChatModel, Message, Prompt, Resources, RetryPolicy, Runner, Tool, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    AgentPlan,
    ChatRequestEvent,
    ChatResponseEvent,
    CompiledAction,
    Event,
    InputEvent,
    OutputEvent,
    ShortTermMemory,
)
from adk.actions import action as on
from adk.execution import KeyedOutput, KeyedOutputs, LocalExecutionEnvironment
from adk.testing import ScriptedModel


class Review(Event):
    product: str
    text: str


class LowScore(Event):
    product: str
    score: int


@tool
async def lookup_product(product_id: str) -> str:
    return product_id


class Analyst(ActionAgent):
    @on(InputEvent)
    async def start(self, event: InputEvent, ctx: ActionContext) -> None:
        review = event.input
        ctx.sensory_memory.set("review", review)
        ctx.send_event(
            ChatRequestEvent(
                model="analyst", messages=[Message.user(str(review))], tools=["lookup_product"]
            )
        )

    @on(ChatResponseEvent, retry=RetryPolicy(max_attempts=2))
    def score(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        assert_type(event.response, Message)
        memory = ctx.short_term_memory
        assert_type(memory, ShortTermMemory)
        scores: list[int] = [*memory.get("scores", []), len(event.response.content)]
        memory.set("scores", scores)
        ctx.send_event(OutputEvent(output=scores[-1]))
        if scores[-1] < 2:
            ctx.send_event(LowScore(product="x", score=scores[-1]))

    @on(LowScore)
    @staticmethod
    def alert(event: LowScore, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"ALERT {event.product}"))

    @on(LowScore, Review)
    async def collect(self, event: LowScore | Review, ctx: ActionContext) -> None:
        scores = ctx.collect_events(event, [LowScore] * 2, buffer_id="scores")
        if scores is not None:
            assert_type(scores, list[LowScore])
            print(scores[0].product)
        both = ctx.collect_events(event, [LowScore, Review])
        if both is not None:
            assert_type(both, list[Event])  # classes of two kinds: their common one
        model = await ctx.get_resource("analyst")
        assert_type(model, ChatModel)
        reply = await model.generate([Message.user("hi")])
        lookup = await ctx.get_resource("lookup_product", "tool")
        assert_type(lookup, Tool)
        prompt = await ctx.get_resource("greet", kind="prompt")
        assert_type(prompt, Prompt)
        print(reply.content, lookup.spec.name, await prompt.render(name="ann"))


# @action keeps the decorated function's signature: a wrong call is an error.
Analyst.alert(InputEvent(input="x"), None)  # type: ignore[arg-type]


def _by_product(review: Review) -> Hashable:
    return review.product


class KeyValueSessions:
    """A user's own session store (``adk.execution.SessionStore``)."""

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        return None

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        pass


async def main() -> None:
    resources = Resources()
    resources.add_model("analyst", ScriptedModel(["score: 5"]))
    resources.add_tool(lookup_product)
    agent = Analyst("reviews")
    plan = AgentPlan.compile(agent)
    print(plan.to_json(), [a.name for a in plan.actions])
    assert_type(plan.actions, tuple[CompiledAction, ...])  # a public protocol, no private class
    first: CompiledAction = plan.actions[0]
    assert_type(first.events, tuple[type[Event], ...])
    assert_type(first.describe(), dict[str, Any])

    reviews = [Review(product="lamp", text="fine"), Review(product="kettle", text="broke")]
    env = LocalExecutionEnvironment(
        resources=resources,
        max_concurrency=8,
        on_error="emit",
        tracer_provider=TracerProvider(),
        meter_provider=MeterProvider(),
    )
    # OpenTelemetry providers, as Runner takes them: a tracer where the meter goes is refused.
    LocalExecutionEnvironment(meter_provider=TracerProvider())  # type: ignore[arg-type]
    applied = env.from_list(reviews, key="product").apply(agent)
    assert_type(applied, KeyedOutputs[dict[Any, dict[str, Any]]])
    async with applied:
        async for output in applied:
            assert_type(output, KeyedOutput)
            assert_type(output.to_dict(), dict[str, Any])  # what a Flink job emits for it
            if output.checkpoint_id is not None:
                more = await applied.resume(output, True)
                assert_type(more, list[KeyedOutput])
    # The sessions each key's records left, read as the mapping given (or the dict made).
    for product, values in applied.sessions.items():
        print(product, values["memory:reviews"])
    sessions: dict[str, dict[str, Any]] = {}
    by_function = env.from_list(reviews, key=_by_product).apply(
        lambda: Analyst("x"), sessions=sessions
    )
    assert_type(by_function.sessions, dict[str, dict[str, Any]])
    in_store = env.from_list(reviews, key="product").apply(agent, sessions=KeyValueSessions())
    assert_type(in_store.sessions, KeyValueSessions)
    kept: KeyedOutputs = in_store  # a bare annotation stays valid
    print(kept, await batch(env, None), await batch(env, sessions))

    for output in await by_function.to_list():
        print(output.key, output.output)
    # They are produced on the event loop: a plain 'for' or list() is refused, as it fails.
    for output in env.from_list(reviews).apply(agent):  # type: ignore[attr-defined]
        print(output)

    result = await Runner(agent, resources=resources).invoke("a review")
    print(result.output)


async def batch(
    env: LocalExecutionEnvironment, sessions: MutableMapping[Any, dict[str, Any]] | None
) -> list[KeyedOutput]:
    """A helper of one's own passing on optional sessions."""
    outputs = env.from_list(["a"], key=str).apply(Analyst("x"), sessions=sessions)
    assert_type(outputs, KeyedOutputs[MutableMapping[Any, dict[str, Any]]])
    return await outputs.to_list()
