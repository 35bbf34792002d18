"""``PlanExecute``: plan, then execute one step at a time and replan until the task is answered.

It is ``SequentialAgent([planner, LoopAgent([executor, replanner])])`` with a thin bookkeeping layer
around each role, so interrupts, checkpoints and resume work through it like any workflow. The
state lives in session values (all checkpointable):

- ``objective`` (str): what the user asked, taken from the planner's input without the
  ``transfer_to_agent`` calls and results of a flow around it (a ``Supervisor``'s routing);
  transferred to again, from what was said since its last turn; its own earlier turns (a
  ``LoopAgent``'s next iteration, a carried conversation) left out but for their answers; given
  an input a parent agent made, from that input (``_PlanStep._objective``);
- ``plan`` (``Plan``): the steps still to do; ``plan.steps[0]`` is the next one;
- ``executed_steps`` (list of ``ExecutedStep``): each finished step with its result.

Roles, any agent each (``new_planner``/``new_executor``/``new_replanner`` build model-backed ones):

- the planner reads the conversation and produces a ``Plan`` of at least one step: as its
  ``custom`` output (what ``ReActAgent(output_schema=Plan)`` emits), as JSON text, or by storing
  it in ``session["plan"]``;
- the executor gets one user message with the objective, the plan, the finished steps and the step
  to do; its last output is the step's result. The step then leaves the plan. The message is also
  the start of the history the executor runs on (``_StepView``), so a workflow in the role reads
  the step as a plain agent does;
- the replanner gets the objective, finished steps and remaining plan. It either stores a new plan
  (the ``update_plan`` tool, a ``Plan`` custom output, or ``session["plan"]``) and the loop goes on,
  or it answers: its last output (text, or a return-directly result), unless blank, is the response
  and the loop ends. A replanner that says nothing (or only blank text) keeps the remaining plan;
  with none left, the loop ends.

A ``break_loop`` from the executor or the replanner ends the loop as the response too, unless a
loop inside the role took it (that break is the inner loop's). Plan steps are stripped and blank
ones dropped. What a role handed over before it was interrupted (a plan it stored included) still
counts when it resumes. Each step writes back the objective, plan and finished steps it started
from (or the plan its role handed over): another ``PlanExecute`` a role runs (through an
``AgentTool``, which shares the session) keeps its own under the same keys, and the plan that one
stores is not taken for the role's (``_origins``).

When ``max_iterations`` execute/replan rounds pass without a response, the run ends with an error
event saying ``exceeds max iterations``, like ``ReActAgent``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    ChatModel,
    CheckpointError,
    FunctionTool,
    LoopAgent,
    Message,
    ModelOptions,
    RunContext,
    SequentialAgent,
    ToolContext,
    ToolError,
    ToolResult,
)
from adk._aio import closing
from adk._authors import Author, authors
from adk._checks import check_count, checked_settings
from adk._driver import NO_EVENT, drive
from adk._hooks import annotate
from adk._turns_left import first_askers
from adk.checkpoint._state import SavedState
from adk.events import _BREAK_HANDLED, _FORWARDED
from adk.history import _input_without_tool, _is_history_view
from adk.tools.function import _ModelResult

from ._instruction import InstructionProvider
from ._output import parse_output
from ._plan_state import (
    _EXECUTED_STEPS,
    EXECUTED_STEPS_KEY,
    OBJECTIVE_KEY,
    PLAN_KEY,
    ExecutedStep,
    Plan,
    _clash,
    _executed,
    _home,
    _origin,
    _plan,
    _put_plan,
    _StepView,
    _tag,
    _takers,
    _within,
    planning,
)
from ._react_tools import TRANSFER_TOOL
from .react import MaxIterationsError, ReActAgent, ToolSource

if TYPE_CHECKING:
    from adk._preflight import Preflight

__all__ = [
    "EXECUTED_STEPS_KEY",
    "OBJECTIVE_KEY",
    "PLAN_KEY",
    "ExecutedStep",
    "Plan",
    "PlanExecute",
    "new_executor",
    "new_planner",
    "new_replanner",
]

PLANNER_INSTRUCTION = (
    "You are a planner. For the user's objective, write a simple step-by-step plan: individual "
    "tasks that, done in order, lead to the answer. Do not add superfluous steps, and give each "
    "step all the information it needs (later steps cannot ask the user). The result of the last "
    "step should be the final answer."
)
EXECUTOR_INSTRUCTION = (
    "You carry out one step of a plan, using your tools when they help. Do only the step you are "
    "given, then reply with its result: the facts or output later steps need, concisely."
)
REPLANNER_INSTRUCTION = (
    "You review the progress of a plan. If the objective is achieved, answer the user directly "
    "with the final response (plain text, no tool call). Otherwise call update_plan with only the "
    "steps that still need to be done; never repeat finished steps."
)


# -- session state ------------------------------------------------------------------------------
def _objective_of(messages: list[Message]) -> str:
    return "\n".join(m.content for m in messages if m.role == "user" and m.content)


def _done_text(executed: list[ExecutedStep]) -> str:
    if not executed:
        return "(none yet)"
    return "\n".join(f"{i}. {e.step}\n   Result: {e.result}" for i, e in enumerate(executed, 1))


def _executor_prompt(objective: object, plan: Plan, done: list[ExecutedStep]) -> str:
    return (
        f"Objective:\n{objective}\n\n"
        f"Plan (remaining steps):\n{plan}\n\n"
        f"Completed steps and results:\n{_done_text(done)}\n\n"
        f"Your task: carry out step 1 of the remaining plan, which is:\n{plan.steps[0]}"
    )


def _replanner_prompt(objective: object, plan: Plan, done: list[ExecutedStep]) -> str:
    return (
        f"Objective:\n{objective}\n\n"
        f"Completed steps and results:\n{_done_text(done)}\n\n"
        f"Remaining plan:\n{plan}\n\n"
        "If the objective is achieved, answer the user with the final response. Otherwise update "
        "the plan with the steps that still need to be done."
    )


# -- reading what a role produced ---------------------------------------------------------------
async def _text_of(event: AgentEvent) -> str | None:
    """The text an output event contributes as a result (None: not a result, e.g. a tool call)."""
    output = event.output
    if output is None:
        return None
    if output.custom is not None:
        custom = output.custom
        if isinstance(custom, BaseModel):
            return custom.model_dump_json()
        return custom if isinstance(custom, str) else json.dumps(custom, default=str)
    message = output.message
    if message is None and output.stream is not None:
        if output.shown_only:  # e.g. an event-driven chat's reply, shown: not the role's answer
            return None
        try:
            message = await output.stream.collect()
        except Exception:
            # Not a result. The agent that streamed it reads the same stream (its driver records
            # it): its own error event comes next and ends the step, so the run fails as that
            # agent's (its callbacks and span see the failure), as AgentTool reads it; raised
            # here, it failed as the role's workflow's, the agent never told.
            return None
    if message is None or message.tool_calls or message.role == "user":
        return None
    return message.content


def _as_plan(value: Any) -> Plan | None:
    if isinstance(value, Plan):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        try:
            return Plan.model_validate(value)
        except ValidationError:
            return None
    return None


async def _plan_in(event: AgentEvent) -> tuple[Plan | None, str | None]:
    """The plan an output event carries, or why it is not one (None, None: not an output)."""
    output = event.output
    if output is None:
        return None, None
    if output.custom is not None:
        plan = _as_plan(output.custom)
        return plan, None if plan is not None else f"its output {output.custom!r} is not a Plan"
    text = await _text_of(event)
    if text is None:
        return None, None
    parsed, why = parse_output(Plan, text)
    return (parsed, None) if isinstance(parsed, Plan) else (None, why)


_ROLE_SLOT = "plan_execute"
"""Where a role saves its own state at a pause: at its agent's address (the role runs the agent
there), in a slot of its own beside the agent's."""

_ENDS_LOOP = 1 << 16
"""Event flag (well above adk's own, see ``adk.events``): a break a role passed on, which ends the
execute/replan loop. ``PlanExecute`` counts only these as its response: by the time a break
reaches it the loop has marked it handled, as an inner loop of a role marks its own, so adk's
flags cannot tell the two apart there."""


_INNER_PLAN = 1 << 17
"""Event flag: the output's plan is a ``PlanExecute``'s own, read by its step: its planner's
outputs (its plan, as JSON text or a ``Plan``) and its replanner's ``Plan`` outputs. A step of a
``PlanExecute`` around it (whose role this one is, or runs in a workflow) does not take that plan
for its role's: an outer replanner went on with the inner planner's first plan as its new one,
where the inner one's answer was its reply. What an inner ``PlanExecute`` answers is not flagged:
that is its output as the role's agent."""

_NOT_THE_ROLES = _INNER_PLAN | _FORWARDED
"""An output a step does not read as its role's: an inner ``PlanExecute``'s plan, or what an
``AgentTool`` shows from its nested run (``emit_inner_events``: copies whose flags are their own,
so ``_INNER_PLAN`` does not reach them), whose plans are that run's, not the role's."""


_listening: dict[tuple[int, str], _Seen] = {}
"""The steps running now, by session and address: ``update_plan`` hands its plan to the nearest
one at or above its call. By session, not run: an ``AgentTool``'s nested run shares its caller's
session and address space, so a helper agent the role asks through one (its own run) hands its
plan to the role's step, while a ``PlanExecute`` the role runs that way has steps of its own
nearer to its calls (its replanner's plan is not the role's)."""


class _Seen:
    """What a role's agent has handed over during its step: a ``Plan`` output, a plan stored in the
    session, its last output as text.

    Saved at a pause and restored on resume: the session the step resumes with already holds a
    plan stored before the pause, which would otherwise pass for the plan the step started with.
    """

    __slots__ = (
        "address",
        "before",
        "broke",
        "broke_before_pause",
        "key",
        "last",
        "plan",
        "stored",
        "stored_plan",
        "text",
    )

    def __init__(self, ctx: RunContext, role: str) -> None:
        self.address = ctx.address
        self.key: tuple[int, str] | None = None  # in ``_listening``
        self.before = self.last = ctx.session.get(PLAN_KEY)
        self.plan: Plan | None = None
        self.stored = False  # the agent stored a plan in the session: ``stored_plan``
        self.stored_plan: object = None
        self.text: str | None = None
        self.broke = False  # the role's agent ended the loop with a break of its own
        self.broke_before_pause = False  # ... in the run that paused: this one has not seen it
        resume = ctx._resume_slot(_ROLE_SLOT)
        if resume is not None and resume.state is not None:
            saved = SavedState(f"plan-execute role '{role}'", resume.state)
            plan, stored, text = (saved.values.get(k) for k in ("plan", "stored", "text"))
            broke = saved.values.get("broke", False)
            stored_plan = saved.values.get("stored_plan")
            if not (
                (plan is None or isinstance(plan, Plan))
                and type(stored) is bool
                and (text is None or isinstance(text, str))
                and type(broke) is bool
                and (stored_plan is None or (stored and isinstance(stored_plan, Plan)))
            ):
                raise saved.error(f"not the state a role saves: {resume.state!r}")
            self.plan, self.stored, self.text = plan, stored, text
            self.broke = self.broke_before_pause = broke
            if stored:
                # Saved since a PlanExecute the role ran may overwrite it; a checkpoint written
                # before saved only the flag, and then the session holds it.
                self.stored_plan = stored_plan if stored_plan is not None else self.before

    def note(self, ctx: RunContext) -> None:
        """Look for a plan the agent stored in the session itself since the last look (after each
        of its events: a ``PlanExecute`` it runs may store its own later); see ``_origins``."""
        value = ctx.session.get(PLAN_KEY)
        if value is not self.last:
            self.last = value
            if value is not self.before and _origin(value) is None:
                taker = _origin(value, _takers)
                if taker is None or not _within(taker, self.address):
                    self.stored, self.stored_plan = True, value
                if taker is None and isinstance(value, Plan):
                    # This role's: a step around this one (whose role is this step's
                    # PlanExecute) notes after this one and must not take it for its own too.
                    _tag(value, self.address, _takers)

    def listen(self, ctx: RunContext) -> None:
        """Take the plans of ``update_plan`` calls in the role until ``done``."""
        self.key = (id(ctx.session), self.address)
        _listening[self.key] = self

    def done(self) -> None:
        key = self.key
        if key is not None and _listening.get(key) is self:
            del _listening[key]

    def stops(self, event: AgentEvent, ctx: RunContext, in_loop: bool) -> bool:
        """For an event with an action: whether the step stops after it. A pause saves what the
        step has seen; in the loop, a break that no loop inside the role took ends the loop."""
        if event._signal is not None:
            self.note(ctx)
            if self.plan is not None or self.stored or self.text is not None or self.broke:
                state: dict[str, object] = {
                    "plan": self.plan,
                    "stored": self.stored,
                    "text": self.text,
                }
                if self.broke:
                    state["broke"] = True
                stored = _as_plan(self.stored_plan) if self.stored else None
                if stored is not None:
                    state["stored_plan"] = stored
                event._signal.save(ctx.address, state, _ROLE_SLOT)
            return True
        action = event.action
        if (
            in_loop
            and action is not None
            and action.break_loop
            and not event._flags & _BREAK_HANDLED
        ):
            # The response; the agent still finishes (a break lets the emitting agent finish:
            # the loop stops after the role's step).
            event._flags |= _ENDS_LOOP
            self.broke = True
        return event.ends_agent

    def handed_over(self, ctx: RunContext) -> tuple[bool, object]:
        """Whether the agent stored a plan during the step, and which."""
        self.note(ctx)
        return self.stored, self.stored_plan

    def ended_loop_before_pause(self) -> AgentEvent | None:
        """A resumed role whose agent broke the loop before the pause: the response that this run
        of ``PlanExecute`` has not seen (the loop itself remembers the break)."""
        if not self.broke_before_pause:
            return None
        return _response()


class _Role:
    """Runs a role agent at its own address (so its interrupts and resume are its own) and lets a
    subclass do the bookkeeping around it."""

    # It runs its agent in place (``adk._instrument``): a ``before_agent`` answer given for the
    # role is its agent's answer, which the step reads (a plan, a result) as it would the agent's.
    _adk_in_place = True

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.name = agent.name
        self.description = agent.description

    @property
    def _adk_callbacks(self) -> Any:
        """Its agent's own callbacks (``callbacks=``): the role and its agent are one agent."""
        return getattr(self.agent, "_adk_callbacks", None)

    @property
    def _adk_agent(self) -> Agent:
        """The role's agent, which callbacks are given for the role (``adk._instrument._made``)."""
        return self.agent

    @property
    def _adk_first_askers(self) -> list[str]:
        """The agents certain to ask their model as it starts (``adk._turns_left``): its
        agent's, as the planner and the replanner run their agent whenever their step runs."""
        return first_askers(self.agent)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.agent!r})"

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): the role agent
        resumes at the role's own address."""
        walk.agent(self.agent, ctx)


_STEPS_DONE = "adk.plan.steps_done"
_STEPS_LEFT = "adk.plan.steps_left"
_STEP = "adk.plan.step"
"""The attributes a role's span gets (docs/tracing.md): where its step stands in the plan, so a
trace shows which step an ``invoke_agent executor`` span carried out (its spans are all named
alike); the step's text only when message content is captured (a model wrote it)."""


_STEP_SLOT = "plan_execute_step"
"""Where a step saves, at a pause, the state it started from (see ``_StepState``)."""


def _saved_step(ctx: RunContext, role: str) -> SavedState | None:
    resume = ctx._resume_slot(_STEP_SLOT)
    if resume is None or resume.state is None:
        return None
    return SavedState(f"plan-execute role '{role}'", resume.state)


def _saved_objective(ctx: RunContext, role: str) -> str | None:
    """The objective the planner's step saved at a pause; None if it saved none."""
    saved = _saved_step(ctx, role)
    if saved is None:
        return None
    objective = saved.values.get("objective")
    if not isinstance(objective, str):
        raise saved.error(f"'objective' must be a str, not {objective!r}")
    return objective


class _PlanStep(_Role):
    def __init__(
        self, agent: Agent, given: dict[tuple[int, str], str], names: frozenset[str]
    ) -> None:
        super().__init__(agent)
        self._given = given  # the objective its ``PlanExecute`` was handed (``_given_key``)
        self._names = names  # the agents of its ``PlanExecute``: what a turn of it recorded

    def _objective(self, ctx: RunContext) -> str:
        """The objective of a run that starts here (not resumed): the input a parent agent
        handed the ``PlanExecute`` (``PlanExecute._until_response``), else what the history says
        to it. Transferred to again (a supervisor's worker delegated to another task), only what
        was said since its last turn: its earlier objectives, plans and answers piled up in the
        objective every executor and replanner prompt repeats. Not transferred to, its own
        earlier turns' messages are left out (``without``) for the same reason, but for each
        turn's answer, which what follows refers to (a critic's ``shorten it``)."""
        given = self._given.get(_given_key(ctx, _home(ctx, 1)))
        if given is not None:
            return given
        entries = ctx._lane.entries if ctx._lane.parent is None else ctx._lane.snapshot()
        last = entries[-1].message if entries else None
        transferred = last is not None and last.role == "tool" and last.name == TRANSFER_TOOL
        since = self._names if transferred else ()
        # Its own earlier turns (a LoopAgent's next iteration, a conversation carried from run to
        # run) are its plans, its executor's tool calls and results and its answers, not what it
        # was asked: they piled up in the objective every executor and replanner prompt repeats.
        # Each turn's answer stays: a critic's or a user's next words refer to it.
        return _objective_of(
            _input_without_tool(ctx, self.name, TRANSFER_TOOL, since, without=self._names)
        )

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """As the step resumes: its saved objective and role state, then its agent."""
        _saved_objective(ctx, self.name)
        _Seen(ctx, self.name)
        walk.agent(self.agent, ctx)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        session = ctx.session
        objective = _saved_objective(ctx, self.name)
        if objective is None:
            if ctx.resume is None:
                objective = self._objective(ctx)
            else:  # paused by a version that did not save it: the session holds it
                objective = session.get(OBJECTIVE_KEY, "")
        session[OBJECTIVE_KEY] = objective
        session[EXECUTED_STEPS_KEY] = []
        home = _home(ctx, 1)  # the planner is the PlanExecute's first step
        seen = _Seen(ctx, self.name)
        seen.listen(ctx)
        problem = "it gave no output"
        key = (id(session), ctx.address)
        planning.add(key)  # its agent's empty plan is an answer to retry (``Plan``)
        try:
            async with closing(drive(self.agent, input, ctx)) as events:
                async for event in events:
                    seen.note(ctx)
                    stop = event.error is not None or (
                        event.action is not None and seen.stops(event, ctx, in_loop=False)
                    )
                    if event._signal is not None:
                        event._signal.save(ctx.address, {"objective": objective}, _STEP_SLOT)
                    inner = event._flags & _NOT_THE_ROLES
                    if event.output is not None:
                        event._flags |= _INNER_PLAN  # this one's plan, for a step around it
                    yield event
                    if stop:
                        return
                    if inner:
                        continue
                    found, why = await _plan_in(event)
                    if found is not None:
                        seen.plan = found
                    elif why is not None:
                        problem = why
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            seen.done()
            planning.discard(key)
        plan = seen.plan
        stored, value = seen.handed_over(ctx)
        if plan is None and stored:
            plan = _as_plan(value)
        if plan is None:
            raise ValueError(f"planner '{self.name}' produced no plan: {problem}")
        if not plan.steps:
            # Not taken for "nothing to do": the replanner would be asked for the final answer
            # with no step done, and answer from nothing.
            raise ValueError(
                f"planner '{self.name}' produced no plan: its plan has no steps (blank ones are "
                "dropped); a plan needs at least one, even if only to answer the objective"
            )
        # Written again: a PlanExecute the planner ran in this session has left its own there.
        session[OBJECTIVE_KEY] = objective
        session[EXECUTED_STEPS_KEY] = []
        _put_plan(session, plan, home)
        annotate(ctx, {_STEPS_DONE: 0, _STEPS_LEFT: len(plan.steps)})


class _StepState:
    """What an executor's or replanner's step starts from: the objective, plan and finished steps,
    and the history view its agent runs on (``_StepView``).

    The session's values, or on resume the ones saved at the pause. The session's may not be this
    run's by then: the role may run another ``PlanExecute`` (an ``AgentTool`` shares the session),
    which keeps its own state under the same keys, and a pause inside it checkpoints that.
    """

    __slots__ = ("done", "fork", "home", "objective", "on_history", "plan", "saved", "view")

    def __init__(self, ctx: RunContext, role: str) -> None:
        self.home = _home(ctx, 2)  # the steps of the PlanExecute's execute/replan loop
        # The session's are checked also when the saved ones are used: they are written over
        # when the step finishes, and a checkpoint whose session holds a broken one must say so,
        # not lose it quietly.
        session_state = ctx.session.get(OBJECTIVE_KEY, ""), _plan(ctx), _executed(ctx)
        self.view: _StepView | None = None
        self.fork: int | None = None  # where the view forked, on resume
        # Paused by a version that ran the agent on the run's history (see ``start``): one that
        # saved no state, or no fork.
        self.on_history = False
        self.objective, self.plan, self.done = session_state
        saved = _saved_step(ctx, role)
        self.saved = saved is not None
        if saved is None:
            self.on_history = ctx.resume is not None
            # The plan its previous step left, unless another PlanExecute stored one since.
            origin = _origin(ctx.session.get(PLAN_KEY))
            if origin is not None and not _within(origin, self.home):
                raise _clash(role, origin)
            return
        objective, plan, done = (saved.values.get(k) for k in ("objective", "plan", "executed"))
        if not isinstance(plan, Plan):
            raise saved.error(f"'plan' must be a Plan, not {plan!r}")
        try:
            self.done = _EXECUTED_STEPS.validate_python(done)
        except ValidationError as exc:
            raise saved.error(f"'executed' must be a list of ExecutedStep: {exc}") from exc
        self.objective, self.plan = objective, plan
        if "fork" in saved.values:
            self.fork = saved.order("fork", end=ctx._run.seq)
        else:
            self.on_history = True

    def resumed(self, ctx: RunContext, seen: _Seen) -> None:
        """On resume from a saved state, put it back in the session before the agent resumes:
        the session may hold what a ``PlanExecute`` the role ran left there (it paused inside
        it), and the agent reads the session as its step has it (a ``ReActAgent`` renders its
        instruction from it again, ``{objective}`` or ``{plan}`` included): the step's objective
        and finished steps, and its plan, or the one its agent stored before the pause. The inner
        one's steps restore their own state when they resume."""
        if self.saved:
            session = ctx.session
            session[OBJECTIVE_KEY] = self.objective
            session[EXECUTED_STEPS_KEY] = self.done
            _put_plan(session, seen.stored_plan if seen.stored else self.plan, self.home)

    def start(self, ctx: RunContext, prompt: str) -> tuple[AgentInput, RunContext]:
        """The agent's input and the context it runs at. A step paused by a version that ran its
        agent on the run's history goes on doing so: its agent saved its state against that."""
        messages = [Message.user(prompt)]
        if not self.on_history:
            self.view = _StepView(ctx, messages, self.fork)
            ctx = self.view.ctx
        return AgentInput(messages, ctx.enable_streaming), ctx

    def passing(self, event: AgentEvent, ctx: RunContext) -> None:
        """Before an event of the agent goes up: what the step recorded passes to the run's
        history, and a pause saves what ``__init__`` reads back on resume."""
        view = self.view
        if view is not None:
            view.flush()
        signal = event._signal
        if signal is not None:
            saved: dict[str, object] = {
                "objective": self.objective,
                "plan": self.plan,
                "executed": self.done,
            }
            if view is not None:
                saved["fork"] = view.fork
            signal.save(ctx.address, saved, _STEP_SLOT)

    def finish(self) -> None:
        if self.view is not None:
            self.view.flush()


class _LoopStep(_Role):
    """A step of the execute/replan loop (executor, replanner): its agent runs on the step's
    history view, from the state the step saved at a pause (``_StepState``)."""

    def _prompt(self, state: _StepState) -> str:
        raise NotImplementedError

    def _begin(self, ctx: RunContext, state: _StepState) -> tuple[AgentInput, RunContext, _Seen]:
        """What both steps do before they drive their agent: its input and context
        (``_StepState.start``), and the step's ``_Seen``, the saved state put back on resume
        (``_StepState.resumed``) and listening for a plan the agent stores."""
        request, agent_ctx = state.start(ctx, self._prompt(state))
        seen = _Seen(ctx, self.name)
        state.resumed(ctx, seen)
        seen.listen(ctx)
        return request, agent_ctx, seen

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """As the step resumes: the state it and its role saved, then its agent on the step's
        history view (the fork it saved), where the resume runs it: the agent's saved state
        refers to the entries of that view, not to the run's whole history."""
        try:
            state = _StepState(ctx, self.name)
        except (LookupError, TypeError, RuntimeError) as exc:  # the session's, as a step says
            raise CheckpointError(
                f"plan-execute role '{self.name}' cannot resume: {exc}", reason="incompatible"
            ) from exc
        _Seen(ctx, self.name)
        if not state.plan.steps and isinstance(self, _ExecuteStep):
            why = f"plan-execute role {self.name!r} has no step left to resume"
            walk.only_under(ctx.address, [], why)
        _, agent_ctx = state.start(ctx, self._prompt(state))
        walk.agent(self.agent, agent_ctx)


class _ExecuteStep(_LoopStep):
    @property
    def _adk_first_askers(self) -> list[str]:
        """None certain (``adk._turns_left``): a step with no plan step left to do does not run
        its agent (``run``)."""
        return []

    def _prompt(self, state: _StepState) -> str:
        return _executor_prompt(state.objective, state.plan, state.done)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        state = _StepState(ctx, self.name)
        objective, plan, done = state.objective, state.plan, state.done
        if not plan.steps:
            return  # nothing left to do; the replanner answers
        step = plan.steps[0]
        annotate(ctx, {_STEPS_DONE: len(done), _STEPS_LEFT: len(plan.steps)}, {_STEP: step})
        request, agent_ctx, seen = self._begin(ctx, state)
        try:
            async with closing(drive(self.agent, request, agent_ctx)) as events:
                async for event in events:
                    stop = event.error is not None or (
                        event.action is not None and seen.stops(event, ctx, in_loop=True)
                    )
                    state.passing(event, ctx)
                    yield event
                    if stop:
                        return
                    if event._flags & _FORWARDED:
                        continue  # an AgentTool's nested run's, shown: the tool's result follows
                    text = await _text_of(event)
                    if text is not None:
                        seen.text = text
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            seen.done()
            state.finish()
        # All three written back from what the step started with: a PlanExecute the executor ran
        # in this session (through an AgentTool) has left its own there.
        session = ctx.session
        session[OBJECTIVE_KEY] = objective
        session[EXECUTED_STEPS_KEY] = [*done, ExecutedStep(step=step, result=seen.text or "")]
        _put_plan(session, Plan(steps=plan.steps[1:]), state.home)
        ended = seen.ended_loop_before_pause()
        if ended is not None:
            yield ended


class _ReplanStep(_LoopStep):
    def _prompt(self, state: _StepState) -> str:
        return _replanner_prompt(state.objective, state.plan, state.done)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        state = _StepState(ctx, self.name)
        objective, plan, done = state.objective, state.plan, state.done
        annotate(ctx, {_STEPS_DONE: len(done), _STEPS_LEFT: len(plan.steps)})
        request, agent_ctx, seen = self._begin(ctx, state)
        try:
            async with closing(drive(self.agent, request, agent_ctx)) as events:
                async for event in events:
                    seen.note(ctx)
                    stop = event.error is not None or (
                        event.action is not None and seen.stops(event, ctx, in_loop=True)
                    )
                    state.passing(event, ctx)
                    output = event.output
                    found = None
                    if event._flags & _FORWARDED:
                        output = None  # an AgentTool's nested run's, shown: not this role's
                    elif output is not None and output.custom is not None:
                        found = _as_plan(output.custom)
                        if event._flags & _INNER_PLAN:
                            found = None  # an inner PlanExecute's: not this role's
                        elif found is not None:
                            event._flags |= _INNER_PLAN  # this one's, for a step around it
                    yield event
                    if stop:
                        return  # a pause, an error or an exit
                    if output is None:
                        continue
                    if found is not None:
                        seen.plan = found
                    else:
                        text = await _text_of(event)
                        if text is not None:
                            seen.text = text
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            seen.done()
            state.finish()
        # Objective and finished steps written back, and the plan the replanner handed over or
        # the one it started with: a PlanExecute it ran in this session has left its own there.
        session = ctx.session
        session[OBJECTIVE_KEY] = objective
        session[EXECUTED_STEPS_KEY] = done
        stored, stored_plan = seen.handed_over(ctx)
        if seen.broke:  # its own break was the response
            _put_plan(session, stored_plan if stored else plan, state.home)
            ended = seen.ended_loop_before_pause()
            if ended is not None:
                yield ended
        elif seen.plan is not None:
            _put_plan(session, seen.plan, state.home)
        elif stored:
            # It stored a new plan (the update_plan tool does).
            _put_plan(session, stored_plan, state.home)
        else:
            _put_plan(session, plan, state.home)
            if seen.text is not None and seen.text.strip():
                yield _response()  # its last output, not blank, is the response
            elif not plan.steps:
                # Nothing left to do and nothing said. If it said so with a blank reply, the last
                # step's result is repeated as the answer: the run would otherwise end on the
                # blank message. (Silent, the run already ends on that result.)
                if seen.text is not None and done and done[-1].result.strip():
                    yield AgentEvent.of(done[-1].result)
                yield _response()


def _response() -> AgentEvent:
    """The break that ends the execute/replan loop, flagged as the response (``_ENDS_LOOP``)."""
    end = AgentEvent.break_loop()
    end._flags = _ENDS_LOOP
    return end


def _update_plan(steps: list[str], ctx: ToolContext) -> ToolResult:
    """Replace the plan with the steps that still need to be done.

    Args:
        steps: The remaining steps, in order. Leave out steps that are already done.
    """
    cleaned = [step.strip() for step in steps if step.strip()]
    if not cleaned:
        raise ToolError(
            "update_plan needs at least one step; if the objective is achieved, answer the user "
            "instead of calling update_plan"
        )
    plan = Plan(steps=cleaned)
    # Handed to its step directly, and tagged so that no other step takes it (see ``_origins``).
    where, address = id(ctx.session), ctx.address
    while True:
        seen = _listening.get((where, address))
        if seen is not None:
            seen.stored, seen.stored_plan = True, plan
            break
        if "/" not in address:
            break  # not in a PlanExecute: it only stores the plan
        address = address.rsplit("/", 1)[0]
    _tag(plan, ctx.address)
    ctx.session[PLAN_KEY] = plan
    # The plan rides the tool's event as its structured value (``metadata["structured"]``), so a
    # UI following the plan from the events reads the new one, not its text parsed back. A copy:
    # the tag above is the session's plan's, and the event's outlives the step. As a function
    # tool's pydantic result is (``_ModelResult``): ``after_tool`` callbacks still get the text,
    # a ``str``, as before, and one replacing it (a redaction) drops the plan beside it.
    return _ModelResult(content=f"Plan updated:\n{plan}", structured=Plan(steps=cleaned))


_DEFAULT_NAME = "plan_execute"


def _role_name(plan_execute: str, role: str) -> str:
    """The name ``from_model`` gives a role: prefixed with the PlanExecute's own, because history
    is read by author name, so two PlanExecutes whose roles shared names (two workers of one
    ``Supervisor``) each read the other's messages as its own: a planner took another's plan for
    one it wrote. The default name keeps the bare role names it always had, so checkpoints made
    with them still resume."""
    return role if plan_execute == _DEFAULT_NAME else f"{plan_execute}_{role}"


def _set_max_iterations(plan: PlanExecute, value: Any) -> Any:
    """``max_iterations`` assigned after the agent is made: checked as when made, and given to
    the execute/replan loop it bounds (which kept the value it was made with)."""
    check_count(value, f"PlanExecute {plan.name!r}: max_iterations")
    plan._loop.max_iterations = value
    return value


class PlanExecute(SequentialAgent):
    """Plan, then loop execute/replan until the replanner responds (see the module docstring)."""

    # ``max_iterations`` assigned later is checked as when made, and bounds the loop:
    # ``adk._checks.checked_settings``.
    __setattr__ = checked_settings({"max_iterations": _set_max_iterations}, made="_loop")
    max_iterations: int  # set by the constructor past ``__setattr__``

    def __init__(
        self,
        planner: Agent,
        executor: Agent,
        replanner: Agent,
        max_iterations: int = 10,
        *,
        name: str = _DEFAULT_NAME,
        description: str = "",
        callbacks: Iterable[Any] = (),
        output_key: str | None = None,
    ) -> None:
        if output_key is not None and not (isinstance(output_key, str) and output_key):
            raise TypeError(
                f"PlanExecute {name!r}: output_key must be a non-empty str (the session key the "
                f"answer is stored under), got {output_key!r}"
            )
        self.output_key = output_key
        # Checked here, not by the inner loop: its error would name a loop the caller never made,
        # and it would take None for no limit, which this one does not have.
        check_count(max_iterations, f"PlanExecute {name!r}: max_iterations")
        names = [planner.name, executor.name, replanner.name]
        if len(set(names)) != 3:
            raise ValueError(f"PlanExecute needs three differently named agents, got {names}")
        self.planner = planner
        self.executor = executor
        self.replanner = replanner
        object.__setattr__(self, "max_iterations", max_iterations)  # checked above
        # What runs (the attributes above may be reassigned; the steps keep these).
        self._roles = (("planner", planner), ("executor", executor), ("replanner", replanner))
        loop = LoopAgent(
            "execute_replan",
            [_ExecuteStep(executor), _ReplanStep(replanner)],
            max_iterations=max_iterations,
        )
        self._loop = loop  # its max_iterations follows this agent's
        self._given: dict[tuple[int, str], str] = {}  # see ``_until_response``
        # Every agent a turn of it may record a message by: its roles and the agents in them.
        recorders = frozenset(a[0] for _, agent in self._roles for a in authors(agent, set()))
        planned = _PlanStep(planner, self._given, recorders)
        super().__init__(name, [planned, loop], description, callbacks=callbacks)

    @classmethod
    def from_model(
        cls,
        model: ChatModel | str,
        tools: Iterable[ToolSource] = (),
        max_iterations: int = 10,
        *,
        name: str = _DEFAULT_NAME,
        description: str = "",
        output_key: str | None = None,
    ) -> PlanExecute:
        """All three roles from one model: the common case in one line. The roles are named after
        the PlanExecute (``research_planner``, ...; under the default name just ``planner``,
        ``executor`` and ``replanner``), see ``_role_name``."""
        return cls(
            new_planner(model, name=_role_name(name, "planner")),
            new_executor(model, tools, name=_role_name(name, "executor")),
            new_replanner(model, name=_role_name(name, "replanner")),
            max_iterations,
            name=name,
            description=description,
            output_key=output_key,
        )

    def _adk_authors(self, seen: set[int]) -> Iterator[Author]:
        """Its roles' agents, whose names must stay their own (a workflow or flow it is part of
        refuses another agent of one of them, ``adk._authors``; see ``_role_name``), then the
        agents inside them."""
        for role, agent in self._roles:
            yield agent.name, agent, f"the {role} of PlanExecute {self.name!r}", self
            for author in authors(agent, seen):
                if author[1] is not agent:
                    yield author

    @property
    def _adk_first_askers(self) -> list[str]:
        """The agents certain to ask their model as it starts (``adk._turns_left``): its
        planner's, which starts it (what the plan then asks, the model decides)."""
        return first_askers(self.sub_agents[0])

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        # An input a parent agent made (a custom agent's ``run(AgentInput([...]), ctx)``), not
        # the history's view: its user messages are the objective. The planner read it from the
        # history, the request handed to it left out.
        given = None if _is_history_view(input, ctx) else _objective_of(input.messages)
        return self._until_response(super().run(input, ctx), ctx, given)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return self._until_response(super().resume(ctx), ctx)

    async def _until_response(
        self, steps: AsyncIterator[AgentEvent], ctx: RunContext, given: str | None = None
    ) -> AsyncIterator[AgentEvent]:
        """The loop ends by a role's break (the response) or by running out of iterations; the
        latter is an error, as for ReActAgent. Ending events (exit, interrupt, error) close this
        generator first. Run inside a role of another PlanExecute (an ``AgentTool`` shares the
        session), it gives that one's state back whenever it stops (``_around``), in ``finally``:
        when it ends, and when closed after an ending event, which ``drive`` does before the
        event goes up. After an error the role goes on (an ``AgentTool`` hands its model the
        error) and reads its state again; at a pause the checkpoint then holds the role's, as the
        role's step puts back on resume anyway, while this one's steps saved their own."""
        around = _around(ctx)
        responded = False
        key = self.output_key
        answer: str | None = None  # the last text of its roles' outputs, for ``output_key``
        if given is not None:  # for the planner's step (``_PlanStep._objective``), by address
            self._given[_given_key(ctx, ctx.address)] = given
        try:
            async with closing(steps) as events:
                async for event in events:
                    if event._flags & _ENDS_LOOP:
                        responded = True
                        # Counted here: a PlanExecute around this one must not count it too.
                        event._flags &= ~_ENDS_LOOP
                        if key is not None and answer is not None:
                            ctx.session[key] = answer  # the response is the last text before
                    yield event
                    if (
                        key is not None
                        and event.output is not None
                        and not event._flags & _NOT_THE_ROLES
                    ):
                        text = await _text_of(event)
                        if text is not None:
                            answer = text
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            # Read before a PlanExecute around this one gets its state back: the error says
            # where this one's plan stood.
            left, finished = ctx.session.get(PLAN_KEY), ctx.session.get(EXECUTED_STEPS_KEY)
            if given is not None:
                self._given.pop(_given_key(ctx, ctx.address), None)
            if around is not None:  # ended, or closed (a pause, an error, an exit, abandoned)
                ctx.session.update(around)
        if not responded:
            raise MaxIterationsError(
                f"plan-execute '{self.name}' exceeds max iterations ({self.max_iterations} "
                f"execute/replan rounds) without a response{_standing(left, finished)}"
            )


def _standing(plan: object, done: object) -> str:
    """Where the plan stood when the rounds ran out, for the error: a plan longer than
    ``max_iterations`` (a planner's 200 steps against the default 10) cannot be carried out,
    and the error said nothing of it."""
    if not isinstance(plan, Plan) or not isinstance(done, list):
        return ""
    return (
        f", with {len(plan.steps)} of the plan's steps left and {len(done)} done (a plan needs "
        "a round per step: raise max_iterations, or have the planner write fewer steps)"
    )


def _given_key(ctx: RunContext, address: str) -> tuple[int, str]:
    """Where a ``PlanExecute`` keeps the objective it was handed for its planner's step: by run
    and address, as one agent serves runs at the same time (a service's requests), each at the
    same address. The run's state lives as long as the run, and the entry goes when the
    ``PlanExecute`` stops, so its id names that run alone."""
    return id(ctx._run), address


def _around(ctx: RunContext) -> dict[str, object] | None:
    """The state of the PlanExecute this one runs inside (its plan was stored by a PlanExecute
    whose address this one's lies under), or None. The role that runs this one reads its own
    state from the session again as its agent goes on: a ``ReActAgent`` renders ``{objective}``
    or ``{plan}`` before each model call, so the keys this one wrote must be that role's again
    once it has stopped (ended, failed or paused), not only once the role's step ends (which
    writes them back too)."""
    session = ctx.session
    origin = _origin(session.get(PLAN_KEY))
    if origin is None or _within(origin, ctx.address) or not _within(ctx.address, origin):
        return None
    keys = (OBJECTIVE_KEY, PLAN_KEY, EXECUTED_STEPS_KEY)
    return {key: session.values[key] for key in keys if key in session.values}


def new_planner(
    model: ChatModel | str,
    *,
    name: str = "planner",
    description: str = "Writes a step-by-step plan for the user's objective.",
    instruction: str | InstructionProvider = PLANNER_INSTRUCTION,
    model_options: ModelOptions | None = None,
) -> ReActAgent:
    """A planner: one model call answering a ``Plan`` (native structured output when the model
    supports it, JSON by instruction otherwise; validated with one retry)."""
    return ReActAgent(
        name,
        model,
        instruction=instruction,
        description=description,
        output_schema=Plan,
        model_options=model_options,
    )


def new_executor(
    model: ChatModel | str,
    tools: Iterable[ToolSource] = (),
    *,
    name: str = "executor",
    description: str = "Carries out one step of a plan with its tools.",
    instruction: str | InstructionProvider = EXECUTOR_INSTRUCTION,
    max_iterations: int = 20,
    model_options: ModelOptions | None = None,
) -> ReActAgent:
    """An executor: a ReAct loop over ``tools`` that carries out the step it is given."""
    return ReActAgent(
        name,
        model,
        instruction=instruction,
        description=description,
        tools=tools,
        max_iterations=max_iterations,
        model_options=model_options,
    )


def new_replanner(
    model: ChatModel | str,
    *,
    name: str = "replanner",
    description: str = "Updates the plan after each step, or gives the final response.",
    instruction: str | InstructionProvider = REPLANNER_INSTRUCTION,
    model_options: ModelOptions | None = None,
) -> ReActAgent:
    """A replanner: calls ``update_plan(steps)`` to go on, or answers in text to finish."""
    return ReActAgent(
        name,
        model,
        instruction=instruction,
        description=description,
        tools=[FunctionTool(_update_plan, name="update_plan")],
        return_directly=["update_plan"],
        model_options=model_options,
    )
