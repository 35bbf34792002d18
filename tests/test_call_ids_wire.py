"""Tool-call ids every provider takes.

Anthropic and AWS Bedrock (also behind OpenRouter, LiteLLM or another OpenAI-compatible proxy)
take tool-call ids matching only ``^[a-zA-Z0-9_-]+$`` (some proxies: at most 64 characters).
pyadk made ids of its own as ``<id>~<n>`` (a server numbering each reply's calls ``call_0``, two
calls of a reply sharing one), and a history holding one, carried to such a provider (a model
switch, a fallback model, a resume with another model configured), was refused with a 400 and
the run failed; so was a history holding another server's id with ``.``, ``:`` or ``|`` (Kimi's
``functions.add:0``) or a longer one. Ids pyadk makes are now ``<id>-<n>``, and once a server
refuses an id that does not fit, the adapter sends the call again with each such id as one made
from it (the same for a call and its result, in every later request), leaving ids that fit as
they are. Until then ids go as they are: Kimi K2 reads its own back. The server here refuses as
OpenRouter passes Anthropic's refusal on (``OpenAIServer(tool_ids="anthropic")``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer, Reply

import adk
from adk import Message, Role, Runner
from adk.checkpoint import InMemoryCheckpointStore
from adk.messages import ToolCall
from adk.models._openai_chat import chat_messages
from adk.models._openai_responses import responses_input
from adk.models.openai import _wants_fitting_ids
from adk.tools._executor import own_call_ids, unique_call_ids
from prebuilt import ReActAgent

FITS = re.compile(r"[a-zA-Z0-9_-]{1,64}")

PAID: list[str] = []


@pytest.fixture(autouse=True)
def _nothing_paid_yet() -> None:
    PAID.clear()


@adk.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@adk.tool(require_approval=True)
def settle(payee: str, cents: int) -> str:
    """Settle."""
    PAID.append(payee)
    return f"settled {cents} with {payee}"


def _sent_ids(body: dict[str, Any]) -> list[tuple[str, str]]:
    """``(kind, id)`` of each call and result a Chat or Responses request carried, in order."""
    if "messages" in body:
        out = []
        for message in body["messages"]:
            out.extend(("call", call["id"]) for call in message.get("tool_calls") or ())
            if message["role"] == "tool":
                out.append(("result", message["tool_call_id"]))
        return out
    kinds = {"function_call": "call", "function_call_output": "result"}
    return [(kinds[i["type"]], i["call_id"]) for i in body["input"] if i.get("type") in kinds]


def _history(*ids: str) -> list[Message]:
    """A conversation of one round of calls under ``ids``, each answered, then a question."""
    calls = [
        ToolCall(id=i, name="add", arguments=f'{{"a": {n}, "b": 1}}') for n, i in enumerate(ids)
    ]
    results = [Message.tool(str(n + 1), tool_call_id=i, name="add") for n, i in enumerate(ids)]
    return [
        Message.user("add them"),
        Message.assistant("", tool_calls=calls),
        *results,
        Message.assistant("1, 2, 3"),
        Message.user("and again?"),
    ]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_history_holding_ids_another_provider_refuses_goes_through(api: str) -> None:
    """An earlier pyadk's ``call_0~1``, Kimi's ``functions.add:0``, an id with ``|`` and one of
    80 characters: refused as they are, each goes again as an id that fits, the same on its
    call and its result and in the next request, which the model sends so at once; OpenAI's
    own ``call_...`` goes as it is."""
    own = "call_Xq7bH2kLm9Pz0aRtY3uVwE1s"
    odd = ["call_0~1", "functions.add:0", "toolu|01", "x" * 80]
    history = _history(own, *odd)
    server = OpenAIServer(tool_ids="anthropic", default=Reply(text="the same"))
    async with server, wire_model(server, api) as model:
        first = await model.generate(history)
        second = await model.generate([*history, first, Message.user("once more?")])
    assert first.content == second.content == "the same"
    assert len(server.requests) == 3  # the first refused, once
    refused, *sent = [_sent_ids(body) for body in server.bodies]
    assert [i for _, i in refused] == [own, *odd, own, *odd]  # as they are, until refused
    calls = [i for kind, i in sent[0] if kind == "call"]
    results = [i for kind, i in sent[0] if kind == "result"]
    assert calls == results  # each result under its call's id
    assert calls[0] == own  # one that fits goes as it is
    assert all(FITS.fullmatch(i) for i in calls) and len(set(calls)) == 5
    assert all(len(i) <= 40 for i in calls[1:])  # OpenAI's own limit in a Chat request
    assert sent[1] == sent[0]  # every later request alike
    assert [m.tool_call_id for m in history if m.role == Role.TOOL] == [own, *odd]  # kept


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_id_longer_than_openai_takes_goes_again_made_to_fit(api: str) -> None:
    """OpenAI's own API refuses an id longer than 40 characters in a Chat request (64 as a
    Responses ``call_id``), saying so in its own words ("Invalid 'input[3].call_id': string too
    long"): a history holding one from another provider went through before ids went as they are
    (each made to fit, 35 characters at most), and was then refused for good; it goes again made
    to fit, and so from then on."""
    own = "call_Xq7bH2kLm9Pz0aRtY3uVwE1s"
    long = "functions.lookup_the_weather_in_a_city_of_the_world:" + "7" * 30
    history = _history(own, long)
    server = OpenAIServer(tool_ids="openai", default=Reply(text="the same"))
    async with server, wire_model(server, api) as model:
        first = await model.generate(history)
        second = await model.generate([*history, first, Message.user("once more?")])
    assert first.content == second.content == "the same"
    assert len(server.requests) == 3  # the first refused, once
    refused, *sent = [_sent_ids(body) for body in server.bodies]
    assert [i for _, i in refused] == [own, long, own, long]  # as they are, until refused
    for ids in sent:
        assert ids[0] == ("call", own) and ids[2] == ("result", own)  # one that fits, as it is
        assert ids[1][1] == ids[3][1] != long and len(ids[1][1]) <= 40 and FITS.fullmatch(ids[1][1])


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_run_whose_server_reuses_ids_goes_to_a_provider_taking_only_fitting_ids(
    api: str,
) -> None:
    """A server numbering each reply's calls ``call_0`` (and two calls of one reply under one id):
    the run gives each call an id of its own, which Anthropic behind a proxy takes (pyadk's
    ``call_0~1`` was refused, the run failing at its second tool round)."""
    async with OpenAIServer(tool_ids="anthropic") as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}', id="call_0")]),
            Reply(
                tool_calls=[
                    Call("add", '{"a": 3, "b": 4}', id="call_0"),
                    Call("add", '{"a": 5, "b": 6}', id="call_0"),
                ]
            ),
            Reply(text="3, 7, 11"),
        )
        async with wire_model(server, api) as model:
            result = await Runner(ReActAgent("calc", model, tools=[add])).invoke("sums?")
    assert result.text == "3, 7, 11"
    assert len(server.requests) == 3  # none refused: pyadk's own ids fit
    ids = [i for kind, i in _sent_ids(server.bodies[2]) if kind == "call"]
    assert ids == ["call_0", "call_0-2", "call_0-1"]  # pyadk's own, sent as they are
    assert [m.tool_call_id for m in result.messages if m.role == Role.TOOL] == ids


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_servers_own_ids_go_back_to_it_as_it_made_them(api: str) -> None:
    """Kimi K2 (vLLM, SGLang) names each call ``functions.<name>:<n>`` and reads the tool's name
    back from the id; its chat template puts the history's ids in the prompt, and a history of
    ids in another form makes it answer with ids in that form, which its parser cannot read
    (vLLM's Kimi K2 accuracy report). A server that takes its own ids gets them back as it made
    them, on the call and on its result, not made to fit a provider that is not asked."""
    async with OpenAIServer() as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}', id="functions.add:0")]),
            Reply(tool_calls=[Call("add", '{"a": 3, "b": 4}', id="functions.add:1")]),
            Reply(text="3, 7"),
        )
        async with wire_model(server, api) as model:
            result = await Runner(ReActAgent("calc", model, tools=[add])).invoke("sums?")
    assert result.text == "3, 7"
    assert _sent_ids(server.bodies[2]) == [
        ("call", "functions.add:0"),
        ("result", "functions.add:0"),
        ("call", "functions.add:1"),
        ("result", "functions.add:1"),
    ]


FIXTURE = Path(__file__).parent / "fixtures" / "main_6e2d7a1_tilde_call_id_pause.ckpt"
"""Saved by pyadk 6e2d7a1 (ids of its own made ``<id>~<n>``): a ``ReActAgent`` whose model gave
every call the id ``c1`` paid bob (``#c1``, approved), then paused at ``#c1~1`` for eve."""


async def test_a_pause_saved_with_an_old_form_id_resumes_by_its_point_id_through_such_a_provider() -> (
    None
):
    """The checkpoint is listed and answered by the point id it was saved with; the resumed
    run's requests (to a provider taking only fitting ids) carry ``c1~1`` as one that fits, the
    same in each; the model's next call under ``c1`` pauses at a point of its own, and the old
    point id sent again is refused as answered."""
    store = InMemoryCheckpointStore()
    await store.put("old", FIXTURE.read_bytes())
    point = "agent:payables/tool:settle#c1"
    async with OpenAIServer(tool_ids="anthropic") as server:
        server.script(
            Reply(tool_calls=[Call("settle", '{"payee": "carol", "cents": 5}', id="c1")]),
            Reply(text="all settled"),
        )
        async with wire_model(server, "chat") as model:
            runner = Runner(ReActAgent("payables", model, tools=[settle]), store)
            assert [entry.point_ids for entry in await runner.pending()] == [[point + "~1"]]
            third = await runner.invoke_resume("old", {point + "~1": True})
            assert PAID == ["eve"]
            assert third.interrupt is not None and third.interrupt.point_ids == [point + "-1"]
            with pytest.raises(ValueError, match="already answered by an earlier resume"):
                await runner.invoke_resume("old", {point + "~1": True})
            done = await runner.invoke_resume("old", {point + "-1": False})
    assert done.text == "all settled" and PAID == ["eve"]
    refused, first, second = (_sent_ids(body) for body in server.bodies)
    assert refused[2] == ("call", "c1~1")  # as it is, until refused; then made to fit
    assert all(FITS.fullmatch(i) for _, i in first + second)
    old = first[2][1]  # bob's c1, its result, then eve's c1~1 as sent
    assert first == [("call", "c1"), ("result", "c1"), ("call", old), ("result", old)]
    assert second == [*first, ("call", "c1-1"), ("result", "c1-1")]


def test_ids_of_ones_own_never_take_an_id_a_call_of_the_reply_holds() -> None:
    """``<id>-<n>`` could be a server's own id (``~`` was no server's): a renamed call takes the
    next number instead, and the server's call keeps its id."""
    calls = [ToolCall(id=i, name="add") for i in ("a", "a", "a-1")]
    unique_call_ids(calls)
    assert [c.id for c in calls] == ["a", "a-2", "a-1"]
    reply = Message.assistant("", tool_calls=[ToolCall(id=i, name="add") for i in ("c1", "c1-1")])
    seen = {"c1": None}
    own_call_ids(reply, reply.tool_calls, seen)
    assert [c.id for c in reply.tool_calls] == ["c1-2", "c1-1"]
    assert list(seen) == ["c1", "c1-2", "c1-1"]


def test_an_id_made_to_fit_never_takes_an_id_the_request_holds() -> None:
    """Made from the id alone, unless the request holds that one already (an id that fits, sent
    as it is): then made again, and the two stay apart."""
    history = _history("c~1")
    (made,) = [i for _, i in _sent_ids({"messages": chat_messages(history, fit_ids=True)})[:1]]
    both = chat_messages(_history(made, "c~1"), fit_ids=True)
    ids = [i for kind, i in _sent_ids({"messages": both}) if kind == "call"]
    assert ids[0] == made and ids[1] != made and FITS.fullmatch(ids[1])
    items = responses_input(_history(made, "c~1"), fit_ids=True)
    assert [i for kind, i in _sent_ids({"input": items}) if kind == "call"] == ids


def test_what_a_reply_saved_before_keeps_under_an_old_form_id_goes_back_on_its_call() -> None:
    """A reply of two calls under one id kept by an earlier pyadk, unrenamed (a caller of
    ``generate``), holds what its server put on the second call under ``dup~1``: it goes back on
    that call still."""
    signed = [{"google": {"thought_signature": "s"}}, {"google": {"thought_signature": "s-1"}}]
    reply = Message(
        role=Role.ASSISTANT,
        tool_calls=[ToolCall(id="dup", name="add"), ToolCall(id="dup", name="add")],
        metadata={"tool_call_extra_content": {"dup": signed[0], "dup~1": signed[1]}},
    )
    (wire,) = chat_messages([reply])
    assert [c.get("extra_content") for c in wire["tool_calls"]] == signed


@pytest.mark.parametrize(
    ("said", "wanted"),
    [
        # Bedrock's own validation error, as LiteLLM passes it on
        (
            "BedrockException - 1 validation error detected: Value 'functions.add:0' at "
            "'messages.1.member.content.1.member.toolUse.toolUseId' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+",
            True,
        ),
        ("messages.3.content.0.tool_result.tool_use_id: String should have at most 64", True),
        # OpenAI's own, of an id's length (Chat: 40 at most; Responses: 64)
        (
            "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with "
            "maximum length 40, but got a string with length 81 instead.",
            True,
        ),
        (
            "Invalid 'input[95].call_id': string too long. Expected a string with maximum "
            "length 64, but got a string with length 116 instead.",
            True,
        ),
        ("Invalid 'messages[3].tool_call_id': string too long. Expected ...", True),
        ("Invalid 'messages[1].content': string too long. Expected a string with ...", False),
        ("Invalid 'input[2].name': string too long. Expected a string with ...", False),
        ("messages.1.content.0.tool_use.input: Input should be a valid dictionary", False),
    ],
)
def test_the_refusals_that_make_ids_fit_are_anthropics_and_bedrocks(
    said: str, wanted: bool
) -> None:
    """Only a refusal of an id's form makes a model send ids made to fit; one of something else
    (a call's input) is the server's error, raised."""
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    body = {"error": {"message": said, "type": "invalid_request_error"}}
    error = openai.BadRequestError(said, response=httpx2.Response(400, request=request), body=body)
    assert _wants_fitting_ids(error) is wanted
    assert _wants_fitting_ids(ValueError(said)) is False
