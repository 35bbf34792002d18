"""What a resume may still run within the run's ``max_turns`` (the model calls made before the
pause count, under the saved limit or a resume's own).

A paused step whose resume makes its approved calls (a refund) and then reaches a model call
past the limit fails after those calls, with the checkpoint kept: a retry with a higher limit
makes them again. So the resume's check before anything runs (``adk._preflight``) counts the
model calls the resume is certain to make after the paused calls (``count_ahead``, into
``Preflight.turns_ahead``), each component its own as the walk passes it, after what lies below
it (which runs first), and their sum is held against the calls left, not each alone: one call
left and two certain is refused too. Who counts what:

- a ``ReActAgent``'s paused round its results' call, when the round cannot end the agent
  without its model; when it ends it by a transfer alone, the agent transferred to and, for a
  supervisor's worker, the supervisor's turn after the report back (``_ReActCore._count_round``;
  a round at the limit that needs its own call is refused first, ``_check_round_fits``);
- an ``ActionAgent`` its built-in chat's call after the paused action (``adk.actions._builtin``);
- a ``SequentialAgent``/``LoopAgent`` each later step's calls as it starts (``first_calls``: a
  workflow as every agent in it that asks first), a loop's next iteration only when no later
  step asks (``adk.workflows._check_turns_left``);
- a transfer flow the supervisor's turn after a worker's report back
  (``FlowAgent._check_report_back``).

Nothing is counted after what does not go on in this resume: a paused round that exits, or
breaks the loop a workflow is in (``Preflight.note_ending``, ``Preflight.stops``), and a point
the resume leaves waiting, where what holds it pauses again (``_ResumePlan.leaves_waiting``).
What the walk cannot see is left as it stands: an ending that an agent of one's own or a
resumed call asks for is taken as none (a higher ``max_turns`` resumes it), and the model calls
of an agent of one's own are not counted (it fails on the limit as it asks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._preflight import Preflight
    from .agent import Agent
    from .context import RunContext, _Turns

__all__ = ["count_ahead", "first_askers", "first_calls", "spent_text", "spent_turns", "turns_limit"]


def turns_limit(ctx: RunContext) -> int:
    """The run's ``max_turns``, for a refusal: one is set wherever a refusal is made."""
    turns = ctx._run.turns
    assert turns is not None
    return turns.limit


def spent_turns(ctx: RunContext) -> _Turns | None:
    """The run's turns when no model call is left, else None (no limit, or calls left)."""
    turns = ctx._run.turns
    return turns if turns is not None and turns.used >= turns.limit else None


def spent_text(turns: _Turns, ahead: list[str] | None = None) -> str:
    """The start of a refusal: how many calls the run made before the pause, against what, and
    which calls the resume is certain to make first with those left (``ahead``)."""
    if not ahead:
        where = "beyond" if turns.used > turns.limit else "at"
        return (
            f"the run paused after {turns.used} model calls, {where} the run's max_turns of "
            f"{turns.limit}"
        )
    left = "the one call left goes" if len(ahead) == 1 else f"the {len(ahead)} calls left go"
    return (
        f"the run paused after {turns.used} model calls of the run's max_turns of "
        f"{turns.limit}, and {left} to {', then '.join(ahead)}"
    )


def count_ahead(walk: Preflight, ctx: RunContext, what: str) -> str | None:
    """Count one model call the resume is certain to make after the paused calls run (``what``
    names it, for a later refusal). None when the run has a call left for it (or no limit), else
    the start of the refusal (``spent_text``), for the caller to finish with what asks."""
    turns = ctx._run.turns
    if turns is None:
        return None
    ahead = walk.turns_ahead
    if turns.used + len(ahead) >= turns.limit:
        return spent_text(turns, ahead)
    ahead.append(what)
    return None


def first_calls(agent: Agent, ctx: RunContext) -> list[str]:
    """The agents certain to make a model call as ``agent`` starts (``first_askers``), by name,
    one per call: none when a ``before_agent`` callback of the run can answer for it."""
    hooks = ctx._run.hooks
    return first_askers(agent) if hooks is None or not hooks.answers_agents else []


def first_askers(agent: object) -> list[str]:
    """The agents certain to make a model call as ``agent`` starts, by name, one per call: as
    its class says (``_adk_first_askers``). A ``ReActAgent`` is one (``True``: itself); what
    starts other agents names theirs: a sequence or a loop every step of its (first)
    iteration's, a parallel workflow every branch's (each is certain once the one before it, or
    beside it, does not end the workflow first, as a workflow's later steps are after a paused
    one: counted), a transfer flow its agent's, a supervisor's worker or a plan-execute role its
    agent's, a ``PlanExecute`` its planner's. None when it has a ``before_agent`` callback of its
    own that could answer for it; its other callbacks cannot spare its model call (counted
    before a ``before_model`` callback runs: ``adk.models._call``)."""
    callbacks = getattr(agent, "_adk_callbacks", None)
    if callbacks is not None and getattr(getattr(callbacks, "chain", None), "before_agent", True):
        return []
    askers = getattr(agent, "_adk_first_askers", False)
    if askers is True:
        return [getattr(agent, "name", "?")]
    return list(askers) if askers else []
