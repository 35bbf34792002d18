"""What a resume with no model call left may still run (the run's ``max_turns`` spent before
the pause, or a resume's lower one).

A paused step whose resume makes its approved calls (a refund) and then reaches an agent that
must ask its model fails on the limit after those calls, with the checkpoint kept: a retry
with a higher limit makes them again. The components that know what comes after a pause
(a workflow's later steps, a supervisor's report back) refuse such a resume before anything
runs, when they can tell the next agent asks its model first (``asks_model_first``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext, _Turns

__all__ = ["asks_model_first", "spent_text", "spent_turns"]


def spent_turns(ctx: RunContext) -> _Turns | None:
    """The run's turns when no model call is left, else None (no limit, or calls left)."""
    turns = ctx._run.turns
    return turns if turns is not None and turns.used >= turns.limit else None


def spent_text(turns: _Turns) -> str:
    """The start of a refusal: how many calls the run made before the pause, against what."""
    where = "beyond" if turns.used > turns.limit else "at"
    return f"the run paused after {turns.used} model calls, {where} the run's max_turns of {turns.limit}"


def asks_model_first(agent: Agent, ctx: RunContext) -> bool:
    """Whether ``agent`` is certain to make a model call as it starts: an agent whose class says
    so (``_adk_asks_model_first``: ``ReActAgent``), when no ``before_agent`` callback can answer
    for it instead (none of its own, none of the run's)."""
    if not getattr(agent, "_adk_asks_model_first", False):
        return False
    hooks = ctx._run.hooks
    return getattr(agent, "_adk_callbacks", None) is None and (
        hooks is None or not hooks.answers_agents
    )
