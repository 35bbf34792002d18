"""Flink Agents' review-analysis quickstart, ported, with a person approving each notification.

    python examples/review_approvals.py

Reviews arrive from an async source (a broker, say), keyed by product. ``ReviewAnalysis`` is an
``ActionAgent``: it asks the model ``review_analysis_model`` to score each review, and the model
may call ``notify_shipping_manager``, a tool a person must approve (``require_approval=True``).
A review waiting for approval does not hold up its product: the product's next reviews run at
once, and the loop below approves each pause as it comes (``outputs.resume``), which runs the
paused review as a review of its product.

Where the quickstart keeps the review's id in short-term memory, this keeps it in sensory memory,
the record's own: a paused review's product has moved on by the time it resumes, and short-term
memory (kept per product) would give it the id of the review that ran meanwhile. The scores of
each product stay in short-term memory. A reply that is not JSON fails its review only
(``on_error="emit"``). The model is an ``adk.testing.ScriptedModel`` that reads the review, so the
example runs offline; register an ``adk.OpenAIChatModel(...)`` under the same name for a real one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from pydantic import BaseModel

from adk import Message, Resources, Role, tool
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
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call

EXAMPLE_EXPECT = ("r1 score 1 ['shipping damage']", "shipping manager told of r1", "failed r3")


class ProductReview(BaseModel):
    id: str
    product: str
    review: str


class Unsatisfied(Event):
    review_id: str
    reasons: list[str]


@tool(require_approval=True)
async def notify_shipping_manager(id: str, review: str) -> str:
    """Tell the shipping manager about a review that reports damage in shipping."""
    print(f"shipping manager told of {id}")
    return "notified"


def analyst(messages: list[Message]) -> Reply:
    """Notifies the shipping manager of a damaged parcel, then scores; answers one review with
    text that is not JSON."""
    if messages[-1].role == Role.TOOL:
        return Reply(text=json.dumps({"score": 1, "reasons": ["shipping damage"]}))
    review = json.loads(messages[-1].content)
    if "damaged" in review["review"]:
        return Reply(tool_calls=[tool_call("notify_shipping_manager", review)])
    if "?" in review["review"]:
        return Reply(text="I am not sure.")
    return Reply(text=json.dumps({"score": 5, "reasons": []}))


class ReviewAnalysis(ActionAgent):
    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: ActionContext) -> None:
        review = ProductReview.model_validate(event.input)
        ctx.sensory_memory.set("id", review.id)  # this review's own, kept across its pause
        content = json.dumps({"id": review.id, "review": review.review})
        request = ChatRequestEvent(
            model="review_analysis_model",
            messages=[Message.user(content)],
            tools=["notify_shipping_manager"],
        )
        ctx.send_event(request)

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: ActionContext) -> None:
        analysis = json.loads(event.response.content)  # not JSON: this review fails
        review_id = ctx.sensory_memory.get("id")
        scores = ctx.short_term_memory
        scores.set("scores", [*scores.get("scores", []), analysis["score"]])
        ctx.send_event(
            OutputEvent(output=f"{review_id} score {analysis['score']} {analysis['reasons']}")
        )
        if analysis["reasons"]:
            ctx.send_event(Unsatisfied(review_id=review_id, reasons=analysis["reasons"]))

    @action(Unsatisfied)
    @staticmethod
    def alert(event: Unsatisfied, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"ALERT {event.review_id}: {', '.join(event.reasons)}"))


async def reviews() -> AsyncIterator[ProductReview]:
    """The source: reviews as a broker would deliver them."""
    for n, (product, text) in enumerate(
        [
            ("kettle", "the box arrived damaged"),
            ("kettle", "boils fast"),
            ("lamp", "is it dimmable?"),
            ("lamp", "bright"),
        ],
        start=1,
    ):
        await asyncio.sleep(0)
        yield ProductReview(id=f"r{n}", product=product, review=text)


async def main() -> None:
    resources = Resources()
    resources.add_model("review_analysis_model", ScriptedModel(analyst))
    resources.add_tool(notify_shipping_manager)
    env = LocalExecutionEnvironment(
        resources=resources,
        checkpoint_store=InMemoryCheckpointStore(),
        max_concurrency=2,
        on_error="emit",
    )
    outputs = env.from_list(reviews(), key="product").apply(ReviewAnalysis("review_analysis"))
    async with outputs:
        async for output in outputs:
            if output.error is not None:
                print(f"[{output.key}] failed {output.record.id}: {output.error.message[:60]}...")
            elif output.interrupt is not None:
                [point] = output.interrupt.points
                print(f"[{output.key}] waiting for approval: {point.info['arguments']}")
                for resumed in await outputs.resume(output, {"approved": True}):
                    print(f"[{resumed.key}] (approved) {resumed.output}")
            else:
                print(f"[{output.key}] {output.output}")
    for product, values in outputs.sessions.items():
        print(f"{product} scores: {values['memory:review_analysis']['scores']}")


if __name__ == "__main__":
    asyncio.run(main())
