"""What the warnings logged once per tool name remember does not grow with the names seen.

A service runs for weeks; tools named per request or per tenant (made on the fly, listed by MCP
servers) each returning a value a checkpoint or an event's JSON cannot hold left their names in
a process-wide set, one entry per name for the life of the process. Counted after two numbers
of distinct names: the same count for both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from adk import AgentEvent
from adk._warned import Warned
from adk.actions import _builtin
from adk.checkpoint import codec
from adk.messages import Message


def _events_of_tools(names: range, prefix: str) -> None:
    for n in names:
        message = Message(
            role="tool", content="ok", name=f"{prefix}{n}", metadata={"structured": object()}
        )
        dumped = AgentEvent.of(message).to_dict()["output"]["message"]
        assert dumped["metadata"] == {"structured": None}


def _saves_of_tools(names: range, prefix: str) -> None:
    for n in names:
        assert _builtin._carried(object(), f"{prefix}{n}") is None


@pytest.mark.parametrize(
    ("warned", "drop", "logger"),
    [
        (lambda: codec._warned_structured, _events_of_tools, "adk.tools"),
        (lambda: _builtin._warned_unsaved, _saves_of_tools, "adk.actions"),
    ],
    ids=["event-json-and-checkpoint", "action-round-saved"],
)
def test_the_tool_names_warned_about_are_bounded_however_many_are_seen(
    warned: Callable[[], Warned],
    drop: Callable[[range, str], None],
    logger: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    remembered = warned()
    sizes = []
    with caplog.at_level(logging.ERROR, logger=logger):  # the warnings themselves: not here
        for count in (300, 600):
            drop(range(count), f"tool_{count}_")
            sizes.append(len(remembered))
    assert sizes[0] == sizes[1], sizes  # was 300 then 900: one entry per distinct name
    assert sizes[1] <= 256, sizes


def test_a_tool_is_still_warned_about_once_while_remembered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bound keeps the rule: one warning per tool name, not one per event."""
    codec._warned_structured.discard(("repeated", "an event's JSON"))
    message = Message(role="tool", content="ok", name="repeated", metadata={"structured": object()})
    with caplog.at_level(logging.WARNING, logger="adk.tools"):
        for _ in range(5):
            AgentEvent.of(message).to_dict()
    said = [r for r in caplog.records if "'repeated'" in r.getMessage()]
    assert len(said) == 1, said
