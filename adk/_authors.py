"""Agents of one history whose names must stay their own.

Every agent reads the history by author name: its own messages as its own, everyone else's as
``For context: ...`` (DESIGN "History"). Two different agents of one name in one history each read
the other's messages as their own. ``adk`` lets plain agents share a name (two agents of the same
name under different parents are told apart by run path for transfers), but an agent may say that
its parts depend on reading only their own messages (``_adk_authors``: ``PlanExecute``, whose
planner would take another's plan for one it wrote). A workflow or flow then refuses, where it is
made, children whose agents would share such a name. Construction-time only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Author", "authors", "check_authors"]

Author = tuple[str, object, str, object]
"""``(name, agent, who, keeper)``: an agent recording in the history under ``name``, described as
``who`` for an error message; ``keeper`` is the agent that needs that name to be this agent's own
(the ``PlanExecute`` whose role it is), ``None`` when nothing does."""


def authors(agent: Any, seen: set[int] | None = None) -> Iterator[Author]:
    """The agents in ``agent``'s tree that record in the history it records in: itself and its
    sub-agents, down (an ``AgentTool``'s agent runs on a history of its own and is not one). An
    agent with ``_adk_authors`` lists its own."""
    seen = set() if seen is None else seen
    if id(agent) in seen:  # an agent wired into the tree twice, or a cycle: listed once
        return
    seen.add(id(agent))
    own = getattr(agent, "_adk_authors", None)
    if own is not None:
        yield from own(seen)
        return
    name = getattr(agent, "name", None)
    if isinstance(name, str):
        yield name, agent, f"agent {name!r}", None
    for child in getattr(agent, "sub_agents", None) or ():
        yield from authors(child, seen)


def check_authors(owner: str, children: Sequence[Any]) -> None:
    """Refuse ``children`` of ``owner`` (``"SequentialAgent 'steps'"``) when an agent of one
    child and a different agent of another share a name that one of them must keep its own, or
    when one agent is a role of two different keepers in them (two ``PlanExecute``s given one
    planner: the second would read the first one's plan as its own, as two planners of one name
    would). One agent wired in twice (one ``PlanExecute`` run twice) is still one agent."""
    found: dict[str, list[tuple[int, Author]]] = {}
    for index, child in enumerate(children):
        for author in authors(child):
            found.setdefault(author[0], []).append((index, author))
    for name, entries in found.items():
        if len(entries) < 2:
            continue
        for index, (_, agent, who, keeper) in entries:
            if keeper is None:
                continue
            for other_index, (_, other, other_who, other_keeper) in entries:
                if other_index == index:
                    continue
                if other is not agent:
                    raise ValueError(
                        f"{owner}: {who} and {other_who} are both named {name!r}: they write to "
                        "one history, which each agent reads by author name, so each would read "
                        "the other's messages as its own; name them apart"
                    )
                if other_keeper is not None and other_keeper is not keeper:
                    raise ValueError(
                        f"{owner}: {who} is also {other_who} (one agent {name!r}): both write "
                        "to one history, which each reads by author name, so each would read "
                        "the other's messages as its own; give each its own agent, named apart"
                    )
