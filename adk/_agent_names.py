"""The names of the agents a runner's tree holds, for refusing ``agent_options`` that designate
none of them (``Runner.run(agent_options=...)``).

A designated name is looked up as each agent starts (``_RunState.options_for``): a typo
(``"biling"``) matched no agent, and the options went unread with no word, the agent running
without them. The tree is found as the runner finds what to close (``_closable_parts``), by duck
typing through what agents, tools and toolsets hold in their attributes: sub-agents, workflow
steps, flow nodes, an ``AgentTool``'s agent, the tools of an agent and of the runner's
resources. Only when ``agent_options`` is given: a run without it walks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._parts import attributes, members

__all__ = ["unknown_designated"]

_UPWARD = frozenset({"parent", "_adk_parent"})  # a flow's link to the agent above it


def unknown_designated(
    names: Iterable[str], roots: Iterable[object], is_part: Callable[[object], bool]
) -> ValueError | None:
    """The refusal of the designated ``names`` that no agent under ``roots`` (the runner's agent
    and resources) has, naming those it has; None when each names one. ``is_part`` says what the
    walk looks into (the runner's ``_is_part``: agents, tools, toolsets, models)."""
    known = _agent_names(roots, is_part)
    unknown = sorted(name for name in names if name not in known)
    if not unknown:
        return None
    return ValueError(
        f"agent_options names no agent of this runner: {unknown}; its agents are "
        f"{sorted(known)} (options designated to a name no agent has would go unread: a typo?)"
    )


def _agent_names(roots: Iterable[object], is_part: Callable[[object], bool]) -> set[str]:
    names: set[str] = set()
    for part in tree_parts(roots, is_part):
        name = getattr(part, "name", None)
        # An agent: a name and a run, and no spec (a tool has a name and a run too).
        if (
            isinstance(name, str)
            and callable(getattr(part, "run", None))
            and not hasattr(part, "spec")
        ):
            names.add(name)
    return names


def tree_parts(roots: Iterable[object], is_part: Callable[[object], bool]) -> list[Any]:
    """Every part of the tree under ``roots`` (see the module docstring), each once."""
    seen: set[int] = set()
    found: list[Any] = []
    pending: list[Any] = [root for root in roots if root is not None]
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        found.append(part)
        for attribute, value in attributes(part):
            if attribute not in _UPWARD:
                pending.extend(members(value, keep=is_part))
    return found
