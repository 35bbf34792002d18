"""Memory as Flink Agents' ``MemoryObject``: dotted paths, nested objects and their views.

A Flink Agents action writes ``ctx.short_term_memory.set("user.name", "x")`` and reads
``get("user").get("name")``. Memory was flat: ``"user.name"`` was one key and ``get("user")`` was
``None``, silently. These tests hold memory to Flink Agents' semantics (its ``MemoryObjectImpl`` and
``LocalMemoryObject``), to the undo of an interrupted action's writes, and to memory saved before
paths existed (``tests/fixtures/flat_memory.json``, written by that version: see
``tests/legacy_memory.py``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import pytest

from adk import Interrupt, RunError, Runner, Session
from adk.actions import (
    ActionAgent,
    ActionContext,
    ActionError,
    Event,
    InputEvent,
    OutputEvent,
    ShortTermMemory,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint.codec import decode_checkpoint, from_json_value, to_json_value
from adk.execution import LocalExecutionEnvironment, SessionStore
from tests.legacy_memory import Profile

FIXTURE = Path(__file__).parent / "fixtures" / "flat_memory.json"


class Doing(ActionAgent):
    """Runs ``step`` on its input's memory, and outputs what ``step`` gives."""

    def __init__(self, step: Callable[[ActionContext], Any], name: str = "doing") -> None:
        self.step = step
        super().__init__(name)

    @action(InputEvent)
    def act(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=self.step(ctx)))


async def _run(step: Callable[[ActionContext], Any], session: Session | None = None) -> Any:
    result = await Runner(Doing(step)).invoke("go", session=session)
    return result.events[-1].output.custom if result.events[-1].output else None


async def test_a_path_makes_objects_and_get_gives_a_view_whose_writes_land_in_memory() -> None:
    def step(ctx: ActionContext) -> dict[str, Any]:
        memory = ctx.short_term_memory
        memory.set("user.name", "x")
        user = memory.get("user")
        assert isinstance(user, ShortTermMemory) and user.get("name") == "x"
        user.set("age", 13)  # through the view: into memory
        memory.new_object("a.b").set("c", True)
        memory.set("prefs", {"lang": "en"})  # a dict value stays a value, as in Flink Agents
        return {
            "user.age": memory.get("user.age"),
            "a.b.c": memory.get("a").get("b").get("c"),
            "exist": [memory.is_exist(p) for p in ("a", "a.b", "a.b.c", "a.x", "nope.x")],
            "names": memory.get_field_names(),
            "fields": memory.get_fields(),
            "a.fields": memory.get("a").get_fields(),
            "prefs": memory.get("prefs"),
            "prefs.lang": memory.get("prefs.lang"),  # a value's inside is not a path
            "missing": [memory.get("nope"), memory.get("nope.x"), memory.get("user.x", 0)],
            "view": [sorted(user), len(user), "name" in user, user["age"], user.to_dict()],
            "in": ["user.name" in memory, "user.x" in memory, memory["user.name"]],
        }

    session = Session()
    seen = await _run(step, session)

    assert seen == {
        "user.age": 13,
        "a.b.c": True,
        "exist": [True, True, True, False, False],
        "names": ["a", "prefs", "user"],
        "fields": {"a": "NestedObject", "prefs": {"lang": "en"}, "user": "NestedObject"},
        "a.fields": {"b": "NestedObject"},
        "prefs": {"lang": "en"},
        "prefs.lang": None,
        "missing": [None, None, 0],
        "view": [["age", "name"], 2, True, 13, {"name": "x", "age": 13}],
        "in": [True, False, "x"],
    }
    # Kept as nested JSON dicts: what a checkpoint or a store holds, read back the same.
    memory = session.values["memory:doing"]
    assert memory["user"] == {"__adk_object__": True, "name": "x", "age": 13}
    assert json.loads(json.dumps(to_json_value(memory))) == memory

    # The next run reads it back through paths and views.
    assert await _run(lambda ctx: ctx.short_term_memory.get("user").get("age"), session) == 13


async def test_what_memory_cannot_hold_is_refused_naming_the_path_and_loses_nothing() -> None:
    def step(ctx: ActionContext) -> dict[str, Any]:
        memory = ctx.short_term_memory
        memory.set("prefs", {"lang": "en"})
        memory.set("user.name", "x")
        kept = memory.to_dict()
        refusals: dict[str, str] = {}
        attempts: dict[str, Callable[[], Any]] = {
            "through a value": lambda: memory.set("prefs.lang", "fr"),
            "over an object": lambda: memory.set("user", "bob"),
            "object on a value": lambda: memory.new_object("prefs"),
            "a view as a value": lambda: memory.set("copy", memory.get("user")),
            "not JSON": lambda: memory.get("user").set("when", object()),
            "empty name": lambda: memory.set("a..b", 1),
            "the marker": lambda: memory.set("forged", {"__adk_object__": True}),
            "the marker's name": lambda: memory.set("user.__adk_object__", False),
        }
        for what, attempt in attempts.items():
            with pytest.raises((TypeError, ValueError)) as raised:
                attempt()
            refusals[what] = str(raised.value)
        assert memory.to_dict() == kept  # nothing half-written
        assert memory.get("user").to_dict() == {"name": "x"}
        # What the refusals point to works.
        memory.new_object("prefs", overwrite=True).set("lang", "fr")
        memory.delete("user")
        memory.set("user", "bob")
        refusals["after"] = repr([memory.get("prefs.lang"), memory.get("user")])
        return refusals

    refusals = await _run(step)

    assert "'prefs.lang' goes through 'prefs', which holds a value" in refusals["through a value"]
    assert "'user' is an object, not a value: delete it first" in refusals["over an object"]
    assert (
        "'prefs' holds a value, not an object: pass overwrite=True" in refusals["object on a value"]
    )
    assert "'copy': the value is a memory object; use new_object" in refusals["a view as a value"]
    assert "short-term memory 'user.when'" in refusals["not JSON"]
    assert "'a..b' has an empty name" in refusals["empty name"]
    assert "'forged': a dict with the key '__adk_object__'" in refusals["the marker"]
    assert "'__adk_object__' is memory's own name" in refusals["the marker's name"]
    assert refusals["after"] == "['fr', 'bob']"


async def test_a_held_view_finds_its_object_by_path_after_the_object_is_replaced() -> None:
    """Flink Agents' views resolve their path at each call; one holding the object's dict would
    write into a dict that memory no longer keeps once the object is deleted, without a word."""

    def step(ctx: ActionContext) -> Any:
        memory = ctx.short_term_memory
        user = memory.new_object("user")
        memory.delete("user")
        assert user.get("name") is None and not memory.is_exist("user")
        user.set("name", "x")  # makes "user" again, as a path would
        return [memory.get("user.name")]

    assert await _run(step) == ["x"]


class Counted(Event):
    pass


class Visits(ActionAgent):
    """Counts visits under ``stats``: ``count`` writes ``stats.a`` and ``note`` writes ``stats.b``
    and a new object, then pauses (its writes are undone, and it runs again on resume)."""

    @action(InputEvent)
    def count(self, event: InputEvent, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        memory.set("stats.a", memory.get("stats.a", 0) + 1)
        ctx.send_event(Counted())

    @action(Counted)
    def note(self, event: Counted, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        memory.set("stats.b", memory.get("stats.b", 0) + 1)
        memory.get("stats").new_object("last").set("input", "seen")
        memory.delete("stats.a")  # undone too
        if ctx.resume is None:
            raise Interrupt("ok?")
        memory.set("stats.a", 100)
        ctx.send_event(OutputEvent(output=memory.get_fields()))


async def test_an_interrupted_actions_writes_inside_objects_are_undone_and_count_once(
    tmp_path: Path,
) -> None:
    """Two actions write two fields of one object (``stats.a``, ``stats.b``); the second pauses.
    Its writes inside the object are undone (the object stays with the first action's field), so
    on resume they count once, next to the first action's."""
    runner = Runner(Visits("visits"), checkpoint_store=SQLiteCheckpointStore(tmp_path / "c.db"))
    session = Session({"memory:visits": {"stats": {"__adk_object__": True, "b": 10}}})

    paused = await runner.invoke("go", session=session, checkpoint_id="c1")
    assert paused.interrupt is not None
    assert session.values["memory:visits"] == {"stats": {"__adk_object__": True, "b": 10, "a": 1}}

    done = await runner.invoke_resume("c1", "yes", session=session)
    assert done.events[-1].output is not None
    assert done.events[-1].output.custom == {"stats": "NestedObject"}
    assert session.values["memory:visits"] == {
        "stats": {
            "__adk_object__": True,
            "b": 11,
            "last": {"__adk_object__": True, "input": "seen"},
            "a": 100,
        }
    }


class Fields(ActionAgent):
    """Each record writes one field of the key's ``user`` object; a record asking for approval
    pauses first, and writes its field when resumed."""

    @action(InputEvent)
    def write(self, event: InputEvent, ctx: ActionContext) -> None:
        field, ask = event.input["field"], event.input.get("ask", False)
        if ask and ctx.resume is None:
            raise Interrupt(f"write {field}?")
        ctx.short_term_memory.set(f"user.{field}", event.input["value"])
        ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("user").get_fields()))


async def test_records_of_a_key_writing_two_fields_of_one_object_keep_both() -> None:
    """A key's memory is not merged from copies: its records run one after another on the key's
    session, and a resumed record runs on the session as the key's later records left it. So a
    record paused before writing ``user.b`` and resumed after another wrote ``user.a`` keeps both
    fields, as do two records writing one each."""
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore())
    records = [
        {"key": "k", "field": "b", "value": 2, "ask": True},
        {"key": "k", "field": "a", "value": 1},
        {"key": "k", "field": "c", "value": 3},
    ]
    applied = env.from_list(records, key="key").apply(Fields("fields"))
    paused, first, second = await applied.to_list()
    assert paused.checkpoint_id is not None
    assert [first.output, second.output] == [{"a": 1}, {"a": 1, "c": 3}]

    [resumed] = await applied.resume(paused, "yes")

    assert resumed.output == {"a": 1, "b": 2, "c": 3}
    assert applied.sessions["k"] == {
        "memory:fields": {"user": {"__adk_object__": True, "a": 1, "c": 3, "b": 2}}
    }


class Review(ActionAgent):
    """Keeps the record's review in sensory memory under paths, and pauses before answering."""

    @action(InputEvent)
    def take(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.sensory_memory.set("review.id", event.input)
        ctx.sensory_memory.set("review.score.value", 3)
        if ctx.resume is None:
            raise Interrupt("score?")
        ctx.sensory_memory.set("review.score.value", ctx.resume.data)
        review = ctx.sensory_memory.get("review")
        ctx.send_event(OutputEvent(output=[review.get("id"), review.get("score.value")]))


async def test_sensory_memory_paths_are_saved_with_a_pause_and_resumed_on_a_copy(
    tmp_path: Path,
) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    runner = Runner(Review("review"), checkpoint_store=store)
    first = await runner.invoke("r1", checkpoint_id="c1")
    assert first.interrupt is not None

    done = await runner.invoke_resume("c1", 5)

    assert done.events[-1].output is not None and done.events[-1].output.custom == ["r1", 5]
    assert "memory:review" not in done.session.values  # sensory memory is not in the session


# -- memory saved before paths ----------------------------------------------------------------


def _fixture() -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads(FIXTURE.read_text())
    return fixture


async def test_a_checkpoint_saved_with_flat_dotted_names_resumes_with_them_readable(
    tmp_path: Path,
) -> None:
    """A run paused before paths, its memory holding ``"user.name"`` as one key and its sensory
    memory ``"review.id"``: resumed now, each name reads as it was saved, and a path written
    under ``user`` gathers the old names into the object, while ``"plan.until"`` (``plan`` is a
    value) stays a name of its own, still found."""
    fixture = _fixture()
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    await store.put(fixture["checkpoint_id"], fixture["checkpoint"].encode())

    done = await Runner(Profile("profile"), checkpoint_store=store).invoke_resume(
        fixture["checkpoint_id"], "Oslo"
    )

    assert done.events[-1].output is not None
    old = {"user.name": "Ann", "user.visits": 1, "plan": "pro", "plan.until": "2027-01"}
    assert done.events[-1].output.custom == {
        "id": "r1",
        "names": sorted(old),
        "before": old,
        "held": dict.fromkeys(old, True),
        "user": {"city": "Oslo", "name": "Ann", "visits": 1},
        "after": old,
    }
    assert done.session.values["memory:profile"] == {
        "plan": "pro",
        "plan.until": "2027-01",
        "user": {"__adk_object__": True, "name": "Ann", "visits": 1, "city": "Oslo"},
    }


class SQLiteSessions:
    """A ``SessionStore`` over a real SQLite table, keeping each key's values as JSON text (the
    codec's ``to_json_value``/``from_json_value``, as the docs tell a JSON store to)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY, data TEXT)")

    def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path) as db:
            return db.execute(sql, args).fetchall()

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        rows = await asyncio.to_thread(self._query, "SELECT data FROM sessions WHERE key=?", key)
        values: dict[str, Any] | None = (
            None if not rows else from_json_value(json.loads(rows[0][0]))
        )
        return values

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        text = json.dumps(to_json_value(values, f"the session of {key!r}"))
        await asyncio.to_thread(
            self._query, "INSERT OR REPLACE INTO sessions VALUES (?, ?)", key, text
        )

    def row(self, key: str) -> Any:
        return json.loads(self._query("SELECT data FROM sessions WHERE key=?", key)[0][0])


async def test_a_stores_rows_saved_with_flat_dotted_names_read_and_write_as_before(
    tmp_path: Path,
) -> None:
    """A key's session row written before paths (its memory's names with dots): the next record
    reads each name, writes the old names where they are (``user.visits`` counts on from 1), and
    its path under ``user`` gathers them into the object."""
    fixture = _fixture()
    sessions = SQLiteSessions(tmp_path / "sessions.db")
    assert isinstance(sessions, SessionStore)
    sessions._query(
        "INSERT INTO sessions VALUES (?, ?)", fixture["key"], json.dumps(fixture["session"])
    )

    env = LocalExecutionEnvironment()
    record = {"id": "r2", "name": "Ann", "city": "Bergen"}
    [output] = (
        await env.from_list([record], key="name")
        .apply(Profile("profile"), sessions=sessions)
        .to_list()
    )

    now = {"user.name": "Ann", "user.visits": 2, "plan": "pro", "plan.until": "2027-01"}
    assert output.output == {
        "id": "r2",
        "names": sorted(now),
        "before": now,
        "held": dict.fromkeys(now, True),
        "user": {"city": "Bergen", "name": "Ann", "visits": 2},
        "after": now,
    }
    assert sessions.row("Ann") == {
        "memory:profile": {
            "plan": "pro",
            "plan.until": "2027-01",
            "user": {"__adk_object__": True, "name": "Ann", "visits": 2, "city": "Bergen"},
        }
    }

    # A third record finds the old names inside the object now, by the same paths.
    [again] = (
        await env.from_list([{**record, "id": "r3"}], key="name")
        .apply(Profile("profile"), sessions=sessions)
        .to_list()
    )
    assert again.output["names"] == ["plan", "plan.until", "user"]
    assert again.output["before"] == {**now, "user.visits": 3}
    assert again.output["user"] == {"city": "Bergen", "name": "Ann", "visits": 3}


def test_the_fixture_is_what_the_version_before_paths_saved() -> None:
    """The checkpoint in the fixture holds the flat names, and in the version's own encoding."""
    fixture = _fixture()
    body = decode_checkpoint(fixture["checkpoint"].encode(), fixture["checkpoint_id"])
    assert body["session"] == fixture["session"]
    assert body["session"]["memory:profile"]["user.name"] == "Ann"
    [state] = body["states"].values()
    assert state[""]["sensory"] == {"review.id": "r1"}


async def test_an_action_error_names_the_path_a_set_went_through() -> None:
    """A refusal inside an action reaches the caller as the action's error, naming the path."""

    def step(ctx: ActionContext) -> None:
        ctx.short_term_memory.set("plan", "pro")
        ctx.short_term_memory.set("plan.until", "2027")

    with pytest.raises(RunError) as raised:
        await _run(step)
    error = raised.value.__cause__
    assert isinstance(error, ActionError) and isinstance(error.__cause__, ValueError)
    assert "'plan.until' goes through 'plan', which holds a value" in str(error)
