"""An agent whose memory holds names with dots, and the fixture it left before memory had paths.

Before memory paths, ``set("user.name", ...)`` stored one key named ``"user.name"``. Memory saved
then (a key's session in a ``SessionStore`` row or Flink's keyed state, a paused run's checkpoint
with its sensory memory) must read as it did. ``tests/fixtures/flat_memory.json`` was written by
``write_fixture`` running on that version's code (main at 030fff8), from a directory where ``adk``
was main's and ``tests`` this one::

    mkdir gen && ln -s /work/main/adk gen/adk && ln -s $PWD/tests gen/tests
    cd gen && python -m tests.legacy_memory $OLDPWD/tests/fixtures/flat_memory.json

It holds the key's session as a store keeps it (``to_json_value``'s JSON) and the checkpoint of
the record's pause (its text: a header line and the JSON body).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from adk import Interrupt
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import to_json_value
from adk.execution import LocalExecutionEnvironment

__all__ = ["Noted", "Profile", "write_fixture"]

NAMES = ("user.name", "user.visits", "plan", "plan.until")
"""The names ``Profile`` keeps, read back by the same names after the pause."""


class Noted(Event):
    text: str
    ask: bool = False


class Profile(ActionAgent):
    """Keeps a visitor's profile under dotted names (one key each, before paths); a record with
    ``ask`` pauses in ``confirm`` for a person's answer. After the pause (or without ``ask``)
    ``confirm`` reads every name back and then writes the path ``user.city``."""

    @action(InputEvent)
    def remember(self, event: InputEvent, ctx: ActionContext) -> None:
        memory, record = ctx.short_term_memory, event.input
        memory.set("user.name", record["name"])
        memory.set("user.visits", memory.get("user.visits", 0) + 1)
        memory.set("plan", "pro")
        memory.set("plan.until", "2027-01")  # "plan" is a value: this name cannot join it
        ctx.sensory_memory.set("review.id", record["id"])
        ctx.send_event(Noted(text=record.get("city", ""), ask=record.get("ask", False)))

    @action(Noted)
    def confirm(self, event: Noted, ctx: ActionContext) -> None:
        if event.ask and ctx.resume is None:
            raise Interrupt({"confirm": ctx.sensory_memory.get("review.id")})
        memory = ctx.short_term_memory
        output: dict[str, Any] = {
            "id": ctx.sensory_memory.get("review.id"),
            "names": sorted(memory),
            "before": {name: memory.get(name) for name in NAMES},
            "held": {name: name in memory for name in NAMES},
        }
        memory.set("user.city", ctx.resume.data if ctx.resume is not None else event.text)
        output["user"] = memory.get("user").get_fields()
        output["after"] = {name: memory.get(name) for name in NAMES}
        ctx.send_event(OutputEvent(output=output))


async def write_fixture() -> dict[str, Any]:
    """What the fixture holds: one record of key ``"Ann"`` that paused after writing memory."""
    store = InMemoryCheckpointStore()
    sessions: dict[Any, dict[str, Any]] = {}
    record = {"id": "r1", "name": "Ann", "ask": True}
    env = LocalExecutionEnvironment(checkpoint_store=store)
    [paused] = (
        await env.from_list([record], key="name")
        .apply(Profile("profile"), sessions=sessions)
        .to_list()
    )
    assert paused.checkpoint_id is not None, paused
    saved = await store.get(paused.checkpoint_id)
    assert saved is not None
    return {
        "written_by": "pyadk main 030fff8, before memory paths",
        "key": "Ann",
        "session": to_json_value(sessions["Ann"], "the session"),
        "checkpoint_id": paused.checkpoint_id,
        "checkpoint": saved.decode(),
    }


if __name__ == "__main__":
    # Run as ``-m``, this module is ``__main__``: its classes would be saved under that name.
    import tests.legacy_memory as legacy

    fixture = asyncio.run(legacy.write_fixture())
    with open(sys.argv[1], "w") as file:
        json.dump(fixture, file, indent=1)
        file.write("\n")
