"""A Google ADK port's after_agent_callback that replaces the agent's answer.

Google ADK's ``after_agent_callback`` may return ``Content`` to add to or replace what the agent
said. pyadk's ``after_agent`` only observes: by the time it runs, the answer has been streamed to
the reader, recorded in the history and stored under ``output_key``. The refusal of a value used
to say only that, so a port was left without a way; it now names the one that works, an
``after_model`` callback returning a ``Message`` for the agent's final reply, which is checked
here to replace the answer everywhere a reader finds it.
"""

from __future__ import annotations

import pytest

from adk import Callbacks, Message, Role, RunError, Runner, SequentialAgent
from adk.testing import ScriptedModel
from prebuilt import ReActAgent


async def test_a_value_from_after_agent_is_refused_naming_what_replaces_an_answer() -> None:
    def replace(agent: object, ctx: object, error: object) -> str:
        return "replaced"

    agent = ReActAgent("a", ScriptedModel(["x"]), callbacks=[Callbacks(after_agent=replace)])
    with pytest.raises(RunError, match="after_agent callbacks only observe") as failed:
        await Runner(agent).invoke("hi")
    message = str(failed.value)
    assert "return a Message from after_model for its final reply" in message
    assert "add a step after the agent" in message


@pytest.mark.parametrize("streaming", [False, True])
async def test_after_model_on_the_final_reply_replaces_the_answer_for_every_reader(
    streaming: bool,
) -> None:
    def sign(ctx: object, request: object, reply: Message) -> Message | None:
        if reply.tool_calls:  # not the final reply
            return None
        return Message.assistant(f"{reply.content} -- Acme support")

    writer = ReActAgent(
        "writer",
        ScriptedModel(["Refund sent."]),
        output_key="reply",
        callbacks=[Callbacks(after_model=sign)],
    )
    reader_model = ScriptedModel(["ok"])
    reader = ReActAgent("reader", reader_model)
    runner = Runner(SequentialAgent("desk", [writer, reader]), enable_streaming=streaming)
    result = await runner.invoke("refund me")
    assert result.session["reply"] == "Refund sent. -- Acme support"
    said = [m.content for m in result.messages if m.role == Role.USER]
    assert "For context: [writer] said: Refund sent. -- Acme support." in said
    seen = [m.content for m in reader_model.requests[0].messages]
    assert "For context: [writer] said: Refund sent. -- Acme support." in seen
