"""A research pipeline, offline: plan, research in parallel, then write a cited brief.

    python examples/research_pipeline.py

The pipeline is a ``SequentialAgent``:

1. ``planner`` (a custom agent) picks the topics the question is about and keeps them in the run's
   session, where every later agent can read them;
2. ``researchers`` (a ``ParallelAgent`` of custom agents) look their topic up, concurrently; their
   notes reach the next step through the run's history;
3. ``writer`` (a ``ReActAgent``) reads the notes, calls the ``cite`` tool for each topic and writes
   the brief. Its model is an ``adk.testing.ScriptedModel`` that reasons over the messages it gets,
   so the example runs without a model server; swap in ``adk.OpenAIChatModel(...)`` for a real one.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    Message,
    ParallelAgent,
    RunContext,
    Runner,
    SequentialAgent,
    tool,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

# Read by tests/test_examples.py: text this example must print.
EXAMPLE_EXPECT = ("Plan: research solar, wind.", "[1] IEA Solar PV", "[2] GWEC Global Wind")

LIBRARY = {
    "solar": "panels convert 20-23% of sunlight; output peaks at midday and drops to zero at night",
    "wind": "turbines run day and night; capacity factors of 35-45% are common offshore",
    "hydro": "dams store energy as water and can follow demand within minutes",
}
SOURCES = {
    "solar": "IEA Solar PV Global Supply Chains (2022)",
    "wind": "GWEC Global Wind Report (2023)",
    "hydro": "IHA World Hydropower Outlook (2023)",
}


class Planner(BaseAgent):
    """Finds the topics a question is about and keeps them in the session."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        question = input.messages[-1].content.lower()
        topics = [topic for topic in LIBRARY if topic in question]
        ctx.session["topics"] = topics
        yield AgentEvent.of(f"Plan: research {', '.join(topics) or 'nothing'}.")


class Researcher(BaseAgent):
    """Looks one topic up, if the plan asks for it."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"{topic}_researcher", f"Researches {topic}")
        self.topic = topic

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if self.topic not in ctx.session["topics"]:
            yield AgentEvent.custom({"skipped": self.topic})
            return
        await asyncio.sleep(0)  # a real researcher would await a search API here
        yield AgentEvent.of(f"Notes on {self.topic}: {LIBRARY[self.topic]}")


@tool
def cite(topic: str) -> str:
    """Give the source to cite for a topic.

    Args:
        topic: The topic the notes are about, e.g. "solar".
    """
    if topic not in SOURCES:
        raise ValueError(f"no source for {topic!r}")
    return SOURCES[topic]


_NOTES = re.compile(r"Notes on (\w+): (.*?)\.$")


def writer_model(messages: list[Message]) -> Reply | str:
    """Stands in for a model: first asks for citations, then writes the brief from the notes."""
    notes: dict[str, str] = {}
    for message in messages:
        match = _NOTES.search(message.content)
        if match:
            notes[match.group(1)] = match.group(2)
    if messages[-1].role != "tool":
        calls = [tool_call("cite", {"topic": topic}) for topic in notes]
        return Reply(text="Checking sources.", tool_calls=calls)
    topic_of = {c.id: json.loads(c.arguments)["topic"] for m in messages for c in m.tool_calls}
    sources = {
        topic_of[m.tool_call_id]: m.content
        for m in messages
        if m.role == "tool" and m.tool_call_id in topic_of and not m.content.startswith("Error:")
    }
    lines, refs = [], []
    for i, (topic, text) in enumerate(notes.items(), 1):
        lines.append(f"- {topic}: {text} [{i}]")
        refs.append(f"[{i}] {sources.get(topic, 'no source found')}")
    return "Brief:\n" + "\n".join(lines) + "\nSources:\n" + "\n".join(refs)


def build_pipeline() -> SequentialAgent:
    researchers = ParallelAgent("researchers", [Researcher(t) for t in LIBRARY])
    writer = ReActAgent(
        "writer",
        ScriptedModel(writer_model),
        instruction="Write a short brief from the researchers' notes; cite each topic.",
        tools=[cite],
    )
    return SequentialAgent("research", [Planner("planner"), researchers, writer])


async def main() -> str:
    runner = Runner(build_pipeline())
    question = "How do solar and wind power compare for a small town?"
    print(f"Question: {question}\n")
    final = ""
    async for event in runner.run(question):
        where = event.agent_name
        if event.error is not None:
            print(f"[{where}] error: {event.error}")
        message = event.message
        if message is None:
            continue
        if message.role == "tool":
            print(f"[{where}] {message.name} returned: {message.content}")
            continue
        if message.content:
            print(f"[{where}] {message.content}")
            final = message.content
        for call in message.tool_calls:
            print(f"[{where}] calls {call.name}({call.arguments})")
    return final


if __name__ == "__main__":
    asyncio.run(main())
