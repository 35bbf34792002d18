"""Whatever tool calls a model makes, the run goes on and the model reads what went wrong.

Random rounds of calls (``hypothesis``): names of tools that exist and that do not (empty, with
spaces, a prefix of a real one), arguments that are random text, random JSON (lists, numbers,
nested objects, wrong types, extra and missing fields), huge payloads, several calls sharing an
id or without one. ``ScriptedModel`` plays the model (what it says is the point here, not the
wire: ``test_hostile_model_wire`` is the wire). What must hold: the run ends with the model's
final answer and no error event; the model is asked again with exactly one tool result per call,
under that call's id (in the order they ended); a result for a call that could not run says ``Error`` and why; a typed tool
runs only with arguments that validate, as the types it declared.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel

from adk import Role, Runner, tool
from adk.messages import ToolCall
from adk.testing import Reply, ScriptedModel
from prebuilt import ReActAgent

EXAMPLES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class Address(BaseModel):
    city: str
    zip: int


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=10,
)
_arguments = st.one_of(
    st.text(max_size=20),  # not JSON, or JSON that is not an object
    _json.map(json.dumps),
    st.fixed_dictionaries(  # the right names, random values
        {},
        optional={
            "payee": _json,
            "cents": _json | st.integers(0, 10**6),
            "address": _json
            | st.fixed_dictionaries({"city": st.text(max_size=5), "zip": st.integers(0, 99999)}),
            "extra": _json,
        },
    ).map(json.dumps),
    st.fixed_dictionaries(  # calls that fit
        {"payee": st.text(max_size=5), "cents": st.integers(0, 10**6)}
    ).map(json.dumps),
    st.integers(1, 200_000).map(lambda n: json.dumps({"payee": "x" * n, "cents": 1})),
    st.sampled_from(['{"payee": "a", "cents": 1', '{"payee": "\\ud800", "cents": 1}', "", "{}"]),
)
_names = st.sampled_from(["pay", "ship", "pa", "nope", "", "pay ", "transfer_to_x", "PAY"])
_calls = st.lists(
    st.builds(
        lambda name, arguments, id: ToolCall(id=id, name=name, arguments=arguments),
        _names,
        _arguments,
        st.sampled_from(["c1", "c2", "", "c1 "]),
    ),
    min_size=1,
    max_size=5,
)


@settings(EXAMPLES, max_examples=120)
@given(calls=_calls, streaming=st.booleans())
def test_any_round_of_tool_calls_is_answered_call_by_call_and_the_run_goes_on(
    calls: list[ToolCall], streaming: bool
) -> None:
    asyncio.run(_round(calls, streaming))


async def _round(calls: list[ToolCall], streaming: bool) -> None:
    paid: list[tuple[Any, Any]] = []
    shipped: list[Address] = []

    @tool
    def pay(payee: str, cents: int) -> str:
        """Pay someone."""
        paid.append((payee, cents))
        return "paid"

    @tool
    def ship(address: Address) -> str:
        """Ship to an address."""
        shipped.append(address)
        return "shipped"

    model = ScriptedModel(
        [Reply(tool_calls=[call.model_copy() for call in calls]), Reply(text="done")]
    )
    agent = ReActAgent("r", model=model, tools=[pay, ship], max_iterations=3)
    result = await Runner(agent, enable_streaming=streaming).invoke("go")

    assert [e.error for e in result.events if e.error is not None] == []
    assert result.text == "done"
    assert len(model.requests) == 2
    asked = model.requests[1].messages
    made = [m for m in asked if m.role == Role.ASSISTANT and m.tool_calls][-1].tool_calls
    results = [m for m in asked if m.role == Role.TOOL]
    assert len(made) == len(calls)
    assert len({call.id for call in made}) == len(made), "two calls kept one id"
    # In the order they ended (concurrent calls), each under its call's id.
    assert sorted(str(m.tool_call_id) for m in results) == sorted(call.id for call in made)
    answers = {m.tool_call_id: m.content for m in results}
    for call in made:
        text = answers[call.id]
        if call.name not in ("pay", "ship"):
            assert text.startswith("Error") and repr(call.name) in text, text
        elif text not in ("paid", "shipped"):
            assert text.startswith("Error"), text
    assert all(type(payee) is str and type(cents) is int for payee, cents in paid)
    assert all(isinstance(address, Address) for address in shipped)
    ok = sum(answer.content in ("paid", "shipped") for answer in results)
    assert ok == len(paid) + len(shipped)
