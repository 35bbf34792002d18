"""PlanExecute's state: the session keys and values, where a plan in the session came from, and
the history a step's agent runs on. See ``plan_execute`` for how the steps use them."""

from __future__ import annotations

import weakref
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from adk import Message, RunContext, Session, register_type
from adk.context import _Lane, new_lane

PLAN_KEY = "plan"
EXECUTED_STEPS_KEY = "executed_steps"
OBJECTIVE_KEY = "objective"


class Plan(BaseModel):
    """The steps still to do, in order."""

    # Built on first use, not at import (as adk's own models): its schema and the adapter's
    # below would otherwise be built by ``import prebuilt`` (and pydantic's plugin lookup, which
    # imports importlib.metadata, with them) in every program, PlanExecute or not.
    model_config = ConfigDict(defer_build=True)

    steps: list[str] = Field(
        description="The steps to follow, in order. Each step is a self-contained task."
    )

    @field_validator("steps")
    @classmethod
    def _without_blank_steps(cls, steps: list[str]) -> list[str]:
        """Stripped, blank ones dropped (as ``update_plan`` does): models do emit ``"  "`` steps,
        and an executor would run on one with nothing to do."""
        return [step.strip() for step in steps if step.strip()]

    def __str__(self) -> str:
        return "\n".join(f"{i}. {step}" for i, step in enumerate(self.steps, 1)) or "(no steps)"

    @classmethod
    def _adk_answer_problem(cls, answer: BaseModel, ctx: RunContext) -> str | None:
        """What is wrong with ``answer``, a ``ReActAgent``'s ``output_schema`` answer that
        validated, as the agent's retry tells its model (``ReActAgent`` asks its schema): a plan
        with no steps, from the agent of a ``PlanExecute``'s planner step (``planning``). Valid
        elsewhere (a replanner's plan with nothing left, a checkpoint's), so not a validator;
        refused by the step after the agent, it failed the run where any other answer that is no
        plan gets the output retry."""
        if not isinstance(answer, Plan) or answer.steps:
            return None
        if (id(ctx.session), ctx.address) not in planning:
            return None
        return (
            "the plan has no steps (blank ones are dropped); a plan needs at least one, even if "
            "only to answer the objective"
        )


class ExecutedStep(BaseModel):
    """A finished step and what its execution returned."""

    model_config = ConfigDict(defer_build=True)

    step: str
    result: str


_EXECUTED_STEPS = TypeAdapter(list[ExecutedStep], config=ConfigDict(defer_build=True))

planning: set[tuple[int, str]] = set()
"""The planner steps running now, by session and address (their agent's, as the step runs it in
place): where ``Plan._adk_answer_problem`` refuses an empty plan."""

register_type(Plan, "prebuilt.Plan")
register_type(ExecutedStep, "prebuilt.ExecutedStep")


def _plan(ctx: RunContext) -> Plan:
    value = ctx.session.get(PLAN_KEY)
    if isinstance(value, Plan):
        return value
    if value is None:
        raise LookupError(f"plan-execute: the session has no {PLAN_KEY!r}; the planner runs first")
    try:
        return Plan.model_validate(value)
    except ValidationError as exc:
        raise TypeError(f"plan-execute: session[{PLAN_KEY!r}] is not a Plan: {exc}") from exc


def _executed(ctx: RunContext) -> list[ExecutedStep]:
    """The steps done so far, as the session holds them (validated like the plan: the session may
    come from a checkpoint, or the application may have set it)."""
    value = ctx.session.get(EXECUTED_STEPS_KEY) or []
    try:
        return _EXECUTED_STEPS.validate_python(value)
    except ValidationError as exc:
        raise TypeError(
            f"plan-execute: session[{EXECUTED_STEPS_KEY!r}] is not a list of ExecutedStep: {exc}"
        ) from exc


_Tags = dict[int, tuple[weakref.ref[Plan], str]]

_origins: _Tags = {}
"""Where each ``Plan`` object in a session was stored from, by id (a ``Plan`` is not hashable):
the address of the ``PlanExecute`` whose step stored it, or of the ``update_plan`` call. Entries
go with their plan. A plan without one was stored by an agent itself (or by the application, or
it came from a checkpoint).

A step's ``_Seen.note`` (in ``plan_execute``) takes only a plan without one for one its role
stored in the session: one a ``PlanExecute`` inside the role stored (through an ``AgentTool``,
which shares the session, or as a workflow in the role) is that one's own, and ``update_plan``
hands its plan to its step directly (``_listening``), so that a ``PlanExecute`` running beside
this one (a parallel branch) cannot pass its plan off as this one's. A step's plan at its start
must come from its own ``PlanExecute`` (``_clash``)."""

_takers: _Tags = {}
"""The step that took each plan an agent stored itself (``_Seen.note``), by id as above: a step
around it (of a ``PlanExecute`` whose role that step's ``PlanExecute`` is, so it sees the same
events after it) must not take it for its own role's too. A step beside it (a parallel branch)
still does, as before, since the two cannot be told apart there."""


def _tag(plan: Plan, address: str, tags: _Tags = _origins) -> None:
    key = id(plan)

    def forget(ref: weakref.ref[Plan]) -> None:
        entry = tags.get(key)
        if entry is not None and entry[0] is ref:  # not a later tag of the same plan
            tags.pop(key, None)

    tags[key] = (weakref.ref(plan, forget), address)


def _origin(value: object, tags: _Tags = _origins) -> str | None:
    """Where ``value`` was stored from (see ``_origins``; with ``_takers``, which step took it);
    None if it is not known."""
    entry = tags.get(id(value))
    if entry is None or entry[0]() is not value:
        return None
    return entry[1]


def _within(address: str, base: str) -> bool:
    return address == base or address.startswith(base + "/")


def _home(ctx: RunContext, depth: int) -> str:
    """The address of the ``PlanExecute`` whose step runs at ``ctx``, ``depth`` levels up."""
    return ctx.address.rsplit("/", depth)[0]


def _clash(role: str, origin: str) -> RuntimeError:
    return RuntimeError(
        f"plan-execute role '{role}': session[{PLAN_KEY!r}] holds a plan another PlanExecute "
        f"stored ({origin}) since this one's last step. PlanExecutes running at the same time in "
        f"one session (branches of a ParallelAgent) share its keys {OBJECTIVE_KEY!r}, "
        f"{PLAN_KEY!r} and {EXECUTED_STEPS_KEY!r}, which each of them reads at the start of a "
        "step: run them one after the other, or each in a session of its own"
    )


def _put_plan(session: Session, plan: object, home: str) -> None:
    """Store the plan as the ``PlanExecute`` at ``home`` (see ``_origins``)."""
    if isinstance(plan, Plan):
        _tag(plan, home)
    session[PLAN_KEY] = plan  # anything else: the next step's ``_plan`` says what is wrong


class _StepView:
    """The history an executor's or replanner's agent runs on: the step prompt as its input, then
    only what the step itself records, as for a plain agent given the prompt. A workflow or flow
    in the role builds its agents' inputs from the history rather than from the input it is
    given; on the run's history they would never see the step, and would read the whole run.

    What the step records is passed on to the run's history as it comes (``flush``, before each
    event goes up), so a checkpoint holds it; on resume the step's lane gets it back: the entries
    recorded since ``fork`` (the history's order number when the step started, saved at the
    pause) at or below the step's run path.
    """

    __slots__ = ("ctx", "flushed", "fork", "lane", "parent")

    def __init__(self, ctx: RunContext, prompt: list[Message], fork: int | None) -> None:
        self.parent = ctx._lane
        inherited: list[Any] = []
        if fork is None:
            fork = ctx._run.seq
        else:
            path, depth = ctx.run_path, len(ctx.run_path)
            inherited = [
                e for e in self.parent.snapshot() if e.seq >= fork and e.run_path[:depth] == path
            ]
        self.fork = fork
        self.lane: _Lane = new_lane(self.parent, inherited, list(prompt))
        self.flushed = -1  # the order number of the last entry passed on
        self.ctx = ctx._fork(lane=self.lane)

    def flush(self) -> None:
        """Pass on the entries recorded since the last flush, found by their order numbers
        rather than counted: an agent may take an entry out again (``RunContext._withdraw``),
        from this lane and the parent's, and a count would then skip the next one."""
        entries = self.lane.entries
        if entries and entries[-1].seq > self.flushed:
            start = len(entries) - 1
            while start and entries[start - 1].seq > self.flushed:
                start -= 1
            self.parent.entries.extend(entries[start:])
            self.flushed = entries[-1].seq
