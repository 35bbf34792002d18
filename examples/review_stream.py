"""Product reviews as a keyed stream, offline: an event-driven agent per product (Flink Agents style).

    python examples/review_stream.py

``ReviewAnalyst`` is an ``ActionAgent``. For each review record it:

1. (``start``, on ``InputEvent``) asks the model ``analyst`` to score the review, offering it the
   ``lookup_product`` tool;
2. (built-in chat and tool actions) runs the tool call the model makes and gives it the result;
3. (``score``, on ``ChatResponseEvent``) parses the model's score, keeps a running average for the
   product in short-term memory (the review itself waits in sensory memory, the record's own), and
   sends a ``LowScore`` event when the score is low;
4. (``alert``, on ``LowScore``) outputs an alert; every review also outputs its score.

``LocalExecutionEnvironment`` runs the agent over the records keyed by product: the reviews of one
product in order (each sees the average the previous ones left), different products concurrently.
The model is an ``adk.testing.ScriptedModel`` that scores by keywords, so the example runs without
a model server; register ``adk.OpenAIChatModel(...)`` as ``analyst`` for a real one.
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from adk import Message, Resources, Role, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    AgentPlan,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from adk.execution import LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call

EXAMPLE_EXPECT = ("kettle-1: score 1, average 3.0", "ALERT lamp-7", "builtin.tools")


class Review(BaseModel):
    product: str
    text: str


class LowScore(Event):
    product: str
    score: int
    text: str


PRODUCTS = {"kettle-1": "electric kettle, 1.7 l", "lamp-7": "desk lamp, LED"}


@tool
async def lookup_product(product_id: str) -> str:
    """The catalogue entry of a product."""
    return PRODUCTS.get(product_id, "unknown product")


def keyword_scorer(messages: list[Message]) -> Reply:
    """Looks the product up first, then scores the review 1-5 by its words."""
    if messages[-1].role != Role.TOOL:
        product = messages[0].content.split("|")[0].strip()
        return Reply(tool_calls=[tool_call("lookup_product", {"product_id": product})])
    review = messages[0].content.lower()
    score = 1 if "broke" in review else 2 if "slow" in review else 5
    return Reply(text=f"score: {score} (product: {messages[-1].content})")


class ReviewAnalyst(ActionAgent):
    @action(InputEvent)
    async def start(self, event: InputEvent, ctx: ActionContext) -> None:
        review: Review = event.input
        prompt = Message.user(f"{review.product} | {review.text}")
        # This review, for ``score``: the record's own (sensory) memory, not the product's, which
        # the product's next review would replace if this one paused.
        ctx.sensory_memory.set("review", review.model_dump())
        ctx.send_event(
            ChatRequestEvent(model="analyst", messages=[prompt], tools=["lookup_product"])
        )

    @action(ChatResponseEvent)
    def score(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        score = int(event.response.content.split()[1])
        memory = ctx.short_term_memory
        scores = [*memory.get("scores", []), score]
        memory.set("scores", scores)
        review = ctx.sensory_memory.get("review")
        average = sum(scores) / len(scores)
        line = f"{review['product']}: score {score}, average {average:.1f}"
        ctx.send_event(OutputEvent(output=line))
        if score <= 2:
            ctx.send_event(LowScore(product=review["product"], score=score, text=review["text"]))

    @action(LowScore)
    @staticmethod
    def alert(event: LowScore, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"ALERT {event.product}: {event.text!r}"))


async def main() -> None:
    resources = Resources()
    resources.add_model("analyst", ScriptedModel(keyword_scorer))
    resources.add_tool(lookup_product)
    agent = ReviewAnalyst("reviews")
    print("plan:", ", ".join(a.name for a in AgentPlan.compile(agent).actions))

    reviews = [
        Review(product="kettle-1", text="Boils fast, love it"),
        Review(product="lamp-7", text="Bright and simple"),
        Review(product="kettle-1", text="The lid broke after a week"),
        Review(product="lamp-7", text="A bit slow to switch on"),
    ]
    env = LocalExecutionEnvironment(resources=resources, max_concurrency=8)
    applied = env.from_list(reviews, key="product").apply(agent)
    for output in await applied.to_list():
        print(f"[{output.key}] {output.output}")
    for product, values in applied.sessions.items():
        print(f"{product} memory: {values['memory:reviews']['scores']}")


if __name__ == "__main__":
    asyncio.run(main())
