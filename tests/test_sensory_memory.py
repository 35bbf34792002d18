"""``ctx.sensory_memory``: one input's own memory (Flink Agents' sensory memory), kept across its
pause while the key's other records run, and gone when the run ends.

Flink Agents' quickstart keeps the review's id in short-term memory when the review arrives and
reads it back when the model answers. Ported as it is, that breaks once a record pauses: the key's
next records run during the pause and replace the id, and the resumed record reports another
review's id. Sensory memory is where such a value belongs.
"""

from __future__ import annotations

import json

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import wire_model
from openai_server import Call as OpenAICall
from openai_server import OpenAIServer
from openai_server import Reply as OpenAIReply
from pydantic import BaseModel

from adk import CheckpointError, Interrupt, Message, Resources, RunError, Runner, Session, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    ActionError,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import LocalExecutionEnvironment


class ProductReview(BaseModel):
    id: str
    product: str
    review: str


@tool(require_approval=True)
async def notify_shipping_manager(id: str, review: str) -> str:
    """Tell the shipping manager about a review that reports shipping damage."""
    return "notified"


class ReviewAnalysis(ActionAgent):
    """The quickstart's review analysis: the review's id in sensory memory, each product's scores
    in short-term memory."""

    @action(InputEvent)
    @staticmethod
    def process_input(event: InputEvent, ctx: ActionContext) -> None:
        review = ProductReview.model_validate(event.input)
        ctx.sensory_memory.set("id", review.id)
        content = json.dumps({"id": review.id, "review": review.review})
        ctx.send_event(
            ChatRequestEvent(
                model="review_analysis_model",
                messages=[Message.user(content)],
                tools=["notify_shipping_manager"],
            )
        )

    @action(ChatResponseEvent)
    @staticmethod
    def process_chat_response(event: ChatResponseEvent, ctx: ActionContext) -> None:
        score = json.loads(event.response.content)["score"]
        memory = ctx.short_term_memory
        memory.set("scores", [*memory.get("scores", []), score])
        ctx.send_event(OutputEvent(output={"id": ctx.sensory_memory.get("id"), "score": score}))


async def test_a_paused_record_reads_its_own_sensory_memory_after_later_records_of_its_key() -> (
    None
):
    damaged = '{"id": "r1", "review": "box damaged"}'
    server = OpenAIServer(
        [
            OpenAIReply(tool_calls=[OpenAICall("notify_shipping_manager", damaged)]),
            OpenAIReply(text='{"score": 5}'),  # r2, while r1 waits for its approval
            OpenAIReply(text='{"score": 1}'),  # r1, approved
        ]
    )
    async with (
        server,
        wire_model(server, name="qwen") as model,
    ):
        resources = Resources()
        resources.add_model("review_analysis_model", model)
        resources.add_tool(notify_shipping_manager)
        env = LocalExecutionEnvironment(
            resources=resources, checkpoint_store=InMemoryCheckpointStore(), max_concurrency=1
        )
        reviews = [
            ProductReview(id="r1", product="kettle", review="box damaged"),
            ProductReview(id="r2", product="kettle", review="great"),
        ]
        applied = env.from_list(reviews, key="product").apply(ReviewAnalysis("review_analysis"))
        paused, second = await applied.to_list()
        assert paused.checkpoint_id is not None and second.output == {"id": "r2", "score": 5}

        [resumed] = await applied.resume(paused, {"approved": True})

    assert resumed.output == {"id": "r1", "score": 1}  # not r2's id, which ran meanwhile
    # The key keeps its short-term memory only: sensory memory ended with each run.
    assert applied.sessions == {"kettle": {"memory:review_analysis": {"scores": [5, 1]}}}


class Noted(Event):
    text: str


class Notes(ActionAgent):
    """Writes sensory memory in one action, then in the action that pauses (whose writes are
    undone, as it runs again on resume), and outputs what it holds."""

    @action(InputEvent)
    def note(self, event: InputEvent, ctx: ActionContext) -> None:
        assert ctx.sensory_memory.get("seen") is None  # each run starts with none
        ctx.sensory_memory["seen"] = [event.input]
        ctx.send_event(Noted(text=event.input))

    @action(Noted)
    def confirm(self, event: Noted, ctx: ActionContext) -> None:
        memory = ctx.sensory_memory
        memory.set("seen", [*memory["seen"], "confirming"])
        if ctx.resume is None:
            raise Interrupt({"confirm": event.text})
        ctx.send_event(OutputEvent(output={"seen": memory["seen"], "answer": ctx.resume.data}))


async def test_sensory_memory_is_one_runs_own_and_an_interrupted_actions_writes_count_once() -> (
    None
):
    store = InMemoryCheckpointStore()
    runner = Runner(Notes("notes"), checkpoint_store=store)
    session = Session()

    paused = await runner.invoke("hello", session=session, checkpoint_id="c1")
    done = await runner.invoke_resume("c1", "yes", session=session)
    again = await runner.invoke("later", session=session, checkpoint_id="c2")

    assert paused.interrupt is not None
    assert done.events[-1].output is not None
    assert done.events[-1].output.custom == {"seen": ["hello", "confirming"], "answer": "yes"}
    assert again.interrupt is not None  # its own run: it saw no "seen" from the one before
    assert session.values == {}  # never in the session


async def test_a_saved_sensory_memory_that_is_not_a_mapping_fails_the_resume_and_is_kept() -> None:
    store = InMemoryCheckpointStore()
    runner = Runner(Notes("notes"), checkpoint_store=store)
    await runner.invoke("hello", checkpoint_id="c1")
    async with rewrite_checkpoint(store, "c1") as body:
        [state] = [s[""] for address, s in body["states"].items() if address == "agent:notes"]
        # saved with the pause, without the undone write
        assert state["sensory"] == {"seen": ["hello"]}
        state["sensory"] = ["hello"]

    with pytest.raises((RunError, CheckpointError)) as raised:
        await runner.invoke_resume("c1", "yes")

    error = raised.value.__cause__ if isinstance(raised.value, RunError) else raised.value
    assert isinstance(error, CheckpointError)
    assert "agent 'notes'" in str(error) and "'sensory'" in str(error)
    assert await store.get("c1") is not None


async def test_a_value_sensory_memory_cannot_hold_is_refused_naming_sensory_memory() -> None:
    """Sensory memory is a ``ShortTermMemory`` of the run's own, and its refusals named
    short-term memory: an action that wrote only to sensory memory was told its short-term
    memory could not hold the value, and looked for the write in the wrong place."""

    class Unregistered(BaseModel):
        text: str

    class Keeper(ActionAgent):
        @action(InputEvent)
        def keep(self, event: InputEvent, ctx: ActionContext) -> None:
            if event.input == "model":
                ctx.sensory_memory.set("review", Unregistered(text="the box arrived damaged"))
            else:
                ctx.sensory_memory[7] = "seven"  # type: ignore[index]

    for record, said in (
        ("model", "sensory memory 'review'"),
        ("key", "sensory memory keys are strings, got 7"),
    ):
        with pytest.raises(RunError) as raised:
            await Runner(Keeper("keeper")).invoke(record)
        error = raised.value.__cause__
        assert isinstance(error, ActionError) and isinstance(error.__cause__, TypeError)
        assert said in str(error.__cause__) and "short-term" not in str(error), error
