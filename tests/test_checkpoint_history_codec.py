"""A checkpoint's history, most of what a pause saves and a resume loads, is written and read entry
by entry (``_history_json``, ``_read_history`` in ``adk.checkpoint._snapshot``) rather than by the
generic walk over every entry's dict and run path (docs/performance.md, round 12). The stored
format is the generic walk's, so checkpoints written before still load: the fixture was written by
pyadk at 0b17a72 (before the change) with the tree below, paused on the analyst's approval, and it
resumes, and saves again, exactly as then. Every other shape of entry (names that are no plain
``str``, a registered model or a NaN in a message's metadata, a value that cannot be stored, an
older checkpoint's entries without ``seq``, a malformed one) goes to the generic walk and comes out
as it did, errors included.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel

import adk
from adk import Agent, CheckpointError, Message, ParallelAgent, Role, Runner, SequentialAgent
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint._snapshot import (
    _history_json,
    _is_history,
    _read_history,
    dump_history,
    load_history,
    parse_body,
    snapshot_body,
)
from adk.checkpoint.codec import (
    decode_checkpoint,
    encode_checkpoint,
    from_json_value,
    to_json_value,
)
from adk.context import Session, new_entry, new_run
from adk.messages import ToolCall, Usage
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor

FIXTURE = Path(__file__).parent / "fixtures" / "main_0b17a72_nested_pause.ckpt"
ROUNDS = 2  # lookups each branch makes before the analyst asks to publish


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic} ✓"


@adk.tool(require_approval=True)
def publish(title: str) -> str:
    """Publish the summary (needs a person's approval).

    Args:
        title: The summary's title.
    """
    return f"published {title}"


def _researcher(publishes: bool) -> Any:
    def respond(messages: list[Message]) -> Reply:
        done = sum(1 for m in messages if m.role == Role.TOOL)
        if done < ROUNDS:
            call = tool_call("lookup", {"topic": f"part {done}"}, id=f"call_{done}")
            return Reply(text=f"Looking up part {done}.", tool_calls=[call])
        if publishes and done == ROUNDS:
            return Reply(text="Publishing.", tool_calls=[tool_call("publish", {"title": "Q3"})])
        return Reply(text="Q3 summed up: revenue up 4 %.")

    return respond


def _boss(messages: list[Message]) -> Reply:
    if any(m.role == Role.TOOL and m.name == "transfer_to_agent" for m in messages):
        return Reply(text="The team has summed Q3 up.")
    transfer = tool_call("transfer_to_agent", {"agent_name": "team"}, id="call_t")
    return Reply(text="Handing over to the team.", tool_calls=[transfer])


def tree() -> Agent:
    """Supervisor > SequentialAgent > ParallelAgent > ReActAgent, as the benchmark's nested run."""

    def react(name: str, publishes: bool) -> ReActAgent:
        tools = [lookup, publish] if publishes else [lookup]
        return ReActAgent(name, ScriptedModel(_researcher(publishes)), tools=tools)

    branches = ParallelAgent("branches", [react("analyst", True), react("checker", False)])
    team = SequentialAgent("team", [branches], description="Researches the figures.")
    return Supervisor(ReActAgent("boss", ScriptedModel(_boss)), [team])


def _body(data: bytes) -> dict[str, Any]:
    return decode_checkpoint(data, "q3")


async def test_a_checkpoint_written_before_resumes() -> None:
    store = InMemoryCheckpointStore()
    await store.put("q3", FIXTURE.read_bytes())
    result = await Runner(tree(), store).invoke_resume("q3", True)
    assert result.text == "The team has summed Q3 up."
    tools = [e.message.content for e in result.events if e.message and e.message.role == Role.TOOL]
    assert "published Q3" in tools
    assert await store.get("q3") is None  # finished: deleted


async def test_a_pause_writes_what_was_written_before() -> None:
    """The same run paused now saves each entry of the history, byte for byte, as the fixture
    holds it. (The two branches' entries interleave as their tools, run in worker threads,
    happen to finish, so they are compared without their order numbers.) But for one id: the
    analyst's publish call, named ``call_1`` by the scripted model as its second lookup was,
    has an id of its own in the run since (``call_1-1``, test_point_ids_unique.py)."""
    store = InMemoryCheckpointStore()
    paused = await Runner(tree(), store).invoke("Sum up Q3.")
    assert paused.checkpoint_id is not None
    assert paused.interrupt is not None and paused.interrupt.point_ids[0].endswith("#call_1-1")
    data = await store.get(paused.checkpoint_id)
    assert data is not None
    now, before = _body(data), _body(FIXTURE.read_bytes())
    assert len(now["history"]) == len(before["history"]) > 10
    entries = list(map(_unnumbered, now["history"]))
    renamed = [entry for entry in entries if '"id": "call_1-1"' in entry]
    assert len(renamed) == 1 and '"name": "publish"' in renamed[0]
    entries = [entry.replace('"id": "call_1-1"', '"id": "call_1"') for entry in entries]
    assert sorted(entries) == sorted(map(_unnumbered, before["history"]))
    assert now["root_input"] == before["root_input"]


def _unnumbered(entry: dict[str, Any]) -> str:
    """An entry's JSON without its order number, which the branches' interleaving decides."""
    assert list(entry) == ["agent", "run_path", "message", "seq"]
    return json.dumps({key: value for key, value in entry.items() if key != "seq"})


def test_a_loaded_checkpoint_saves_again_unchanged() -> None:
    body = _body(FIXTURE.read_bytes())
    snapshot = parse_body(body, "q3")
    run = new_run(snapshot.root_input, Session(snapshot.session), snapshot.run_id)
    load_history(run, snapshot.history, checked=True)
    again = snapshot_body(run, snapshot.signal, "boss", False)
    assert json.dumps(again["history"]) == json.dumps(body["history"])
    assert again["states"] == body["states"]
    assert snapshot.history == from_json_value(body["history"])


# -- other shapes: the generic walk's output and errors ---------------------------------------------
@adk.register_type
class Source(BaseModel):
    url: str


class Unregistered(BaseModel):
    url: str


class Name(str):
    pass


def _run_with(*entries: tuple[Any, Any, Message]) -> Any:
    run = new_run([Message.user("hi")], Session())
    for agent, path, message in entries:
        run.history.entries.append(new_entry(agent, path, message, run.next_seq()))
    return run


def _written_both_ways(run: Any) -> tuple[Any, Any]:
    return _history_json(run.history), to_json_value(dump_history(run.history), "history")


def _with_metadata(**metadata: Any) -> Message:
    message = Message.assistant("text")
    message.metadata.update(metadata)
    return message


@pytest.mark.parametrize(
    "entry",
    [
        ("a", ("root", "a"), Message.assistant("plain")),
        (Name("a"), ("root", "a"), Message.assistant("a str subclass's name")),
        ("a", (Name("root"), "a"), Message.assistant("a str subclass in the path")),
        ("a", ("root", "a"), _with_metadata(source=Source(url="https://x"))),
        ("a", ("root", "a"), _with_metadata(score=math.nan, big=10**30)),
        ("a", ("root", "a"), Message.tool("result", tool_call_id="c1", name="t")),
        ("a", ("root", "a"), _with_metadata(source=Unregistered(url="https://x"))),
        ("a", ("root", 3), Message.assistant("a path that is not all names")),
        (7, ("root", "a"), Message.assistant("a name that is not a str")),
    ],
)
def test_an_entry_is_written_as_the_generic_walk_writes_it(entry: Any) -> None:
    now, generic = _written_both_ways(_run_with(("b", ("root", "b"), Message.user("x")), entry))
    assert repr(now) == repr(generic)  # NaN != NaN: compared by what would be written


@pytest.mark.parametrize(
    "entry",
    [
        ("a", ("root", "a"), _with_metadata(when=object())),
        ("a", ("root", "a"), _with_metadata(source=Source.model_construct(url=object()))),
    ],
)
def test_an_entry_refused_is_refused_as_before(entry: Any) -> None:
    run = _run_with(("b", ("root", "b"), Message.user("x")), entry)
    with pytest.raises(Exception) as generic:
        to_json_value(dump_history(run.history), "history")
    with pytest.raises(type(generic.value)) as now:
        _history_json(run.history)
    assert str(now.value) == str(generic.value)


def _stored() -> list[Any]:
    return json.loads(json.dumps(_body(FIXTURE.read_bytes())["history"]))


def _generic_read(stored: Any) -> Any:
    history = from_json_value(stored)
    if not _is_history(history):
        raise CheckpointError("is malformed: history is not a list of recorded messages")
    return history


def _edited(edit: Any) -> list[Any]:
    stored = _stored()
    edit(stored)
    return stored


@pytest.mark.parametrize(
    "stored",
    [
        _stored(),
        _edited(lambda h: [e.pop("seq") for e in h]),  # an older pyadk's: renumbered on load
        _edited(lambda h: h[3].update(extra={"__adk_type__": "dict", "data": {"k": 1}})),
        _edited(lambda h: h[2].update(seq=None)),
    ],
)
def test_a_stored_history_is_read_as_the_generic_walk_reads_it(stored: Any) -> None:
    assert _read_history(stored) == _generic_read(stored)


@pytest.mark.parametrize(
    "stored",
    [
        {"not": "a list"},
        _edited(lambda h: h[4].update(run_path=["root", 3])),
        _edited(lambda h: h[4].update(agent=None)),
        _edited(lambda h: h[5]["message"].update(data={"role": "nobody"})),
        _edited(lambda h: h[5]["message"].update({"__adk_type__": "app.Gone"})),
        _edited(lambda h: h[1].update(message={"role": "user", "content": "untagged"})),
        _edited(lambda h: h[6].update(extra={"__adk_type__": "app.Gone", "data": {}})),
    ],
)
def test_a_malformed_history_is_refused_as_before(stored: Any) -> None:
    with pytest.raises(CheckpointError) as generic:
        _generic_read(stored)
    with pytest.raises(CheckpointError) as now:
        _read_history(stored)
    assert str(now.value) == str(generic.value)


# -- property: any history, written and read both ways ----------------------------------------------
def _long(signed: tuple[int, int]) -> int:
    """The longest int a checkpoint holds (4300 digits), or one past it."""
    return signed[0] * 10 ** signed[1]


_KEYS = st.sampled_from(["k", "", "a.b", "__adk_type__", "data", "tagged", "é✓", "0"])
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.tuples(st.sampled_from([1, -1]), st.sampled_from([4299, 4300])).map(_long),
    st.floats(),  # NaN and infinities included
    st.text(max_size=8),
    st.builds(Source, url=st.text(max_size=5)),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_NAMES = st.one_of(st.text(max_size=4), st.builds(Name, st.text(max_size=4)), st.integers(0, 3))


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    calls = draw(
        st.lists(
            st.builds(
                ToolCall,
                id=st.text(max_size=4),
                name=st.text(max_size=4),
                arguments=st.sampled_from(["{}", '{"a": 1}', '{"x": "✓"}']),
            ),
            max_size=2,
        )
    )
    return Message(
        role=draw(st.sampled_from(list(Role))),
        content=draw(st.text(max_size=10)),
        tool_calls=calls,
        tool_call_id=draw(st.none() | st.text(max_size=4)),
        name=draw(st.none() | st.text(max_size=4)),
        reasoning=draw(st.none() | st.text(max_size=4)),
        usage=draw(st.none() | st.builds(Usage, input_tokens=st.integers(0, 10**12))),
        metadata=draw(st.dictionaries(_KEYS, _VALUES, max_size=3)),
    )


_ENTRIES = st.lists(
    st.tuples(_NAMES, st.lists(_NAMES, max_size=3).map(tuple), _messages()), max_size=5
)


def _outcome(write: Any) -> tuple[str, str]:
    """What ``write()`` gives, compared by what would be written (NaN != NaN), or its error.
    Dicts compare by their items, not their keys' order: an edit that drops a key and sets it
    again moves it last in the edited entry, which the generic read keeps and the history codec
    writes in its usual place (the same JSON object)."""
    try:
        return ("written", repr(_keys_sorted(write())))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


def _keys_sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted(((repr(key), _keys_sorted(item)) for key, item in value.items()), key=repr)
    if isinstance(value, (list, tuple)):
        return [_keys_sorted(item) for item in value]
    return value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ENTRIES)
def test_any_history_is_written_and_read_as_the_generic_walk_does(entries: Any) -> None:
    run = _run_with(*entries)
    generic = _outcome(lambda: to_json_value(dump_history(run.history), "history"))
    assert _outcome(lambda: _history_json(run.history)) == generic
    if generic[0] != "written":
        return
    try:  # stored as a pause stores it: floats inside messages' dumps tagged, JSON text
        stored = _body(encode_checkpoint({"history": _history_json(run.history)}))["history"]
    except CheckpointError as exc:  # an over-long int inside a message's dump: refused whole
        assert "digits" in str(exc)
        return
    read = _outcome(lambda: _read_history(stored))
    assert read == _outcome(lambda: _generic_read(stored))
    if any(not isinstance(name, str) for a, path, _ in entries for name in (a, *path)):
        assert read[0] == "CheckpointError"  # saved, as it always was, but no history to load
        return  # (the framework names agents with str alone)
    assert read[0] == "written"
    # And what is read back is what was written (plain data and registered models alike).
    assert repr(_history_json(_run_with(*_loaded(stored)).history)) == repr(
        _history_json(run.history)
    )


def _loaded(stored: Any) -> list[tuple[Any, Any, Message]]:
    return [(e["agent"], tuple(e["run_path"]), e["message"]) for e in _read_history(stored)]


_EDITS = st.tuples(
    st.integers(0, 20),
    st.sampled_from(["agent", "run_path", "message", "seq", "extra"]),
    st.one_of(
        _VALUES,
        st.just(_DROP := object()),
        st.sampled_from(
            [
                {"__adk_type__": "adk.Message", "data": {"role": "nobody"}},
                {"__adk_type__": "adk.Message", "data": {"role": "user"}, "tagged": True},
                {"__adk_type__": "adk.Message", "data": []},
                {"__adk_type__": "app.Gone", "data": {}},
                {"__adk_type__": "float", "data": "NaN"},
                {"__adk_type__": "dict", "data": {"role": "user"}},
                {"__adk_type__": 3},
                ["root", {"__adk_type__": "dict", "data": {}}],
            ]
        ),
    ),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_EDITS, min_size=1, max_size=3))
def test_an_edited_history_is_read_or_refused_as_the_generic_walk_does(edits: Any) -> None:
    stored = _stored()
    for index, key, value in edits:
        entry = stored[index % len(stored)]
        if value is _DROP:
            entry.pop(key, None)
        else:
            try:
                entry[key] = json.loads(json.dumps(to_json_value(value)))
            except (CheckpointError, ValueError):  # an over-long int or a NaN: no JSON holds it
                continue
    now = _outcome(lambda: _read_history(stored))
    assert now == _outcome(lambda: _generic_read(stored))
    assert now[0] in ("written", "CheckpointError")  # never a bare KeyError or TypeError
