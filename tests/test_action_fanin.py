"""``ActionContext.collect_events``: LlamaIndex's fan-in for an ``ActionAgent``.

An action that fanned events out collects their answers: ``None`` until all expected events came,
then the events in the order expected. The collected events are one input's own, as sensory
memory is: saved with a pause and restored on resume (JSON, registered models through the
checkpoint codec), never seen by another record, undone with an action that raised (a retry, a
pause), so each event counts once.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from pydantic import BaseModel

from adk import Interrupt, Message, Resources, RetryPolicy, RunError, Runner, Session, Usage
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
from adk.checkpoint import InMemoryCheckpointStore, register_type
from adk.checkpoint.codec import CheckpointError, decode_checkpoint
from adk.execution import LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel

NOW = RetryPolicy(max_attempts=3, initial_delay=0, jitter=False)


class Part(Event):
    index: int
    text: str


class Answer(Event):
    index: int
    text: str


class Review(Event):
    verdict: str


class Urgent(Answer):
    """An answer of a kind of its own: it counts where an ``Answer`` is expected."""


class Fanout(ActionAgent):
    """Splits its input in parts, answers each, and collects the answers."""

    @action(InputEvent)
    def split(self, event: InputEvent, ctx: ActionContext) -> None:
        for index, text in enumerate(event.input.split()):
            ctx.send_event(Part(index=index, text=text))

    @action(Part)
    def answer(self, event: Part, ctx: ActionContext) -> None:
        ctx.send_event(Answer(index=event.index, text=event.text.upper()))

    @action(Answer)
    def join(self, event: Answer, ctx: ActionContext) -> None:
        found = ctx.collect_events(event, [Answer] * 3)
        if found is None:
            ctx.send_event(OutputEvent(output={"waiting": event.text}))
            return
        ctx.send_event(OutputEvent(output=[e.text for e in found if isinstance(e, Answer)]))


async def test_the_events_come_back_once_all_came_in_the_order_they_came() -> None:
    result = await Runner(Fanout("fan")).invoke("a b c")
    assert [e.output.custom for e in result.events if e.output] == [
        {"waiting": "A"},
        {"waiting": "B"},
        ["A", "B", "C"],
    ]


async def test_events_past_a_complete_set_wait_for_the_next_one() -> None:
    outputs = [
        e.output.custom
        for e in (await Runner(Fanout("fan")).invoke("a b c d e f g")).events
        if e.output
    ]
    assert [o for o in outputs if isinstance(o, list)] == [["A", "B", "C"], ["D", "E", "F"]]


async def test_a_list_of_types_comes_back_in_its_order_and_a_subclass_counts() -> None:
    class Join(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(Review(verdict="good"))
            ctx.send_event(Urgent(index=1, text="sub"))
            ctx.send_event(Answer(index=0, text="base"))

        @action(Answer, Review)
        def join(self, event: Answer | Review, ctx: ActionContext) -> None:
            # The Urgent came before the Answer: the Urgent slot chooses first and takes it.
            found = ctx.collect_events(event, [Answer, Review, Urgent])
            if found is not None:
                ctx.send_event(OutputEvent(output=[type(e).__name__ for e in found]))

    result = await Runner(Join("join")).invoke("go")
    assert result.output == ["Answer", "Review", "Urgent"]


async def test_a_buffer_id_keeps_one_fan_in_per_correlation_id() -> None:
    class Tagged(Event):
        query: str
        text: str

    class PerQuery(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            for text in ("q1-a", "q2-a", "q1-b", "q2-b"):
                ctx.send_event(Tagged(query=text[:2], text=text))

        @action(Tagged)
        def join(self, event: Tagged, ctx: ActionContext) -> None:
            found = ctx.collect_events(event, [Tagged, Tagged], buffer_id=event.query)
            if found is not None:
                ctx.send_event(OutputEvent(output=[e.text for e in found if isinstance(e, Tagged)]))

    result = await Runner(PerQuery("per_query")).invoke("go")
    assert [e.output.custom for e in result.events if e.output] == [
        ["q1-a", "q1-b"],
        ["q2-a", "q2-b"],
    ]


async def test_two_actions_share_a_named_buffer() -> None:
    class Shared(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(Answer(index=0, text="x"))
            ctx.send_event(Review(verdict="ok"))

        @action(Answer)
        def on_answer(self, event: Answer, ctx: ActionContext) -> None:
            self._join(ctx, event)

        @action(Review)
        def on_review(self, event: Review, ctx: ActionContext) -> None:
            self._join(ctx, event)

        def _join(self, ctx: ActionContext, event: Event) -> None:
            found = ctx.collect_events(event, [Answer, Review], buffer_id="pair")
            if found is not None:
                ctx.send_event(OutputEvent(output=ctx.action_name))

    assert (await Runner(Shared("shared")).invoke("go")).text == "on_review"


async def test_collecting_the_same_event_twice_does_not_fill_two_places() -> None:
    class Twice(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(Answer(index=0, text="a"))

        @action(Answer)
        def join(self, event: Answer, ctx: ActionContext) -> None:
            ctx.collect_events(event, [Answer] * 2)
            found = ctx.collect_events(event, [Answer] * 2)
            ctx.send_event(OutputEvent(output=found))

    # One answer is one arrival: not [a, a].
    assert (await Runner(Twice("twice")).invoke("go")).output is None


class Urgency(Event):
    """A base class none of whose own instances is sent: its subclasses are."""

    level: int


class High(Urgency):
    pass


class Low(Urgency):
    pass


async def test_an_expected_base_class_is_taken_when_the_action_takes_its_subclasses() -> None:
    """Expecting ``[Urgency] * 2`` where the action listens for ``High`` and ``Low``: each arrival
    is an ``Urgency`` and fills a place (a subclass counts for its class), so the set completes.
    It was refused as a class the action does not take, which only a class with no subclass
    the action takes is."""

    class Triage(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(High(level=2))
            ctx.send_event(Low(level=1))

        @action(High, Low)
        def join(self, event: Urgency, ctx: ActionContext) -> None:
            found = ctx.collect_events(event, [Urgency] * 2)
            if found is not None:
                ctx.send_event(OutputEvent(output=[type(e).__name__ for e in found]))

    assert (await Runner(Triage("triage")).invoke("go")).output == ["High", "Low"]


# -- misuse, refused where the user calls it -----------------------------------------------------
def _refusing(expected: Any, event: Any = None, **kwargs: Any) -> ActionAgent:
    class Wrong(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(Answer(index=0, text="a"))

        @action(Answer)
        def join(self, answer: Answer, ctx: ActionContext) -> None:
            ctx.collect_events(answer if event is None else event, expected, **kwargs)

    return Wrong("wrong")


@pytest.mark.parametrize(
    ("expected", "event", "kwargs", "problem"),
    [
        (Answer, None, {}, "expected is a list of event classes, one per event to wait for"),
        ([], None, {}, "expected is empty"),
        ([Answer, str], None, {}, "expected holds <class 'str'>, which is no Event class"),
        ([Review], None, {}, "Answer is none of the expected events (Review)"),
        (
            [Answer, Review],
            None,
            {},
            "the action does not take Review, so none could be collected and the fan-in would",
        ),
        (
            [Answer, Part, Review],
            None,
            {"buffer_id": "x"},
            "no action of the agent takes Part, Review, so none could be collected",
        ),
        ([Answer], "not an event", {}, "its first argument is the event to collect"),
        ([Answer], None, {"buffer_id": 7}, "buffer_id is a str, got 7"),
    ],
)
async def test_what_could_never_complete_is_refused_where_it_is_called(
    expected: Any, event: Any, kwargs: dict[str, Any], problem: str
) -> None:
    with pytest.raises(RunError) as caught:
        await Runner(_refusing(expected, event, **kwargs)).invoke("go")
    message = str(caught.value)
    assert problem in message
    assert "collect_events" in message
    assert "join" in message  # the action, where the call is


async def test_a_fan_in_left_incomplete_is_logged_naming_what_came(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="adk.actions"):
        result = await Runner(Fanout("fan")).invoke("a b")
    assert [e.output.custom for e in result.events if e.output] == [
        {"waiting": "A"},
        {"waiting": "B"},
    ]
    [record] = caplog.records
    assert "fan-in 'action:join' incomplete: 2 event(s) collected (Answer, Answer)" in (
        record.getMessage()
    )


# -- retries and pauses: each event counts once -------------------------------------------------
class Flaky(ActionAgent):
    """Collects two answers; an attempt fails after collecting: the first answer's first
    attempt, and ``complete_failures`` attempts that found the set complete."""

    def __init__(self, name: str, complete_failures: int) -> None:
        super().__init__(name)
        self.complete_failures = complete_failures
        self.first_failed = False

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(Answer(index=0, text="a"))
        ctx.send_event(Answer(index=1, text="b"))

    @action(Answer, retry=NOW)
    def join(self, event: Answer, ctx: ActionContext) -> None:
        found = ctx.collect_events(event, [Answer] * 2)
        if not self.first_failed:
            self.first_failed = True
            raise ConnectionError("flaked after collecting the first answer")
        if found is not None and self.complete_failures:
            self.complete_failures -= 1
            raise ConnectionError("flaked after taking the set out")
        if found is not None:
            ctx.send_event(OutputEvent(output=[e.text for e in found if isinstance(e, Answer)]))


@pytest.mark.parametrize("complete_failures", [0, 1, 2])
async def test_a_retried_action_collects_once(complete_failures: int) -> None:
    # Each failed attempt's collecting is undone: the set taken out by an attempt that then
    # failed is put back, so the answers come out once each, neither lost nor twice.
    agent = Flaky("flaky", complete_failures)
    outputs = [e.output.custom for e in (await Runner(agent).invoke("go")).events if e.output]
    assert outputs == [["a", "b"]]


class Tally(BaseModel):
    count: int


register_type(Tally, "tests.fanin.Tally")


class Scored(Event):
    """An event with a field that may hold anything: a registered model in it is saved tagged."""

    index: int
    payload: Any = None


class Approving(ActionAgent):
    """Collects three scored events; pauses at the second for a person's yes."""

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        for index in range(3):
            ctx.send_event(Scored(index=index, payload=Tally(count=index)))

    @action(Scored)
    def join(self, event: Scored, ctx: ActionContext) -> None:
        found = ctx.collect_events(event, [Scored] * 3)
        if event.index == 1 and ctx.resume is None:
            raise Interrupt({"approve": event.index})
        if found is not None:
            payloads = [e.payload for e in found if isinstance(e, Scored)]
            assert all(isinstance(p, Tally) for p in payloads), payloads
            ctx.send_event(OutputEvent(output=[p.count for p in payloads]))


async def test_a_pause_mid_fan_in_saves_the_collected_events_and_the_resume_restores_them() -> None:
    store = InMemoryCheckpointStore()
    paused = await Runner(Approving("approving"), checkpoint_store=store).invoke(
        "go", checkpoint_id="c1"
    )
    assert paused.interrupt is not None
    text = ((await store.get("c1")) or b"").decode()
    # The first event waits in the fan-in, as JSON, its registered model tagged; the paused
    # action's own collecting (the second event) was undone, as its other writes are.
    assert text.count('"tests.fanin.Tally"') == 3  # one collected, the paused event, one queued
    state = decode_checkpoint(text.encode(), "c1")["states"]["agent:approving"][""]
    [waiting] = state["collected"]["action:join"]
    assert waiting["fields"]["index"] == 0
    resumed = Runner(Approving("approving"), checkpoint_store=store)
    done = await resumed.invoke_resume("c1", "yes")
    assert done.output == [0, 1, 2]  # each once: the paused event was not collected twice


async def test_a_collected_event_of_an_unregistered_model_fails_the_pause_naming_the_field() -> (
    None
):
    class Loose(BaseModel):
        n: int

    class Carrying(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(Scored(index=0, payload=Loose(n=1)))
            ctx.send_event(Scored(index=1))

        @action(Scored)
        def join(self, event: Scored, ctx: ActionContext) -> None:
            ctx.collect_events(event, [Scored] * 3)
            if event.index == 1:
                raise Interrupt("wait")

    with pytest.raises(RunError) as caught:
        await Runner(Carrying("carrying")).invoke("go")
    assert "Scored.payload of a paused agent" in str(caught.value)


@pytest.mark.parametrize(
    ("collected", "complaint"),
    [
        ({"b": 1}, "'collected' must map fan-in buffer ids to lists of events"),
        ([], "'collected' must map fan-in buffer ids to lists of events"),
        ({"b": [{"type": "x.Gone", "fields": {}}]}, "none of its actions takes"),
        ({"b": [{"type": "test_action_fanin.Scored", "fields": {}}]}, "event is invalid"),
    ],
)
async def test_a_saved_fan_in_that_does_not_fit_fails_the_resume_and_keeps_the_checkpoint(
    collected: Any, complaint: str
) -> None:
    store = InMemoryCheckpointStore()
    await Runner(Approving("approving"), checkpoint_store=store).invoke("go", checkpoint_id="c1")
    async with rewrite_checkpoint(store, "c1") as body:
        body["states"]["agent:approving"][""]["collected"] = collected
    with pytest.raises(RunError) as raised:
        await Runner(Approving("approving"), checkpoint_store=store).invoke_resume("c1", "yes")
    cause = raised.value.__cause__
    assert isinstance(cause, CheckpointError)
    assert "agent 'approving'" in str(cause) and complaint in str(cause)
    assert await store.get("c1") is not None


async def test_collected_chat_replies_restored_on_resume_count_their_usage_once() -> None:
    """Two chats fanned out, their responses collected; the pause comes as the second arrives,
    the first waiting in the fan-in. The restored first reply was counted before the pause:
    output by the action after the resume, it must not count again."""

    class Chats(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            for text in ("a", "b"):
                ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user(text)]))

        @action(ChatResponseEvent)
        def join(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            found = ctx.collect_events(event, [ChatResponseEvent] * 2)
            if found is None:
                return
            if ctx.resume is None:
                raise Interrupt("both came: publish them?")
            for response in found:
                assert isinstance(response, ChatResponseEvent)
                ctx.send_event(OutputEvent(output=response.response))

    def resources() -> Resources:
        found = Resources()
        found.add_model(
            "m",
            ScriptedModel(
                [
                    Reply("A", usage=Usage(input_tokens=10, output_tokens=1, total_tokens=11)),
                    Reply("B", usage=Usage(input_tokens=20, output_tokens=2, total_tokens=22)),
                ]
            ),
        )
        return found

    store = InMemoryCheckpointStore()
    first = await Runner(Chats("chats", resources=resources()), checkpoint_store=store).invoke(
        "go", checkpoint_id="c1"
    )
    assert first.interrupt is not None
    assert '"collected"' in ((await store.get("c1")) or b"").decode()
    runner = Runner(Chats("chats", resources=resources()), checkpoint_store=store)
    done = await runner.invoke_resume("c1", "ok")
    assert [e.message.content for e in done.events if e.message] == ["A", "B"]
    assert done.usage is not None
    assert done.usage.input_tokens == 30  # the run's, pause included: each reply counted once


# -- records of different keys never mix ---------------------------------------------------------
async def test_records_of_different_keys_and_of_one_key_keep_their_own_fan_ins() -> None:
    class PerRecord(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            for text in event.input["parts"]:
                ctx.send_event(Answer(index=0, text=text))

        @action(Answer)
        def join(self, event: Answer, ctx: ActionContext) -> None:
            found = ctx.collect_events(event, [Answer] * 2)
            if found is not None:
                ctx.send_event(OutputEvent(output=[e.text for e in found if isinstance(e, Answer)]))

    records = [
        {"user": "ann", "parts": ["a1"]},  # incomplete: dropped with its record's run
        {"user": "bob", "parts": ["b1", "b2"]},
        {"user": "ann", "parts": ["a2", "a3"]},
    ]
    env = LocalExecutionEnvironment(max_concurrency=4)
    outputs = env.from_list(records, key="user").apply(PerRecord("per_record"))
    found = await outputs.to_list()
    assert [(o.key, o.output) for o in found] == [("bob", ["b1", "b2"]), ("ann", ["a2", "a3"])]
    # Nothing of a fan-in is kept in a key's session.
    assert all(not values for values in outputs.sessions.values())


async def test_a_paused_records_fan_in_is_not_reached_by_its_keys_next_records() -> None:
    store = InMemoryCheckpointStore()
    env = LocalExecutionEnvironment(checkpoint_store=store)

    class Keyed(ActionAgent):
        @action(InputEvent)
        def start(self, event: InputEvent, ctx: ActionContext) -> None:
            for index in range(3):
                ctx.send_event(Scored(index=index, payload=event.input["tag"]))

        @action(Scored)
        def join(self, event: Scored, ctx: ActionContext) -> None:
            found = ctx.collect_events(event, [Scored] * 3)
            if event.index == 1 and event.payload == "first" and ctx.resume is None:
                raise Interrupt("approve")
            if found is not None:
                ctx.send_event(
                    OutputEvent(output=[e.payload for e in found if isinstance(e, Scored)])
                )

    records = [{"user": "ann", "tag": "first"}, {"user": "ann", "tag": "second"}]
    outputs = env.from_list(records, key="user").apply(Keyed("keyed"))
    [paused, second] = await outputs.to_list()
    assert paused.interrupt is not None
    assert second.output == ["second"] * 3
    [resumed] = await outputs.resume(paused, "yes")
    assert resumed.output == ["first"] * 3


async def test_a_session_kept_across_runs_holds_no_fan_in() -> None:
    session = Session()
    runner = Runner(Fanout("fan"))
    await runner.invoke("a b", session=session)  # incomplete: dropped with the run
    result = await runner.invoke("c d e", session=session)
    assert result.output == ["C", "D", "E"]
    assert dict(session) == {}
