"""The fallback model of docs/models.md ("A second model when the first fails"), as a user copies
it, over two real OpenAI-wire servers: a pause on the first provider resumes on the second
without what the first bound to itself, the first model is given up on within its budget, a
stream that reached its reader is not asked again of the second, and an error names both
providers when both fail.

The class is read from the page itself (its snippet, without the ``asyncio.run(main())`` that
runs its demonstration), so the page and what these tests check cannot drift apart.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer, Reply

import adk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

PAGE = Path(__file__).resolve().parent.parent / "docs" / "models.md"
FAST = adk.RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002, jitter=False)
GUARD = 20.0  # seconds: a first model waited out in full fails the test instead of hanging it


def _documented_program() -> str:
    text = PAGE.read_text()
    section = text[text.index("### A second model when the first fails") :]
    code = re.search(r"^```python\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert code is not None and "class Fallback" in code.group(1)
    return code.group(1)


def _documented_fallback() -> Any:
    program = _documented_program().replace("asyncio.run(main())", "")
    namespace: dict[str, Any] = {"__name__": "docs_models_fallback"}
    exec(compile(program, str(PAGE), "exec"), namespace)
    return namespace["Fallback"]


Fallback = _documented_fallback()


def _definitions(source: str) -> dict[str, str]:
    """The top-level functions and classes of ``source``, each as its AST (formatting aside)."""
    return {
        node.name: ast.dump(node)
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def test_the_page_s_class_is_the_one_a_strict_user_s_mypy_checks() -> None:
    """tests/typed_usage/fallback_model.py is what CI's mypy --strict checks as a user's copy:
    the page's ``passes_on`` and ``Fallback`` must be it. A copy of the page's class failed
    strict mypy (``ChatModel`` has no ``model_name``, ``aclosing`` takes no ``AsyncIterator``,
    the second model's ``TimeoutError`` passed where a ``ModelError`` is read)."""
    page = _definitions(_documented_program())
    page.pop("main")  # the page's demonstration, run by test_doc_snippets
    typed = _definitions((Path(__file__).parent / "typed_usage" / "fallback_model.py").read_text())
    assert page == typed


@adk.tool(require_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


@pytest.fixture
async def servers() -> Any:
    async with OpenAIServer(thought_signatures=True) as first, OpenAIServer() as second:
        yield first, second


def fallback(first: OpenAIServer, second: OpenAIServer, **options: Any) -> Any:
    return Fallback(
        wire_model(first, name="gemini-a", retry=FAST),
        wire_model(second, name="gpt-b", retry=FAST),
        **options,
    )


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_run_paused_on_the_first_provider_resumes_on_the_second_without_its_signatures(
    servers: tuple[OpenAIServer, OpenAIServer], streaming: bool
) -> None:
    first, second = servers
    first.script(
        Reply(
            tool_calls=[Call("refund", '{"order": "A-1"}')], reasoning="hm", reasoning_details=True
        )
    )
    first.default = Reply(status=503, error="overloaded")  # down from the resume on
    second.script(Reply(text="Refunded."))
    runner = adk.Runner(
        ReActAgent("support", fallback(first, second), tools=[refund]), enable_streaming=streaming
    )
    async with runner:
        paused = await runner.invoke("refund A-1")
        assert paused.interrupt is not None
        done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.text == "Refunded."
    assert len(first.requests) == 1 + FAST.max_attempts  # the resume tried it first
    (sent,) = second.bodies
    call = sent["messages"][1]
    assert call["tool_calls"][0]["id"] == "call_0" and sent["messages"][2]["content"] == (
        "refunded A-1"
    )
    carried = json.dumps(sent)
    for bound in ("thought_signature", "extra_content", "reasoning_details", "kept_from"):
        assert bound not in carried, bound


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_first_model_gets_its_budget_then_the_second_answers(
    servers: tuple[OpenAIServer, OpenAIServer], streaming: bool
) -> None:
    """A 429 asking to wait 30 s: the first model's own retry would wait it out (twice), the
    budget hands the call to the second at once; its request to the first is let go."""
    first, second = servers
    first.default = Reply(status=429, error="slow down", retry_after="30")
    second.script(Reply(text="from the second"))
    agent = ReActAgent("support", fallback(first, second, first_within=0.2))
    async with adk.Runner(agent, enable_streaming=streaming) as runner, asyncio.timeout(GUARD):
        result = await runner.invoke("hi")
    assert result.text == "from the second"
    assert len(first.requests) == 1 and len(second.requests) == 1


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_first_model_still_waiting_when_its_budget_ends_lets_its_connection_go(
    servers: tuple[OpenAIServer, OpenAIServer], streaming: bool
) -> None:
    """The page says the budget's end closes a request still waiting on the first server: a
    server that took the request and answers nothing in time has the connection closed on it
    (not left open until its answer, or the client's 10 minutes)."""
    first, second = servers
    first.default = Reply(text="too late", delay=GUARD)
    second.script(Reply(text="from the second"))
    agent = ReActAgent("support", fallback(first, second, first_within=0.2))
    async with adk.Runner(agent, enable_streaming=streaming) as runner, asyncio.timeout(GUARD):
        assert (await runner.invoke("hi")).text == "from the second"
        for _ in range(500):  # the server sees the close as it reads it (the runner still open)
            if not first.open_connections:
                break
            await asyncio.sleep(0.01)
        assert first.open_connections == 0, "the connection was kept"
    assert len(first.requests) == 1 and first.stalls == 1


async def test_a_stream_that_reached_its_reader_is_not_asked_of_the_second(
    servers: tuple[OpenAIServer, OpenAIServer],
) -> None:
    first, second = servers
    first.script(Reply(tool_calls=[Call("refund", '{"order": "A-1234567"}')], break_after=4))
    second.default = Reply(text="never asked")
    agent = ReActAgent("support", fallback(first, second), tools=[refund])
    seen: list[str] = []
    async with adk.Runner(agent, enable_streaming=True) as runner:
        events = runner.run("refund A-1")
        errors = []
        async for event in events:
            stream = event.output.stream if event.output is not None else None
            if stream is not None:
                with pytest.raises(adk.ModelError, match=r"gemini-a.*mid-stream"):
                    async for chunk in stream:
                        seen.extend(call.arguments for call in chunk.tool_calls)
            if event.error is not None:
                errors.append(event.error)
    assert "".join(seen) and second.requests == []  # the reader had the first's chunks
    (error,) = errors
    assert "'gemini-a'" in error.message and "mid-stream" in error.message


@pytest.mark.parametrize("streaming", [False, True])
async def test_both_providers_down_is_an_error_naming_both(
    servers: tuple[OpenAIServer, OpenAIServer], streaming: bool
) -> None:
    first, second = servers
    first.default = Reply(status=503, error="overloaded")
    second.default = Reply(status=502, error="bad gateway", retry_after="0")
    agent = ReActAgent("support", fallback(first, second))
    async with adk.Runner(agent, enable_streaming=streaming) as runner:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke("my account number is 12345")
    message = failed.value.error.message
    assert "'gpt-b'" in message and "HTTP 502: bad gateway" in message
    assert "after gemini-a:" in message and "HTTP 503: overloaded" in message
    assert message.count("gave up after 2 attempts") == 2  # each provider's retries said
    assert "12345" not in message  # what the user said is not in what the service logs
    assert isinstance(failed.value.__cause__, adk.ModelError)
    assert failed.value.__cause__.status == 502
    assert failed.value.__cause__.retry_after == 0.0  # the second's, for the service to pass on


async def test_a_second_model_s_own_timeout_error_is_raised_as_it_is() -> None:
    """A second model raising ``TimeoutError`` of its own (a model of yours bounding its call)
    in a stream: before, the page's class took it for a ``ModelError`` naming both providers,
    and read its ``status``: an ``AttributeError`` hid it."""
    first = ScriptedModel([adk.ModelError("HTTP 503: overloaded", status=503)])
    second = ScriptedModel([TimeoutError("the second's own deadline")])
    agent = ReActAgent("support", Fallback(first, second))
    async with adk.Runner(agent, enable_streaming=True) as runner:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke("hi")
    assert type(failed.value.__cause__) is TimeoutError
    assert str(failed.value.__cause__) == "the second's own deadline"


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_first_model_s_own_bare_timeout_then_the_second_failing_names_both(
    streaming: bool,
) -> None:
    """A first model bounding its own call (``asyncio.timeout`` raises ``TimeoutError()``,
    no message) with no budget of the fallback's: when the second failed too, the page's
    ``_both_failed`` formatted ``first_within``, None, with ``:g``, and a ``TypeError`` took
    the place of both failures."""
    first = ScriptedModel([TimeoutError()])
    second = ScriptedModel([adk.ModelError("HTTP 502: bad gateway", status=502)])
    agent = ReActAgent("support", Fallback(first, second))
    async with adk.Runner(agent, enable_streaming=streaming) as runner:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke("hi")
    assert isinstance(failed.value.__cause__, adk.ModelError)
    assert failed.value.error.message == "HTTP 502: bad gateway (after scripted: no answer in time)"
