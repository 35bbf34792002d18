"""A LlamaIndex Workflows user's port of a document-review ("corrective RAG") workflow to pyadk's
event-driven layer, end to end over real wires, following docs/llamaindex.md.

The LlamaIndex workflow it ports::

    class ReviewFlow(Workflow):
        @step  # StartEvent(doc_id=..., question=...)
        async def retrieve(self, ctx, ev: StartEvent) -> GradeEvent | None:
            await ctx.store.set("expected", len(nodes)); ctx.write_event_to_stream(Progress(...))
            for node in nodes: ctx.send_event(GradeEvent(node=node))     # fan-out
        @step(retry_policy=ConstantDelayRetryPolicy(maximum_attempts=3))
        async def grade(self, ev: GradeEvent) -> GradedEvent: ...       # a flaky grader
        @step
        async def collect(self, ctx, ev: GradedEvent) -> DraftEvent | None:
            graded = ctx.collect_events(ev, [GradedEvent] * expected)   # fan-in
            ...  # FunctionAgent(tools=[define]) drafts the answer
        @step
        async def review(self, ctx, ev: DraftEvent) -> StopEvent:
            ctx.write_event_to_stream(InputRequiredEvent(...)); await ctx.wait_for_event(...)

The port (``ReviewFlow``):

1. ``retrieve`` (on ``InputEvent``, the record ``{"doc_id", "question"}``): streams a progress
   output and asks the library's ``retrieve`` tool, a real MCP server over stdio
   (``mcp_servers/library_server.py``), through the built-in tool action;
2. ``fan_out`` (on ``ToolResponseEvent``, its own request's only: the chat's tool rounds pass
   through it too): one ``Grade`` per passage, the count in sensory memory (``ctx.store``);
3. ``grade`` (on ``Grade``, retried): a grader that fails once for every passage ``#1``;
4. ``collect`` (on ``Graded``): the fan-in; once every passage is graded, a ``ChatRequestEvent``
   to the ``llm`` model over the real OpenAI wire server (``openai_server.py``), offering the
   library's ``define`` tool, which the model calls before it answers;
5. ``review`` (on ``ChatResponseEvent``): an answer resting on fewer than two relevant passages
   pauses for a person (``InputRequiredEvent``); the rest are published at once. Each document
   counts its answers in short-term memory (a ``Context`` kept across runs).

The person answers in another process (this file run as a script), which resumes the checkpoint
from the same SQLite file. The same agent then runs over a batch keyed by document id under
``LocalExecutionEnvironment``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from adk import (
    Interrupt,
    Message,
    Resources,
    RetryPolicy,
    Role,
    Runner,
    Session,
    ToolCall,
    run_usage,
)
from adk.actions import (
    RECORD_KEY,
    ActionAgent,
    ActionContext,
    AgentPlan,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import SQLiteCheckpointStore
from adk.execution import LocalExecutionEnvironment
from adk.mcp import StdioServer
from adk.models.openai import OpenAIChatModel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the reviewing process)

from openai_server import Call, OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIBRARY_SERVER = HERE / "mcp_servers" / "library_server.py"


# -- the workflow -----------------------------------------------------------------------------------


class Grade(Event):
    question: str
    node_id: str
    text: str


class Graded(Event):
    node_id: str
    relevant: bool


class Grader:
    """A grading service that drops the first request for every passage ``#1``."""

    def __init__(self) -> None:
        self.attempts: Counter[tuple[str, str]] = Counter()

    def grade(self, question: str, node_id: str, text: str) -> bool:
        self.attempts[(question, node_id)] += 1
        if node_id.endswith("#1") and self.attempts[(question, node_id)] == 1:
            raise ConnectionError("grader connection reset")
        words = {w for w in re.findall(r"[a-z]+", question.lower()) if len(w) >= 4}
        return any(word in text.lower() for word in words)


GRADER = Grader()
SKIPPED_ROUNDS: list[str] = []


class ReviewFlow(ActionAgent):
    @action(InputEvent)
    def retrieve(self, event: InputEvent, ctx: ActionContext) -> None:
        record = event.input  # the StartEvent's fields
        ctx.sensory_memory.set("request", record)
        ctx.send_event(OutputEvent(output={"step": "retrieve", "doc_id": record["doc_id"]}))
        arguments = json.dumps({"doc_id": record["doc_id"], "question": record["question"]})
        request = ToolRequestEvent(
            tool_calls=[ToolCall(id="retrieve-1", name="retrieve", arguments=arguments)],
            tools=["retrieve"],
        )
        ctx.sensory_memory.set("retrieval", request.id)
        ctx.send_event(request)

    @action(ToolResponseEvent)
    def fan_out(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        if event.request_id != ctx.sensory_memory.get("retrieval"):
            # A round of the drafting chat's tool calls: every action listening for
            # ToolResponseEvent gets those too, where a LlamaIndex FunctionAgent's stay inside.
            SKIPPED_ROUNDS.extend(m.name or "" for m in event.responses)
            return
        [response] = event.responses
        if response.metadata.get("is_error"):
            raise LookupError(response.content)
        passages = json.loads(response.content)["passages"]
        question = ctx.sensory_memory.get("request")["question"]
        ctx.sensory_memory.set("expected", len(passages))
        ctx.send_event(OutputEvent(output={"step": "grade", "passages": len(passages)}))
        for passage in passages:
            ctx.send_event(
                Grade(question=question, node_id=passage["node_id"], text=passage["text"])
            )

    @action(Grade, retry=RetryPolicy(max_attempts=3, initial_delay=0.001, jitter=False))
    async def grade(self, event: Grade, ctx: ActionContext) -> None:
        relevant = GRADER.grade(event.question, event.node_id, event.text)
        ctx.send_event(Graded(node_id=event.node_id, relevant=relevant))

    @action(Graded)
    def collect(self, event: Graded, ctx: ActionContext) -> None:
        found = ctx.collect_events(event, [Graded] * ctx.sensory_memory.get("expected"))
        if found is None:
            return
        graded = [g for g in found if isinstance(g, Graded)]
        relevant = [g.node_id for g in graded if g.relevant]
        ctx.sensory_memory.set("relevant", relevant)
        ctx.send_event(
            OutputEvent(
                output={
                    "step": "graded",
                    "collected": [g.node_id for g in graded],
                    "relevant": relevant,
                }
            )
        )
        request = ctx.sensory_memory.get("request")
        prompt = json.dumps({"question": request["question"], "passages": relevant})
        messages = [Message.system("Answer from the passages; define terms."), Message.user(prompt)]
        ctx.send_event(ChatRequestEvent(model="llm", messages=messages, tools=["define"]))

    @action(ChatResponseEvent)
    def review(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        draft = event.response.content
        relevant = ctx.sensory_memory.get("relevant")
        verdict = "auto"
        if len(relevant) < 2:  # weak support: a person reviews it (InputRequiredEvent)
            if ctx.resume is None:
                raise Interrupt({"prefix": "Publish this answer?", "draft": draft})
            verdict = "approved" if ctx.resume.data == "yes" else "rejected"
        request = ctx.sensory_memory.get("request")
        answered = ctx.short_term_memory.get("answered", [])
        ctx.short_term_memory.set("answered", [*answered, request["question"]])
        ctx.send_event(
            OutputEvent(
                output={
                    "doc_id": request["doc_id"],
                    "answer": draft,
                    "verdict": verdict,
                    "answered_before": answered,
                }
            )
        )


def start_event(**fields: object) -> Message:
    """LlamaIndex's ``workflow.run(**fields)`` as a Runner input (docs/llamaindex.md)."""
    return Message(role=Role.USER, content=json.dumps(fields), metadata={RECORD_KEY: fields})


class Drafter:
    """The drafting model on the wire: asks the glossary once, then answers from the passages.
    ``overloaded``: questions whose first request is a 503 (the model's retry policy takes it;
    a ``retry=`` on the action that sends the chat would not, see docs/llamaindex.md)."""

    def __init__(self, overloaded: frozenset[str] = frozenset()) -> None:
        self.overloaded = set(overloaded)
        self.unavailable = 0

    def __call__(self, body: Any) -> Wire:
        messages = body["messages"]
        assert [tool["function"]["name"] for tool in body["tools"]] == ["define"]
        asked = json.loads(messages[1]["content"])
        if asked["question"] in self.overloaded:
            self.overloaded.discard(asked["question"])
            self.unavailable += 1
            return Wire(status=503, error="overloaded, try again")
        if messages[-1]["role"] == "tool":
            cited = ", ".join(asked["passages"])
            return Wire(text=f"{asked['question']} -> {cited} ({messages[-1]['content']})")
        term = "notice" if "end" in asked["question"] else "rent"
        return Wire(tool_calls=[Call("define", json.dumps({"term": term}))], usage=(20, 5))


def build_resources(model_url: str) -> Resources:
    """The same resources in every process: the library over stdio, the model over the wire."""
    resources = Resources()
    resources.add_mcp("library", StdioServer(sys.executable, [str(LIBRARY_SERVER)]))
    resources.add_model("llm", OpenAIChatModel("gpt-test", base_url=model_url, api_key="sk-test"))
    return resources


# -- the trial --------------------------------------------------------------------------------------


async def test_a_review_workflow_streams_pauses_and_is_answered_in_another_process(
    tmp_path: Path,
) -> None:
    GRADER.__init__()  # type: ignore[misc]
    SKIPPED_ROUNDS.clear()
    plan = AgentPlan.compile(ReviewFlow("review_flow")).to_dict()
    assert plan["actions"]["grade"]["retry"]["max_attempts"] == 3
    question = "Are pets allowed in the flat?"
    drafter = Drafter(overloaded=frozenset({question}))
    async with OpenAIServer(respond=drafter) as server:
        resources = build_resources(server.base_url)
        session = Session()
        async with SQLiteCheckpointStore(tmp_path / "runs.db") as store:
            runner = Runner(ReviewFlow("review_flow"), resources=resources, checkpoint_store=store)
            streamed, asked, model_calls_by_then = [], None, []
            async with asyncio.timeout(60):  # Workflow(timeout=60)
                async for event in runner.run(
                    start_event(doc_id="lease-7", question=question),
                    checkpoint_id="review-lease-7",
                    session=session,
                ):
                    if event.output is not None:
                        streamed.append(event.output.custom)
                        model_calls_by_then.append(len(server.requests))
                    if event.action is not None and event.action.interrupted is not None:
                        asked = event.action.interrupted.points[0]
            await resources.aclose()

        # The steps streamed in order as each returned; the fan-in got every passage once, in
        # the order they were graded, though the grade of #1 failed once and was retried.
        nodes = [f"lease-7#{n}" for n in range(4)]
        assert streamed == [
            {"step": "retrieve", "doc_id": "lease-7"},
            {"step": "grade", "passages": 4},
            {"step": "graded", "collected": nodes, "relevant": ["lease-7#3"]},
        ]
        # Streamed as they came, not at the end: the graded step's output reached the caller
        # before the chat it sends asked the model anything.
        assert model_calls_by_then == [0, 0, 0]
        assert GRADER.attempts == {
            (question, node): 2 if node.endswith("#1") else 1 for node in nodes
        }
        # One relevant passage: the draft waits for a person, at the review action.
        assert asked is not None and asked.id == "agent:review_flow/action:review"
        assert asked.info == {
            "prefix": "Publish this answer?",
            "draft": f"{question} -> lease-7#3 (the monthly payment for the use of the property)",
        }
        assert "answered" not in session.get("memory:review_flow", {})
        # The chat asked the model twice, the glossary call, then the answer; the first request
        # met a 503, which the model's retry took (the chat runs after the action that sent it).
        assert drafter.unavailable == 1 and len(server.requests) == 3
        # The fan-out action, listening for ToolResponseEvent, was handed the chat's tool round
        # too, and passed it by its request id.
        assert SKIPPED_ROUNDS == ["define"]

        # Later, the reviewer's process answers from the same SQLite file.
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            server.base_url,
            str(tmp_path / "runs.db"),
            "review-lease-7",
            "yes",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},  # this checkout's adk
        )
        out, err = await child.communicate()
        assert child.returncode == 0, err.decode()
        # Nothing before the pause ran again: no model call, no grading, no retrieval.
        assert len(server.requests) == 3
    resumed = json.loads(out)
    assert resumed["streamed"] == [
        {
            "doc_id": "lease-7",
            "answer": asked.info["draft"],
            "verdict": "approved",
            "answered_before": [],
        }
    ]
    assert resumed["memory"] == {"answered": [question]}
    # The resumed run's usage counts the calls made before its pause (20+5 and 11+7).
    assert resumed["usage"] == {"input_tokens": 31, "output_tokens": 12, "total_tokens": 43}
    assert resumed["checkpoint_left"] is False


async def test_the_workflow_over_a_batch_keyed_by_document_runs_each_key_in_order(
    tmp_path: Path,
) -> None:
    GRADER.__init__()  # type: ignore[misc]
    batch = [
        {"doc_id": "lease-7", "question": "When is rent paid each month?"},
        {"doc_id": "nda-2", "question": "When does the agreement end?"},
        {"doc_id": "ghost-1", "question": "Anything at all?"},
        {"doc_id": "lease-7", "question": "How often does rent rise?"},
    ]
    async with OpenAIServer(respond=Drafter()) as server:
        env = LocalExecutionEnvironment(
            max_concurrency=4,
            on_error="emit",
            timeout=60,
            resources=build_resources(server.base_url),
            checkpoint_store=SQLiteCheckpointStore(tmp_path / "runs.db"),
        )
        outputs = env.from_list(batch, key="doc_id").apply(ReviewFlow("review_flow"))
        got = [output async for output in outputs]

        # Every record's progress and answer came, a key's in its records' order.
        def of(index: int) -> list[Any]:
            return [o.output for o in got if o.index == index and o.output is not None]

        assert [o.index for o in got if o.key == "lease-7"] == sorted(
            o.index for o in got if o.key == "lease-7"
        )
        assert of(0) == [
            {"step": "retrieve", "doc_id": "lease-7"},
            {"step": "grade", "passages": 4},
            {
                "step": "graded",
                "collected": [f"lease-7#{n}" for n in range(4)],
                "relevant": ["lease-7#0", "lease-7#2"],
            },
            {
                "doc_id": "lease-7",
                "answer": "When is rent paid each month? -> lease-7#0, lease-7#2 "
                "(the monthly payment for the use of the property)",
                "verdict": "auto",
                "answered_before": [],
            },
        ]
        # The key's second record saw the first's answer in short-term memory.
        assert of(3)[-1]["answered_before"] == ["When is rent paid each month?"]
        assert of(3)[-1]["verdict"] == "auto"
        # A document the library lacks fails its record alone, naming the action and why.
        [failed] = [o for o in got if o.error is not None]
        assert failed.key == "ghost-1" and "action 'fan_out'" in str(failed.error)
        assert "no document ghost-1 in the library" in str(failed.error)
        # Each record's grade of passage #1 failed once and was retried.
        assert sorted(
            count for (q, node), count in GRADER.attempts.items() if node.endswith("#1")
        ) == [2, 2, 2]
        # The weakly supported NDA answer waits for a person; the reviewer rejects it.
        [paused] = [o for o in got if o.interrupt is not None]
        assert paused.key == "nda-2" and paused.interrupt is not None
        assert paused.interrupt.points[0].info["draft"] == (
            "When does the agreement end? -> nda-2#1 "
            "(a written warning given before ending an agreement)"
        )
        [verdict] = await outputs.resume(paused, "no")
        await env.resources.aclose()
    assert verdict.output["verdict"] == "rejected" and verdict.resumed
    assert outputs.sessions["lease-7"]["memory:review_flow"]["answered"] == [
        "When is rent paid each month?",
        "How often does rent rise?",
    ]
    assert outputs.sessions["nda-2"]["memory:review_flow"]["answered"] == [
        "When does the agreement end?"
    ]
    assert "ghost-1" not in outputs.sessions or not outputs.sessions["ghost-1"].get(
        "memory:review_flow"
    )


async def review_elsewhere(model_url: str, path: Path, checkpoint_id: str, answer: str) -> None:
    """The reviewer's process: the same workflow over the same store, the answer as a resume."""
    resources = build_resources(model_url)
    async with SQLiteCheckpointStore(path) as store:
        runner = Runner(ReviewFlow("review_flow"), resources=resources, checkpoint_store=store)
        session = Session()
        events = runner.resume(checkpoint_id, answer, session=session)
        streamed = [event.output.custom async for event in events if event.output is not None]
        usage = run_usage(events)
        left = await store.get(checkpoint_id) is not None
    await resources.aclose()
    shown = {
        "streamed": streamed,
        "memory": session.get("memory:review_flow"),
        "usage": None
        if usage is None
        else usage.model_dump(include={"input_tokens", "output_tokens", "total_tokens"}),
        "checkpoint_left": left,
    }
    print(json.dumps(shown))


if __name__ == "__main__":
    asyncio.run(review_elsewhere(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]))
