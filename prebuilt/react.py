"""``ReActAgent``: call the model; run the tools it asks for, concurrently; repeat until it answers.

Events: one assistant event per model call (a stream when the run streams), one tool event per
result in completion order, except the results that end the agent: return-directly results and the
results of tools that asked to exit come after the others (in call order, exit results last, so the
last of them is the agent's final output); then the actions tools asked for (exit, transfer, loop
break) as one action event. With ``output_schema`` the final answer is validated (one retry with
the validation error shown to the model, announced by an ``OutputRejected`` custom output before
the retry's reply; none for a tool's result, which ends the agent without asking the model) and
the instance is emitted as a ``custom`` output.

On a tool interrupt the agent saves which calls are still open, the results it holds and its
conversation, and on resume only the open calls run again. The conversation is saved without what
the checkpoint's history already holds (see ``prebuilt._react_state``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, Never

from pydantic import BaseModel, ValidationError

import adk
from adk import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    ChatModel,
    CheckpointError,
    FlowAgent,
    FunctionTool,
    HistoryRewriter,
    Message,
    ModelOptions,
    Resources,
    RunContext,
    Tool,
    ToolCall,
    Toolset,
    ToolSpec,
)
from adk._aio import closing, finish
from adk._checks import (
    SettingCheck,
    agent_description,
    check_count,
    check_name,
    checked_settings,
    shown,
)
from adk._doing import Doing, doing, timed
from adk._driver import _RECORDED, NO_EVENT, refuse_fresh_start
from adk._naming import naming as _naming
from adk._ported_names import AGENT_ARGUMENT_HINTS
from adk._turns_left import count_ahead, spent_text, turns_limit
from adk.checkpoint._state import SavedState
from adk.context import _NO_OPTIONS
from adk.events import message_event, tool_result_event
from adk.history import _check_rewriter, _is_history_view, build_messages
from adk.interrupts import _InterruptSignal, join_address, tool_segment
from adk.models import _call
from adk.models.base import model_name_of
from adk.tools._executor import (
    ToolOutcome,
    calls_seen,
    cut_calls,
    execute_tool_calls,
    lone_call,
    own_call_ids,
    run_tool_call,
    unique_call_ids,
)
from adk.tools._origin import tool_origin
from adk.tools.base import ToolError, _own_words, _shows_events
from adk.tools.function import _is_tool_name

from ._instruction import (
    InstructionError,
    InstructionProvider,
    _keys,
    _MissingAtResume,
    _Read,
    _read,
    check_provider,
    provide_instruction,
    render_instruction,
)
from ._output import (
    OutputRejected,
    OutputSchemaError,
    parse_output_json,
    rejection,
    response_format,
    retry_prompt,
    schema_instruction,
)
from ._react_state import (
    Recorded,
    SavedHead,
    check_tools,
    exits_shown,
    open_calls,
    pause_state,
    record_entry,
    recorded_calls,
    restore,
    saved_action,
    saved_exits,
)
from ._react_tools import TRANSFER_TOOL, TransferTool, extra_transfers
from ._react_tools import exit_tool as _make_exit_tool

if TYPE_CHECKING:
    from adk._preflight import Preflight

__all__ = ["MaxIterationsError", "OutputSchemaError", "ReActAgent"]

ToolSource = Tool | Toolset | Callable[..., Any] | str
"""A ``Tool``, a plain function, a ``Toolset`` (``async tools(ctx)``) or a tool resource name."""


_PROVIDED: tuple[str, tuple[str, ...], _Read] = ("", (), ())
"""``_Turn.rendered`` of an agent whose instruction is a function: asked before every model call,
as what it reads cannot be known (compared by identity)."""


class MaxIterationsError(RuntimeError):
    """The model kept calling tools past ``max_iterations`` model calls."""


class _Round:
    """What one round of tool calls has gathered so far: the results held back to come last
    (return-directly results, and the results of tools that asked to exit, whose call ids
    ``exits`` lists), the calls that paused (``open_ids``, their signals merged in ``signal``),
    the actions the tools asked for, and the call whose transfer stands. A resumed round starts
    from what was saved at the pause; ``record`` (a resumed round's, when the runner can record
    in its checkpoint) lists its finished calls as the checkpoint records them (``done``), and
    ``settles`` their addresses, appended together: a write settles the points of every result
    it holds, calls that ended together included (read when it happens, not when asked). Made
    by ``_new_round`` (see ``adk.context._Entry`` for why the class has no ``__init__``)."""

    __slots__ = (
        "action",
        "calls",
        "exits",
        "held",
        "open_ids",
        "record",
        "settles",
        "signal",
        "transfer_by",
    )

    calls: Sequence[ToolCall]
    held: list[Message]
    action: AgentAction | None
    exits: list[str] | None
    open_ids: list[str] | None  # made when a call pauses
    signal: _InterruptSignal | None
    transfer_by: ToolCall | None  # the earliest call, in the model's order, that transferred
    record: list[Any] | None
    settles: list[str] | None  # with ``record``: the address of each of its entries' calls


def _new_round(
    calls: Sequence[ToolCall],
    held: list[Message],
    action: AgentAction | None = None,
    exits: list[str] | None = None,
) -> _Round:
    tally = _Round()
    tally.calls = calls
    tally.held = held
    tally.action = action
    tally.exits = exits
    tally.open_ids = tally.signal = tally.transfer_by = tally.record = tally.settles = None
    return tally


async def _noted_call(
    running: Doing, ctx: RunContext, turn: _Turn, messages: list[Message]
) -> Message:
    """A turn's model call noted in the ``Doing`` of a record's run under a timeout, whose error
    then names it if the timeout cuts it off (``adk._doing``)."""
    mark = running.start("model {:q} (agent {:q})", model_name_of(turn.model), ctx.agent_name)
    try:
        return await _call.generate(ctx, turn.model, messages, turn.specs, turn.options)
    finally:
        running.end(mark)


class _Turn:
    """Everything one run of the loop works with (kept together so resume rebuilds it in one go).

    ``messages[:head_size]`` is the conversation's start (system prompt, then the input; the first
    ``system_size`` are the system prompt), the rest what the loop added. ``saved_head`` is how the
    input is saved at a pause once known (a resumed agent keeps the one it was saved with; the
    system prompt is rendered again on resume, not saved). ``rendered`` is what the system prompt
    was last rendered from (the instruction, its placeholders' keys and what they read), None
    when it has no placeholders: only then can a render before a later model call differ.
    """

    __slots__ = (
        "call_ids",
        "ctx",
        "done",
        "head_size",
        "iterations",
        "messages",
        "model",
        "native",
        "options",
        "rendered",
        "saved_head",
        "schema_retried",
        "shown",
        "specs",
        "system_size",
        "tools",
        "tools_pending",
    )

    ctx: RunContext
    model: ChatModel
    options: ModelOptions | None
    native: bool
    tools: dict[str, Any]
    specs: Sequence[ToolSpec]
    messages: list[Message]
    iterations: int
    head_size: int
    system_size: int
    saved_head: SavedHead | None
    rendered: tuple[str, tuple[str, ...], _Read] | None
    schema_retried: bool  # the one retry for an answer off the output schema is used
    # The ids of the calls the loop's conversation holds, once a reply has calls: a later
    # call's id is its own (``own_call_ids``). None until then, and after a resume.
    call_ids: dict[str, None] | None
    # An older checkpoint's exit results, emitted before its pause, held to come last on resume
    # (``exits_shown``): not recorded again, nor saved as held by a pause of the round.
    shown: list[Message] | None
    tools_pending: bool  # ``tools`` are still to resolve (see ``_ReActCore._turn``)
    done: bool  # the last tool round ended the agent (set by ``_round``)


_RESULTS_NEED = "the paused calls' results would need"


def _transfer_target(call: ToolCall) -> str | None:
    """The agent a ``transfer_to_agent`` call names, or None when its arguments do not."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    name = arguments.get("agent_name") if isinstance(arguments, dict) else None
    return name if isinstance(name, str) else None


class _ReActCore:
    """The agent loop itself; ``ReActAgent`` puts it in a flow when it has agents to transfer to."""

    _adk_first_askers = True  # as its ``ReActAgent`` (``adk._turns_left``)

    def __init__(self, owner: ReActAgent) -> None:
        self.owner = owner
        self.name = owner.name
        self.description = owner.description

    @property
    def _adk_callbacks(self) -> Any:
        """The agent's own callbacks: the loop and the agent are one agent (in a flow the loop
        is what starts)."""
        return self.owner._adk_callbacks

    @property
    def _adk_agent(self) -> ReActAgent:
        """The agent, which callbacks are given for its loop (``adk._instrument._made``)."""
        return self.owner

    def _adk_answer(self, value: Any, ctx: RunContext) -> list[AgentEvent]:
        return self.owner._adk_answer(value, ctx)

    # -- setup --------------------------------------------------------------------------------
    async def _tools(self, ctx: RunContext) -> dict[str, Any]:
        """The run's tools when ``_turn`` left them to resolve: the static ones, the toolsets'
        and tool resources', and the transfer tool for the agents it may transfer to."""
        owner = self.owner
        tools: dict[str, Any] = dict(owner._static_tools)
        sources: dict[str, object] = {}  # where each resolved tool came from, for a clash's error
        for source in owner._dynamic_tools:
            if isinstance(source, str):
                resources = ctx._run.resources
                if resources is None:
                    raise LookupError(
                        f"agent '{self.name}' names tool {source!r} but the runner has no resources"
                    )
                found = [await resources.get_tool(source)]
            else:
                found = list(await source.tools(ctx))
            for item in found:
                name = item.spec.name
                if name in tools:
                    first = self._origin(tools[name], sources.get(name))
                    raise _two_tools(self.name, name, first, _dynamic_origin(source, item))
                tools[name] = item
                sources[name] = source
        targets = owner._transfer_targets()
        if targets:
            if TRANSFER_TOOL in tools:
                tool = tools[TRANSFER_TOOL]
                raise _transfer_clash(self.name, self._origin(tool, sources.get(TRANSFER_TOOL)))
            tools[TRANSFER_TOOL] = TransferTool(targets)
        return tools

    def _origin(self, tool: object, source: object | None) -> str:
        """Where one of the run's tools came from (``source``: the toolset or resource name it
        was resolved from, None for a tool given to the agent)."""
        if source is not None:
            return _dynamic_origin(source, tool)
        return self.owner._origin_of(tool)

    def _adk_check_transfer(self) -> None:
        """Refuse a tool given to the agent under the transfer tool's name. ``adk.flow`` calls
        this before it gives the agent an agent to transfer to (a sub-agent, or a parent to go
        back to), which is when the agent starts adding that tool: so the clash fails where the
        agent is made or wired, not in its first run. Tools resolved per run are checked then."""
        owner = self.owner
        tool = owner._static_tools.get(TRANSFER_TOOL)
        if tool is not None:
            raise _transfer_clash(self.name, owner._origin_of(tool))
        if TRANSFER_TOOL in owner._dynamic_tools:
            raise _transfer_clash(self.name, f"tool resource {TRANSFER_TOOL!r}")

    def _system(self, turn: _Turn, provided: str = "") -> list[Message]:
        """The system prompt: the instruction rendered from the session values as they are now,
        with the output schema's instruction when the model does not take it natively. Made
        when the agent starts and again when it resumes (from the current instruction: it is
        configuration, which a redeploy may have fixed, not part of the conversation), and
        again before a model call when what its placeholders read has changed (``_refresh``).
        An instruction function's text is ``provided``, "" until ``_provide`` asks it before
        the first model call."""
        owner = self.owner
        instruction = owner.instruction
        # Without an instruction or output schema there is no system prompt (the rendering would
        # be ""). Tested before the type, which a function is never equal to: an agent without
        # an instruction skips the isinstance that b29fd72 put on every run.
        if instruction == "" and owner.output_schema is None:
            return []
        if not isinstance(instruction, str):
            turn.rendered = _PROVIDED
            text = provided
        else:
            values = turn.ctx.session.values
            text = render_instruction(instruction, values, self.name)
            keyed = owner._keyed
            if keyed[0] is not instruction:  # ``instruction`` was assigned since last read
                keyed = owner._keyed = (instruction, _keys(instruction))
            keys = keyed[1]
            turn.rendered = (instruction, keys, _read(keys, values)) if keys else None
        if owner.output_schema is not None and not turn.native:
            text = f"{text}\n\n{schema_instruction(owner.output_schema)}".strip()
        return [Message.system(text)] if text else []

    def _input_messages(self, input: AgentInput, ctx: RunContext) -> list[Message]:
        """The input, rewritten by the ``history_rewriter`` if there is one and the input is the
        run's history (built by a flow or workflow, or the run's own input at the root). An input
        a parent made itself (PlanExecute's step prompt, a custom agent's) is used as given: the
        rewriter shapes how the agent reads the history, not what its parent asks of it."""
        rewriter = self.owner.history_rewriter
        if rewriter is not None and _is_history_view(input, ctx):
            return build_messages(ctx, self.name, rewriter)
        return input.messages

    def _turn(self, ctx: RunContext, iterations: int) -> _Turn:
        """The run's model, its options and the agent's static tools. When the agent has tools to
        resolve per run (toolsets, tool resources, the transfer tool of a flow), ``tools_pending``
        is set and ``_resolve_tools`` must fill them in before the turn is used. Not a coroutine:
        most agents have nothing to await before their first model call, and a coroutine per step
        of the set-up costs more than the rest of it."""
        owner = self.owner
        model = owner.model
        if isinstance(model, str):
            model = _call.resource_model(ctx, model, self.name)
        if owner.output_schema is None:  # what ``_options_for`` answers then, without its cache
            options, native = owner.model_options, False
        else:
            options, native = owner._options_for(model)
        if ctx.options is not _NO_OPTIONS:  # a run given options (``Runner.run(options=)``)
            given = ctx.options.get("model_options")
            if given is not None:
                options = _call.with_run_options(self.name, options, native, given)
        turn = _Turn()  # one per run: a class without ``__init__`` is the cheapest to make
        turn.ctx = ctx
        turn.model = model
        turn.options = options
        turn.native = native
        turn.tools = owner._static_tools
        turn.specs = owner._static_specs
        turn.messages = []
        turn.iterations = iterations
        turn.head_size = turn.system_size = 0
        turn.saved_head = turn.rendered = turn.shown = turn.call_ids = None
        turn.schema_retried = turn.done = False
        flow = owner._adk_flow
        turn.tools_pending = bool(
            owner._dynamic_tools or flow.sub_agents or flow.parent is not None
        )
        return turn

    async def _resolve_tools(self, turn: _Turn) -> None:
        tools = await self._tools(turn.ctx)
        turn.tools = tools
        turn.specs = tuple(t.spec for t in tools.values())
        turn.tools_pending = False

    def _open(self, turn: _Turn, input: AgentInput) -> None:
        """Start a fresh run's conversation: the system prompt, then the input."""
        owner, ctx = self.owner, turn.ctx
        system = self._system(turn)
        # The input is used as given without a rewriter.
        given = (
            input.messages if owner.history_rewriter is None else self._input_messages(input, ctx)
        )
        turn.messages = [*system, *given]
        turn.head_size = len(turn.messages)
        turn.system_size = len(system)

    # -- running ------------------------------------------------------------------------------
    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return self._loop(ctx, input=input)

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        saved, iterations = self._saved_round(ctx)
        turn = self._turn(ctx, iterations)
        if turn.tools_pending:
            await self._resolve_tools(turn)
        if self.owner.reset_tool_choice:  # paused in a tool round: the model has used a tool
            turn.options = _call.free_tool_choice(turn.options)
        turn.schema_retried = saved.values.get("schema_retried") is True
        action = saved_action(saved)
        exits = saved_exits(saved)
        held = self._restore(turn, saved.values)
        exiting = self.owner._exit_tool
        shown = exits_shown(  # compatibility: checkpoints of pyadk before c109aff (25 Nov)
            exits, action, turn.messages, None if exiting is None else exiting.spec.name
        )
        if shown is not None:
            turn.shown = shown
            held = [*held, *shown]
            exits = [*exits, *(m.tool_call_id or "" for m in shown)]
        calls = open_calls(saved, turn.messages)
        recorded = recorded_calls(saved, calls)
        check_tools(saved, calls, recorded, turn.tools, ctx)
        self._check_round_fits(ctx, saved, iterations, calls, held)
        tally = _new_round(calls, held, action, exits)
        plan = ctx._run.plan
        if plan is not None:
            settles = [
                join_address(ctx.address, tool_segment(d.call.name, d.call.id)) for d in recorded
            ]
            for address in settles:  # finished by an earlier resume: replayed, not run again
                plan.settle(address)
            progress = plan.progress
            if progress is not None and progress.can_record(ctx):
                tally.record = [
                    record_entry(d.call.id, d.tool_name, d.message, d.action) for d in recorded
                ]
                tally.settles = settles
        # A cut call paused by a callback (a before_tool gate) is answered as cut on resume
        # too: the reply its calls came in is the conversation's last tool-calling message.
        reply = next((m for m in reversed(turn.messages) if m.tool_calls), None)
        cut = None if reply is None else cut_calls(reply, calls, turn.tools)
        rounds = self._round(turn, tally, recorded, cut)
        try:
            async for event in rounds:
                yield event
                if event.ends_agent:
                    return
        finally:
            if getattr(rounds, "ag_frame", None) is not None:  # left early: cancel its calls now
                await rounds.aclose()
        if turn.done:
            return
        try:
            async with closing(self._loop(ctx, turn=turn)) as events:
                async for event in events:
                    yield event
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT

    def _saved_round(self, ctx: RunContext) -> tuple[SavedState, int]:
        """The paused round's saved state and the model calls made before it, refused
        (``_past_limit``) if they are beyond ``max_iterations``. Shared by ``resume`` and its check
        before anything runs (``_adk_preflight``), which must refuse exactly what it refuses."""
        resume = ctx.resume
        saved = SavedState(f"agent '{self.name}'", resume.state if resume is not None else None)
        iterations = saved.count("iterations")
        if iterations > self.owner.max_iterations:
            raise self._past_limit(saved, iterations)
        return saved, iterations

    def _check_round_fits(
        self,
        ctx: RunContext,
        saved: SavedState,
        iterations: int,
        calls: list[ToolCall],
        held: list[Message],
    ) -> None:
        """Refuse a round paused at the last model call allowed, by ``max_iterations``
        (``_past_limit``) or by the run's ``max_turns`` (spent before the pause, or lowered by the
        resume's own), that cannot end the agent (``_round_may_end``): its results would need one
        more. Run, the paused calls (an approved refund) would be made, the run
        then fail on the limit with its checkpoint kept, and a retry with a higher limit make them
        again. Shared as ``_saved_round`` is; the saved exits and action are read only at a
        limit. A resume that leaves one of the round's points waiting (it answers some only) is
        not refused for ``max_turns``: the round pauses again once the answered calls ran,
        asking no model, and the resume of the rest is refused unless it raises the limit. It
        is for ``max_iterations``, which no resume raises: the round could never finish."""
        turns, plan = ctx._run.turns, ctx._run.plan
        spent = turns is not None and turns.used >= turns.limit
        if spent and plan is not None and plan.leaves_waiting(ctx.address):
            spent = False  # the round pauses again: no model call in this resume
        if iterations != self.owner.max_iterations and not spent:
            return
        if self._round_may_end(calls, held, saved_exits(saved), saved_action(saved)):
            return
        if iterations == self.owner.max_iterations:
            raise self._past_limit(saved, iterations)
        assert turns is not None
        raise saved.turns_short(
            f"{spent_text(turns)}: the paused calls' results would need a model call the limit "
            "does not allow; resume with a higher max_turns (it counts the calls before the pause)",
            turns.limit,
        )

    def _past_limit(self, saved: SavedState, iterations: int) -> CheckpointError:
        """The refusal of a resume whose paused round cannot finish within ``max_iterations``
        (lowered since the pause): the paused calls would run, their results never reach a
        model, and the run fail with the checkpoint kept, to run them again on the next resume."""
        limit = self.owner.max_iterations
        where = "beyond" if iterations > limit else "at"
        return saved.error(
            f"it paused after {iterations} model calls, {where} its max_iterations of {limit}: "
            "the paused calls' results would need a model call the limit does not allow"
        )

    def _exceeded(self, detail: str = "") -> MaxIterationsError:
        return MaxIterationsError(
            f"agent '{self.name}' exceeds max iterations ({self.owner.max_iterations} model "
            f"calls) without a final answer{detail}"
        )

    def _check_pause_at_limit(self, tally: _Round) -> None:
        """Fail a round that pauses after the last allowed model call, unless it may end the
        agent, as the same round without a pause fails: with ``MaxIterationsError`` once its
        other calls ran. Saved, its resume could only be refused (``_past_limit``): the paused
        calls' results would need one more model call. So the person is not asked to approve a
        call that can never complete, and no checkpoint is left that nothing can resume."""
        open_ids = set(tally.open_ids or ())
        paused = [call for call in tally.calls if call.id in open_ids]
        if self._round_may_end(paused, tally.held, tally.exits or [], tally.action):
            return
        names = ", ".join(f"{call.name}#{call.id}" for call in paused)
        raise self._exceeded(
            f"; its last tool round paused ({names}) and is not saved: the paused calls' "
            "results would need a model call the limit does not allow"
        )

    def _round_may_end(
        self,
        calls: list[ToolCall],
        held: list[Message],
        exits: list[str],
        action: AgentAction | None,
    ) -> bool:
        """Whether the resumed round may end the agent without asking the model again, as far
        as the saved state and the tools' names tell: a result returned directly, the exit or
        transfer tool, or an exit or transfer a finished call of the round asked for."""
        if held or exits or (action is not None and (action.exit or action.transfer_to)):
            return True
        owner = self.owner
        ending = {*owner.return_directly, TRANSFER_TOOL}
        if owner._exit_tool is not None:
            ending.add(owner._exit_tool.spec.name)
        return any(call.name in ending for call in calls)

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): what ``resume``
        checks (the limit, the saved conversation, the open calls' tools), and each open call as
        its round's check would (``check_resumed_calls``), nested agents of an ``AgentTool``
        included. Tools a ``Toolset`` or an MCP server behind the tool resources provides are
        not resolved here (that asks a server): their calls are checked when their round starts,
        except one whose approval edits it, whose tool is looked up after the walk
        (``_check_later``), as a person's typo there must not let a parallel branch run first.
        """
        below = walk.below(ctx.address)
        if not below:
            return
        owner = self.owner
        if not owner._uses_flow():
            # Without sub-agents the agent pauses only at its own tool calls (``tool:`` next), so
            # a point in an agent below it was reached by a transfer: it was a flow at the pause.
            # Said so, rather than as its own saved state missing (the flow's is in its slot).
            prefix = f"{ctx.address}/agent:"
            transferred = [point for point in below if point.startswith(prefix)]
            if transferred:
                raise walk.unreachable(
                    transferred,
                    f"they lie in agents {self.name!r} transferred to, and agent {self.name!r} "
                    "has no sub-agents now: build it with the sub_agents= it had at the pause",
                )
        saved, iterations = self._saved_round(ctx)
        # Rendered at resume (``_restore``), before the paused calls run. An instruction
        # function is asked before the model call after them: asked here too (after the walk,
        # as it may await), so one that fails refuses the resume before anything runs.
        instruction = owner.instruction
        if isinstance(instruction, str):
            if instruction:
                try:
                    render_instruction(instruction, ctx.session.values, self.name)
                except InstructionError as exc:
                    raise _MissingAtResume(exc) from exc
            function = None
        else:
            function = instruction
        tools: dict[str, Any] = dict(owner._static_tools)
        resources = ctx._run.resources
        complete = True  # every tool the run would have is in ``tools``
        for source in owner._dynamic_tools:
            found = None
            if isinstance(source, str) and isinstance(resources, Resources):
                found = resources._registered_tool(source)
            if found is None:
                complete = False
            else:
                tools[source] = found
        if owner._transfer_targets():
            tools[TRANSFER_TOOL] = TransferTool(owner._transfer_targets())
        # The system prompt plays no part in which calls are open: the check renders none.
        restored = restore(ctx, self.name, saved.values, [])
        calls = open_calls(saved, restored.messages)
        # Finished by an earlier resume of the checkpoint: replayed, not run (nor checked, nor
        # needing their tools).
        recorded = recorded_calls(saved, calls)
        check_tools(saved, calls, recorded, tools if complete else None, ctx)
        finished = {done.call.id for done in recorded}
        self._check_round_fits(ctx, saved, iterations, calls, restored.held)
        action = saved_action(saved)
        if action is not None and (action.exit or action.break_loop):
            walk.note_ending(ctx.address, action.exit)  # ends its workflows: their later steps
        if (
            action is not None
            and action.transfer_to is not None
            and not owner._uses_flow()  # else its own flow takes it (``_after_transfer``)
            and not walk.plan.leaves_waiting(ctx.address)
            and self._transfer_alone(calls, restored.held, saved_exits(saved), action)
        ):
            walk.note_transfer(ctx.address, action.transfer_to)  # for the flow above to take
        if (
            function is not None
            and not walk.plan.leaves_waiting(ctx.address)
            and not self._round_may_end(
                calls, restored.held, saved_exits(saved), saved_action(saved)
            )
        ):
            walk.defer(functools.partial(self._check_instruction, ctx, function))
        addresses = [join_address(ctx.address, tool_segment(c.name, c.id)) for c in calls]
        why = f"agent {self.name!r} resumes only its open tool calls"
        walk.only_under(ctx.address, addresses, why)
        for call, address in zip(calls, addresses, strict=True):
            if call.id in finished:
                continue
            tool = tools.get(call.name)
            if tool is not None:
                walk.call(tool, call, ctx, address)
            elif not complete and walk.edits(call, address):
                # A toolset's tool whose approval edits the call: found by asking its server,
                # after the walk (``Preflight.defer``), so a bad edit runs nothing either.
                walk.defer(functools.partial(self._check_later, ctx, walk, call, address))
        if ctx._run.turns is not None:
            self._count_round(ctx, walk, saved, calls, restored.held)

    def _count_round(
        self,
        ctx: RunContext,
        walk: Preflight,
        saved: SavedState,
        calls: list[ToolCall],
        held: list[Message],
    ) -> None:
        """Count, for the resume's check (``adk._turns_left``), the model calls the paused round
        is certain to bring, after what its calls' nested runs (an ``AgentTool``'s) counted, as
        they run first, and refuse the resume when the run has no call left for one: the
        round's results, when it cannot end the agent; when it ends it by a transfer alone, the
        call of the agent it transfers to (and of the supervisor a worker reports back to).
        ``_check_round_fits`` refused already a round needing its own call with none left at
        all; this one refuses one whose call left goes to a nested run, a parallel branch, or
        the agent transferred to."""
        if walk.plan.leaves_waiting(ctx.address):  # the round pauses again: nothing after it
            return
        exits, action = saved_exits(saved), saved_action(saved)
        if not self._round_may_end(calls, held, exits, action):
            asking = [(f"agent {self.name!r} (its paused calls' results)", _RESULTS_NEED)]
        else:
            asking = self._after_transfer(ctx, calls, held, exits, action)
        for what, needs in asking:
            refused = count_ahead(walk, ctx, what)
            if refused is not None:
                raise saved.turns_short(
                    f"{refused}: {needs} a model call the limit does not allow; resume with a "
                    "higher max_turns (it counts the calls before the pause)",
                    turns_limit(ctx),
                )

    def _after_transfer(
        self,
        ctx: RunContext,
        calls: list[ToolCall],
        held: list[Message],
        exits: list[str],
        action: AgentAction | None,
    ) -> list[tuple[str, str]]:
        """The model calls certain after a round that ends the agent by a transfer alone (a
        supervisor paying and delegating in one round): the target's first, if it asks its model
        first, then its report back's, if it is a supervisor's worker
        (``FlowAgent.calls_after_transfer``). Each as (what counts it, what needs it, for the
        refusal). None for a round that may end the agent otherwise, or whose transfer passes
        up to a flow above (the agent has no flow of its own: ``Preflight.note_transfer``)."""
        owner = self.owner
        target = self._transfer_alone(calls, held, exits, action)
        if target is None or not owner._uses_flow():
            return []
        flow = owner._adk_flow
        node = flow.find(target) if target else None
        if node is None:  # an unknown target: the tool's error goes to the model
            return [(f"agent {self.name!r} (its paused calls' results)", _RESULTS_NEED)]
        return flow.calls_after_transfer(ctx, node)

    def _transfer_alone(
        self,
        calls: list[ToolCall],
        held: list[Message],
        exits: list[str],
        action: AgentAction | None,
    ) -> str | None:
        """The agent a resumed round that may end its agent (``_round_may_end``) transfers to
        when nothing else may end it (a result held or returned directly, an exit): a finished
        call's transfer saved with the round, else an open ``transfer_to_agent`` call's target
        ("" when its arguments name none); else None."""
        if held or exits or (action is not None and action.exit):
            return None
        owner = self.owner
        ending = set(owner.return_directly)
        if owner._exit_tool is not None:
            ending.add(owner._exit_tool.spec.name)
        if any(call.name in ending for call in calls):
            return None
        if action is not None and action.transfer_to is not None:
            return action.transfer_to
        return next((_transfer_target(c) or "" for c in calls if c.name == TRANSFER_TOOL), None)

    def _adk_paused_transfer(self, ctx: RunContext) -> str | None:
        """The agent the paused round at ``ctx`` transfers to once resumed, as its saved state
        tells (a finished call's transfer, saved with the round), for the enclosing flow's check
        before anything runs (``FlowAgent._check_paused_transfer``); None when it holds none,
        or an exit too (which ends the run rather than handing it on)."""
        resume = ctx.resume
        if resume is None or resume.state is None:
            return None
        action = saved_action(SavedState(f"agent '{self.name}'", resume.state))
        if action is None or action.exit:
            return None
        return action.transfer_to

    async def _check_instruction(self, ctx: RunContext, function: InstructionProvider) -> None:
        """Ask the instruction function as the model call after the resumed round will (a
        deferred part of the walk, ``_adk_preflight``), its text unused: one that fails now
        (its database down, a value it reads gone) would fail the agent after the round's
        approved calls ran, the checkpoint kept for a retry that makes them again. Refused
        instead, before anything runs. Only for a round that needs that model call."""
        try:
            await provide_instruction(function, ctx, self.name)
        except Exception as exc:
            raise CheckpointError(
                f"agent {self.name!r}: its instruction function failed at resume, before the "
                f"paused calls' results could reach the model ({type(exc).__name__}: {exc}); "
                "the resume is refused before anything ran and the checkpoint is kept (resume "
                "it again once the function answers)",
                reason="incompatible",
            ) from exc

    async def _check_later(
        self, ctx: RunContext, walk: Preflight, call: ToolCall, address: str
    ) -> None:
        """``walk.call`` for an open call whose tool a toolset or a tool resource provides,
        found as the round will find it. A lookup that fails is left to the round, which fails
        on it before its calls run."""
        try:
            tools = await self._tools(ctx)
        except Exception:
            return
        tool = tools.get(call.name)
        if tool is not None:
            walk.call(tool, call, ctx, address)

    async def _loop(
        self, ctx: RunContext, *, input: AgentInput | None = None, turn: _Turn | None = None
    ) -> AsyncIterator[AgentEvent]:
        """Model calls and tool rounds until an answer. A fresh run (``input``) sets up its turn
        here rather than in a generator of its own around this one: one generator per run
        fewer, on every event."""
        if turn is None:
            assert input is not None
            turn = self._turn(ctx, 0)
            if turn.tools_pending:
                await self._resolve_tools(turn)
            self._open(turn, input)
            input = None  # read: not kept while the run waits on its model (a GC-tracked object)
        owner = self.owner
        messages = turn.messages
        while True:
            if turn.iterations >= owner.max_iterations:
                raise self._exceeded()
            if turn.rendered is not None:  # the instruction has placeholders, or is a function
                if turn.rendered is _PROVIDED:
                    await self._provide(turn)
                else:
                    self._refresh(turn)
                    if turn.rendered is _PROVIDED:  # a function was assigned as the instruction
                        await self._provide(turn)
            turn.iterations += 1
            if ctx.enable_streaming:
                stream = _call.stream(ctx, turn.model, messages, turn.specs, turn.options)
                # The calls get ids of their own as the chunks are joined, by whoever joins them
                # first: a service encoding the event as soon as its stream ends (before this
                # run moves on) sends the ids the calls pause and are answered under.
                stream._on_join = functools.partial(self._own_joined_ids, turn)
                try:
                    yield AgentEvent.streaming(stream)
                    reply = await stream.collect()
                finally:  # failed, closed or joined: the event's stream must not keep the turn
                    unjoined, stream._on_join = stream._on_join, None
                # Read once: a pydantic field read costs ~0.4k instructions
                # (``BaseModel.__getattr__`` keeps CPython from specialising it), and nothing
                # below changes the list.
                calls = reply.tool_calls
                if unjoined is not None and calls:  # not run: the stream came joined already
                    self._own_ids(turn, reply, calls)
            else:
                running = doing.get() if timed else None  # a record's, under a timeout
                if running is None:
                    reply = await _call.generate(
                        ctx, turn.model, messages, turn.specs, turn.options
                    )
                else:
                    reply = await _noted_call(running, ctx, turn, messages)
                calls = reply.tool_calls
                if calls:  # before its event goes out: the event carries the ids the run uses
                    self._own_ids(turn, reply, calls)
                yield message_event(reply)
            messages.append(reply)  # its usage counted as its event is recorded
            if not calls:
                schema = owner.output_schema
                if schema is None:
                    if owner.output_key:  # the answer's text is read only to store it
                        self._store_output(ctx, reply.content)
                    return
                # The run options are the validation context: a validator that checks the answer
                # against the run's dependencies reads them (``ValidationInfo.context``).
                parsed, answer, problem = parse_output_json(schema, reply.content, ctx.options)
                if parsed is not None:
                    # A schema's own say on an answer that validated, where it is (prebuilt's
                    # Plan: no steps, from a PlanExecute's planner): retried as one that did not.
                    judge = getattr(schema, "_adk_answer_problem", None)
                    if judge is not None:
                        problem = judge(parsed, ctx)
                        if problem is not None:
                            parsed = None
                if parsed is None:
                    assert problem is not None
                    refusal = reply.metadata.get("refusal")
                    if isinstance(refusal, str) and refusal:
                        # The model declined (OpenAI's refusal): no answer to correct, so no
                        # retry, whose prompt would call the refusal invalid JSON, and the error
                        # says what the model said rather than "not valid JSON".
                        # The refusal is the model's answer: content, kept off the spans
                        # without content capture (the error's words without it).
                        refused = f"agent '{self.name}': the model refused to answer with {schema.__name__}"
                        raise _own_words(OutputSchemaError(f"{refused}: {refusal}"), refused)
                    if turn.schema_retried:
                        raise OutputSchemaError(
                            f"agent '{self.name}': the answer does not match "
                            f"{schema.__name__} after a retry: {problem}"
                        )
                    if turn.iterations >= owner.max_iterations:
                        # The retry would be a model call the limit does not allow: failing
                        # on the limit would say "without a final answer" and hide the
                        # answer's problem. As for a held result, which gets no retry either.
                        raise OutputSchemaError(
                            f"agent '{self.name}': the answer does not match "
                            f"{schema.__name__}, with no retry left within its max_iterations "
                            f"of {owner.max_iterations} model calls: {problem}"
                        )
                    turn.schema_retried = True
                    # Not the agent's answer: out of the history, so later agents and the next
                    # run read only the corrected one (the conversation here keeps both, and
                    # the retry prompt between them; a pause saves them as messages).
                    ctx._withdraw(reply)
                    # Said before the retry's reply, so a client shown the rejected answer
                    # (streamed: its chunks went out before it could be checked) can drop it.
                    rejected = OutputRejected(schema_name=schema.__name__, problem=problem)
                    yield AgentEvent(output=AgentOutput(custom=rejected))
                    retry = retry_prompt(schema, problem, with_schema=turn.native)
                    messages.append(Message.user(retry))
                    continue
                self._store_output(ctx, answer)
                yield AgentEvent(output=AgentOutput(custom=parsed))
                return
            tally = _new_round(calls, [])
            # Calls the reply's cut at its token limit left without whole arguments: answered
            # so, not run with what came of them (``cut_calls``).
            cut = cut_calls(reply, calls, turn.tools)
            call = lone_call(calls, turn.tools)
            if call is not None:
                # One call whose tool forwards no events, the common case: awaited here, as the
                # executor would, without the two generators a round of several calls takes
                # (``_round`` and the executor's), each costing more than the rest of the round.
                instead = None if cut is None else cut.get(call.id)
                outcome = await run_tool_call(call, turn.tools, ctx, tool=instead)
                result = self._take(turn, tally, outcome)
                del outcome
                if result is not None:
                    yield result
                del result  # not kept while the model is awaited (a GC-tracked object)
                for event in self._round_end(turn, tally):
                    yield event
                    if event.ends_agent:
                        return
            else:
                rounds = self._round(turn, tally, cut=cut)
                try:
                    async for event in rounds:
                        yield event
                        if event.ends_agent:
                            return
                finally:
                    # Closed at a yield (the run was closed or cancelled, or the round's last
                    # event ended the agent): close the round now, so its tool calls are
                    # cancelled before the run's close returns, not whenever asyncio finalizes
                    # the dropped generator.
                    if getattr(rounds, "ag_frame", None) is not None:  # exhausted: nothing to do
                        await rounds.aclose()
            del tally  # the round is over: none of it stays alive while the model is awaited
            if turn.done:
                return
            if owner.reset_tool_choice:
                turn.options = _call.free_tool_choice(turn.options)

    def _own_joined_ids(self, turn: _Turn, reply: Message) -> None:
        """``_own_ids`` for a streamed reply, as its chunks are joined (``MessageStream``)."""
        calls = reply.tool_calls
        if calls:
            self._own_ids(turn, reply, calls)

    def _own_ids(self, turn: _Turn, reply: Message, calls: list[ToolCall]) -> None:
        """Each call of ``reply`` gets an id of its own in the loop's conversation: one shared
        with another call of the reply (``unique_call_ids``) or with an earlier call the loop
        made (``own_call_ids``: a server numbering each response's calls ``call_0``) is
        renamed, as the same id would make both calls one interrupt point. The conversation's
        ids are read once, at its first reply with calls (after a resume: the saved one's),
        input included: a ``LoopAgent``'s next iteration (the address is the same) has the
        earlier one's calls there, and its call under one of their ids would pause at that
        call's point, where an approval sent twice would decide it."""
        if len(calls) > 1:
            unique_call_ids(calls)
        seen = turn.call_ids
        if seen is None:
            seen = turn.call_ids = calls_seen(turn.messages)
        own_call_ids(reply, calls, seen)

    def _refresh(self, turn: _Turn) -> None:
        """Render the system prompt again before a model call if it can differ from the last
        render: the session values its placeholders read changed (a tool or callback of this
        run wrote them, or an earlier agent's ``output_key``), or the instruction was assigned.
        The new prompt replaces the old at the head of the conversation, as Google ADK renders
        its instruction before every model call. A required value removed since fails the run
        here, as a missing one fails its start (and Google ADK's call): the model would
        otherwise be told a value that no longer holds."""
        assert turn.rendered is not None
        instruction, keys, before = turn.rendered
        if self.owner.instruction is instruction and _read(keys, turn.ctx.session.values) == before:
            return
        try:
            system = self._system(turn)
        except InstructionError as exc:
            raise InstructionError(
                f"{exc}; it was removed during the run, before model call {turn.iterations + 1}"
            ) from exc
        size = turn.system_size
        turn.messages[:size] = system  # in place: the loop holds the list
        turn.head_size += len(system) - size
        turn.system_size = len(system)

    async def _provide(self, turn: _Turn) -> None:
        """Ask the instruction function for the system prompt before a model call, as Google ADK
        asks its ``InstructionProvider`` before every call: what it reads (the session, the
        time, a database) cannot be known, so it is asked every time. Its text replaces the
        system prompt at the head of the conversation; an error it raises fails the agent."""
        instruction = self.owner.instruction
        if isinstance(instruction, str):  # assigned a str since: rendered as any str is
            system = self._system(turn)
        else:
            text = await provide_instruction(instruction, turn.ctx, self.name)
            system = self._system(turn, text)
        size = turn.system_size
        turn.messages[:size] = system  # in place: the loop holds the list
        turn.head_size += len(system) - size
        turn.system_size = len(system)

    async def _round(
        self,
        turn: _Turn,
        tally: _Round,
        recorded: Sequence[Recorded] = (),
        cut: dict[str, Tool] | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run a round's calls concurrently, then close it (``_round_end``): afterwards
        ``turn.done`` says whether the agent is done. A resumed round first takes the outcomes
        an earlier resume ``recorded`` (their calls do not run again), and records each call it
        finishes (``tally.record``) before its result goes out."""
        calls = tally.calls
        if recorded:
            for done in recorded:
                outcome = ToolOutcome(
                    done.call, message=done.message, action=done.action, tool_name=done.tool_name
                )
                result = self._take(turn, tally, outcome)
                if result is not None:
                    yield result
            calls = _not_recorded(calls, recorded)
            if not calls:
                for event in self._round_end(turn, tally):
                    yield event
                return
        taken = None if tally.record is None else functools.partial(self._record, turn, tally)
        instead: Mapping[str, Tool] | None = extra_transfers(calls, turn.tools)
        if cut is not None:  # a cut call's answer is that it was cut, a transfer's included
            instead = {**instead, **cut} if instead is not None else cut
        outcomes = execute_tool_calls(calls, turn.tools, turn.ctx, instead, taken)
        try:
            async for item in outcomes:
                if isinstance(item, AgentEvent):  # forwarded from inside a tool (AgentTool)
                    yield item
                    continue
                result = self._take(turn, tally, item)
                if result is not None:
                    yield result
        finally:
            if getattr(outcomes, "ag_frame", None) is not None:  # closed at a yield: cancel calls
                await outcomes.aclose()
        for event in self._round_end(turn, tally):
            yield event

    async def _record(self, turn: _Turn, tally: _Round, outcome: ToolOutcome) -> None:
        """Record a resumed call's outcome in the checkpoint being resumed, in the call's task as
        it ends (``execute_tool_calls``), before its result goes out or anything else runs (the
        next model call): a later resume of the checkpoint (this one failed, or its reader left,
        or its process died) replays it rather than running the call again. The write goes to
        its end even if the run is cancelled meanwhile (a sibling branch failing, the reader
        leaving): the call ran. One that cannot be written is an ``adk.checkpoint`` warning
        (``_Progress.record``), and the round records nothing more: the run goes on as without
        records. A call that paused again is not recorded. The round's ``record`` and
        ``settles`` are passed whole, read when the write happens: calls that ended together are
        written and settled by the first write, and the others' records write nothing more."""
        settles = tally.settles
        if outcome.signal is not None or tally.record is None or settles is None:
            return
        assert outcome.message is not None
        call = outcome.call
        ctx = turn.ctx
        tally.record.append(
            record_entry(call.id, outcome.tool_name, outcome.message, outcome.action)
        )
        settles.append(join_address(ctx.address, tool_segment(call.name, call.id)))
        plan = ctx._run.plan
        assert plan is not None and plan.progress is not None
        what = f"the result of agent {self.name!r}'s resumed call {call.name!r} ({call.id})"
        recorded = {"done": tally.record}  # the list itself: read when the write happens
        if not await finish(plan.progress.record(ctx, recorded, what, settles)):
            tally.record = tally.settles = None

    def _take(self, turn: _Turn, tally: _Round, outcome: ToolOutcome) -> AgentEvent | None:
        """Note one call's outcome in its round; the result's event to emit now, or None when
        the call paused or its result is held back to come last."""
        asked = outcome.action
        if asked is not None and asked.transfer_to:
            action, first = tally.action, tally.transfer_by
            # The earliest transfer in the model's order stands (a restored action's transfer,
            # made before the pause, stands over any made after it).
            if (
                action is not None
                and action.transfer_to
                and (first is None or _earlier(tally.calls, first, outcome.call))
            ):
                asked = AgentAction(asked.exit, None, asked.break_loop)  # loses
            else:
                tally.transfer_by = outcome.call
        tally.action = _merge_action(tally.action, asked)
        if outcome.signal is not None:
            if tally.signal is None:
                tally.signal = _InterruptSignal()
            tally.signal.merge(outcome.signal)
            if tally.open_ids is None:
                tally.open_ids = []
            tally.open_ids.append(outcome.call.id)
            return None
        message = outcome.message
        assert message is not None
        turn.messages.append(message)
        exiting = asked is not None and asked.exit
        directly = self.owner.return_directly  # mostly empty: the call's name is then not read
        returned = exiting or (outcome.call.name in directly if directly else False)
        if returned and not message.metadata.get("is_error"):
            if message.metadata.get("edited_arguments") is not None:  # the output, not for a model
                adk._approval.without_note(message)
            tally.held.append(message)
            if exiting:
                tally.exits = [*(tally.exits or ()), outcome.call.id]
            return None
        return tool_result_event(message, outcome.tool_name)

    def _round_end(self, turn: _Turn, tally: _Round) -> Iterator[AgentEvent]:
        """The events that close a round once all its outcomes are in: the pause, or the held
        results (the last one the agent's output) and the action the tools asked for; sets
        ``turn.done``. A plain generator: the round's are all made here, nothing is awaited."""
        ctx, held, action = turn.ctx, tally.held, tally.action
        signal = tally.signal
        shown = turn.shown
        if signal is not None:
            if turn.iterations >= self.owner.max_iterations:
                self._check_pause_at_limit(tally)
            exits = tally.exits
            if shown is not None:  # saved as the older pyadk saved them: in the history only
                held, exits = _without_shown(held, exits, shown)
            state = self._pause_state(turn, tally.open_ids or [], held, exits or None, action)
            signal.save(ctx.address, state)
            yield AgentEvent(action=AgentAction(interrupted=signal.info()), _signal=signal)
            return
        if held:
            _emission_order(turn.messages, held, tally.exits)
            for message in held:
                event = message_event(message)
                if shown is not None and _is_shown(message, shown):
                    event._flags = _RECORDED  # in the history since before the pause
                yield event
            final = held[-1]
            schema = self.owner.output_schema
            if schema is None:
                self._store_output(ctx, final.content)
            else:
                yield self._held_output(ctx, schema, final)
        if action is not None and (action.exit or action.transfer_to or action.break_loop):
            yield AgentEvent(action=action)
        turn.done = bool(held) or (action is not None and bool(action.exit or action.transfer_to))

    # -- pausing and resuming (the saved state's format is in ``_react_state``) ---------------
    def _pause_state(
        self,
        turn: _Turn,
        open_ids: list[str],
        held: list[Message],
        exits: list[str] | None,
        action: AgentAction | None,
    ) -> dict[str, Any]:
        """What the agent saves when a tool interrupts it; keeps the saved head for later pauses."""
        state, turn.saved_head = pause_state(
            turn.ctx,
            self.name,
            iterations=turn.iterations,
            open_ids=open_ids,
            held=held,
            exits=exits,
            action=action,
            messages=turn.messages,
            head_size=turn.head_size,
            system_size=turn.system_size,
            saved_head=turn.saved_head,
            input_rewritten=self.owner.history_rewriter is not None,
        )
        if turn.schema_retried:  # saved only when set: older checkpoints lack it, meaning unused
            state["schema_retried"] = True
        return state

    def _restore(self, turn: _Turn, state: dict[str, Any]) -> list[Message]:
        """Rebuild the conversation saved at the pause, starting with the system prompt the
        current instruction renders (not the one the agent started with); returns the held
        results. An instruction that needs a value the session lacks refuses the resume (the
        walk before it renders it too, but not in what it cannot see, a toolset's agent tool)."""
        try:
            system = self._system(turn)
        except InstructionError as exc:
            raise _MissingAtResume(exc) from exc
        restored = restore(turn.ctx, self.name, state, system)
        turn.messages = restored.messages
        turn.head_size = restored.head_size
        turn.system_size = len(system)
        turn.saved_head = restored.saved_head
        return restored.held

    def _held_output(self, ctx: RunContext, schema: type[BaseModel], result: Message) -> AgentEvent:
        """The ``custom`` output for a tool result that ends the agent under ``output_schema``:
        it is the agent's answer, so it must match as the model's would (without the retry, as
        the model is not asked again); ``RunResult.output`` is then the instance either way."""
        parsed, answer, problem = parse_output_json(schema, result.content, ctx.options)
        if parsed is None:
            raise OutputSchemaError(
                f"agent '{self.name}': the result of tool '{result.name}', its final answer, "
                f"does not match {schema.__name__}: {problem}"
            )
        self._store_output(ctx, answer)
        return AgentEvent(output=AgentOutput(custom=parsed))

    def _store_output(self, ctx: RunContext, text: str) -> None:
        key = self.owner.output_key
        if key:
            ctx.session[key] = text


def _not_text(what: str, instruction: object) -> str:
    """The refusal of an instruction that is neither a str nor a function."""
    return (
        f"{what} instruction must be a str, got {type(instruction).__name__}; a function of "
        "the context returning the text (sync or async) is taken too"
    )


def _two_tools(agent: str, name: str, first: str, second: str) -> ValueError:
    """Two tools of one name: a model offered both could call either (some providers refuse the
    request), so the agent refuses them, naming where each came from."""
    return ValueError(
        f"agent '{agent}': two tools are named {name!r}: {first} and {second}; give one another "
        "name (FunctionTool(fn, name=...), MCPToolset(..., prefix=...))"
    )


def _transfer_clash(agent: str, origin: str) -> ValueError:
    return ValueError(
        f"agent '{agent}': a tool named {TRANSFER_TOOL!r} ({origin}) clashes with the transfer "
        "tool the agent adds for the agents it can transfer to; rename the tool"
    )


def _dynamic_origin(source: object, tool: object) -> str:
    """A tool resolved at run time, described with the source it came from."""
    if isinstance(source, str):
        return f"tool resource {source!r} ({tool_origin(tool)})"
    return f"{tool_origin(tool)} from toolset {type(source).__qualname__}"


def _emission_order(messages: list[Message], held: list[Message], exits: list[str] | None) -> None:
    """Sort the held results, in place, as they are emitted: in call order, the results of tools
    that asked to exit after the others, so the last result is the agent's final output (exit's
    ``final_result`` rather than whatever finished last). The calls come from the round's reply,
    the conversation's last message with tool calls: on resume it names those finished before the
    pause too."""
    calls = next(m.tool_calls for m in reversed(messages) if m.tool_calls)
    late, exiting = len(calls), frozenset(exits or ())
    order = {c.id: i + late if c.id in exiting else i for i, c in enumerate(calls)}
    held.sort(key=lambda m: order.get(m.tool_call_id or "", -1))


def _not_recorded(calls: Sequence[ToolCall], recorded: Sequence[Recorded]) -> list[ToolCall]:
    """The ``calls`` of a resumed round that an earlier resume did not record as finished. Its
    own function: the comprehension's closure would make a cell of ``_ReActCore._round``'s
    local, made on every tool round of every run."""
    finished = {done.call.id for done in recorded}
    return [call for call in calls if call.id not in finished]


def _without_shown(
    held: list[Message], exits: list[str] | None, shown: list[Message]
) -> tuple[list[Message], list[str]]:
    """``held`` and ``exits`` without an older checkpoint's exit results shown before its pause
    (``_Turn.shown``), as that pyadk saved a pause of the round. Its own function, as is
    ``_is_shown``: the comprehensions' closures would make ``_ReActCore._round_end``'s locals
    cells, made and read through on every tool round of every run."""
    kept = [m for m in held if all(m is not s for s in shown)]
    return kept, [i for i in exits or () if all(i != s.tool_call_id for s in shown)]


def _is_shown(message: Message, shown: list[Message]) -> bool:
    """Whether ``message`` is one of an older checkpoint's exit results shown before its pause."""
    return any(message is s for s in shown)


def _earlier(calls: Sequence[ToolCall], first: ToolCall, second: ToolCall) -> bool:
    """Whether ``first`` comes before ``second`` in the model's order of ``calls``."""
    return calls.index(first) < calls.index(second)


def _merge_action(into: AgentAction | None, new: AgentAction | None) -> AgentAction | None:
    if new is None:
        return into
    if into is None:
        return AgentAction(new.exit, new.transfer_to, new.break_loop)
    into.exit = into.exit or new.exit
    into.transfer_to = new.transfer_to or into.transfer_to
    into.break_loop = into.break_loop or new.break_loop
    return into


def _not_a_schema(what: str, value: object) -> str:
    """The refusal of an ``output_schema`` that is not a pydantic model class. The OpenAI Agents
    SDK's ``output_type`` takes any type a ``TypeAdapter`` does (``list[str]``, a dataclass, a
    ``TypedDict``, ``str`` for text), so a port passes those here."""
    problem = (
        f"{what} output_schema must be a pydantic model class (a BaseModel subclass), got "
        f"{shown(value)}"
    )
    if value is str:
        return f"{problem}; a text answer needs no schema: leave output_schema out"
    if isinstance(value, BaseModel):
        return f"{problem}; pass the class, {type(value).__name__}, not an instance"
    return (
        f"{problem}; for a list, a dataclass, a TypedDict or a plain value, make it a field of a "
        "model (class Answer(BaseModel): items: list[str]) and read it from RunResult.output"
    )


def _check_model(model: object, what: str) -> None:
    """Refuse a model that is neither a model resource name nor an object with ``generate`` (a
    class given for an instance included), here rather than at the first model call."""
    if isinstance(model, str) and model:
        return
    if callable(getattr(model, "generate", None)) and not isinstance(model, type):
        return
    shown = repr(model) if len(repr(model)) <= 60 else type(model).__name__
    raise TypeError(
        f"{what} model must be a ChatModel or the name of a model resource, got {shown}"
    )


def _check_model_options(options: object, what: str) -> None:
    if options is not None and not isinstance(options, ModelOptions):
        raise TypeError(
            f"{what} model_options must be a ModelOptions (ModelOptions(**options) for a "
            f"dict), got {type(options).__name__}"
        )


def _check_output_schema(schema: object, what: str) -> None:
    if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(_not_a_schema(what, schema))


def _check_instruction(instruction: object, what: str) -> None:
    if not isinstance(instruction, str):  # its placeholders are found now, not at a run
        if not callable(instruction):
            raise TypeError(_not_text(what, instruction))
        check_provider(instruction, what)


def _check_output_key(key: object, what: str) -> None:
    if key is not None and not (isinstance(key, str) and key):
        # "" stored nothing without a word, and another type made a session key no
        # {placeholder} reads and no checkpoint store holds.
        raise TypeError(
            f"{what} output_key must be a non-empty str (the session key the answer is "
            f"stored under), got {shown(key)}"
        )


def _checked(check: Callable[[Any, str], None]) -> Callable[[ReActAgent, Any], Any]:
    """A setting's check after the agent is made (``_SETTINGS``), as its constructor's."""

    def set_checked(agent: ReActAgent, value: Any) -> Any:
        check(value, f"ReActAgent {agent.name!r}:")
        return value

    return set_checked


def _set_max_iterations(agent: ReActAgent, value: Any) -> Any:
    check_count(value, f"ReActAgent {agent.name!r}: max_iterations")
    return value


def _set_return_directly(agent: ReActAgent, value: Any) -> frozenset[str]:
    what = f"ReActAgent {agent.name!r}:"
    names = _listed(value, f"{what} return_directly")
    agent._check_return_directly(names, what)
    return frozenset(names)  # as made: a list would be searched per tool round


def _set_history_rewriter(agent: ReActAgent, value: Any) -> Any:
    _check_rewriter(value, f"ReActAgent {agent.name!r}")
    # Its flow's too: its sub-agents read the history through it (given at construction, the
    # flow had it), and so do they when they inherit it (``FlowAgent.history_rewriter``).
    agent._adk_flow.history_rewriter = value
    return value


def _listed(values: Iterable[Any], what: str) -> list[Any]:
    """``values`` as a list; a str (or any non-iterable) is refused, not read as its letters."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise TypeError(
            f"{what} must be a list, got {type(values).__name__} {values!r} (for one, write [...])"
        )
    return list(values)


def _is_toolset(source: object) -> bool:
    return callable(getattr(source, "tools", None)) and not hasattr(source, "spec")


def _ported_argument(what: str, name: str) -> TypeError:
    """The error for an argument ``ReActAgent`` does not have: Python's words, with where another
    SDK's argument of that name went."""
    text = f"{what[:-1]}: got an unexpected keyword argument {name!r}"
    hint = AGENT_ARGUMENT_HINTS.get(name)
    return TypeError(text if hint is None else f"{text}; {hint}")


_SETTINGS: dict[str, SettingCheck] = {
    "max_iterations": _set_max_iterations,
    "return_directly": _set_return_directly,
    "history_rewriter": _set_history_rewriter,
    "instruction": _checked(_check_instruction),
    "output_key": _checked(_check_output_key),
    "output_schema": _checked(_check_output_schema),
    "model_options": _checked(_check_model_options),
}
"""The public settings ``ReActAgent`` checks when made, checked when assigned later."""


class ReActAgent:
    """A model-and-tools agent (see the module docstring).

    ``model`` is a ``ChatModel`` or the name of a model resource; ``tools`` are ``Tool`` objects,
    plain functions (wrapped in ``FunctionTool``), ``Toolset``s resolved at run time, or names of
    tool resources (``Runner(resources=...)``). ``instruction`` may use ``{key}`` placeholders filled
    from session values, or be a function of the ``RunContext`` returning the text, sync or async,
    asked before every model call (Google ADK's ``InstructionProvider``; an extension to
    DESIGN.md). Other parameters as in DESIGN.md.
    """

    _adk_first_askers = True
    """It starts with a model call: a resume with no model call left is refused when this agent
    would run after the paused step (``adk._turns_left``)."""

    # Settings assigned after the agent is made are checked as its constructor checks them
    # (``_SETTINGS``; ``model`` by its property): ``adk._checks.checked_settings``.
    __setattr__ = checked_settings(_SETTINGS, made="_adk_flow")
    # Set by the constructor past ``__setattr__`` (checked there once): declared for typing.
    name: str
    description: str
    instruction: str | InstructionProvider
    max_iterations: int
    return_directly: frozenset[str]
    output_key: str | None
    output_schema: type[BaseModel] | None
    model_options: ModelOptions | None
    history_rewriter: HistoryRewriter | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A subclass that shadows ``model`` (``model = "fast"``, a property of its own) sets
        and reads it without this class's setter, which records an agent naming a resource
        (``adk._naming``): the class itself is recorded instead, for as long as it exists, so
        a ``Runner`` given no resources looks at every tree then (a walk of a few microseconds;
        its instances' ``model`` is read as it is). Unrecorded, such an agent's str model
        escaped the Runner's check and failed at its first model call."""
        super().__init_subclass__(**kwargs)
        if "model" in cls.__dict__:
            _naming.add(cls)

    def __init__(
        self,
        name: str,
        model: ChatModel | str,
        instruction: str | InstructionProvider = "",
        description: str = "",
        tools: Iterable[ToolSource] = (),
        max_iterations: int = 20,
        return_directly: Iterable[str] = (),
        output_key: str | None = None,
        output_schema: type[BaseModel] | None = None,
        sub_agents: Iterable[Agent] = (),
        exit_tool: bool = False,
        model_options: ModelOptions | None = None,
        history_rewriter: HistoryRewriter | None = None,
        reset_tool_choice: bool = True,
        callbacks: Iterable[Any] = (),
        **ported: Never,
    ) -> None:
        check_name(name, "a ReActAgent")
        what = f"ReActAgent {name!r}:"
        if ported:
            raise _ported_argument(what, next(iter(ported)))
        # Its own callbacks (adk.callbacks), compiled here so a bad one fails where it is given;
        # ``adk.callbacks`` is loaded only for an agent that has some.
        self._adk_callbacks = (
            None if callbacks == () else adk.callbacks._agent_callbacks(callbacks, what[:-1])
        )
        check_count(max_iterations, f"{what} max_iterations")
        _check_model(model, what)
        _check_rewriter(history_rewriter, what[:-1])
        _check_model_options(model_options, what)
        tools = _listed(tools, f"{what} tools")
        return_directly = _listed(return_directly, f"{what} return_directly")
        _check_output_schema(output_schema, what)
        _check_instruction(instruction, what)
        _check_output_key(output_key, what)
        # Checked above: set past ``__setattr__``'s checks (``_SETTINGS``), which are for later.
        init = object.__setattr__
        init(self, "name", name)
        init(self, "description", agent_description(description, what[:-1]))
        self.model = model
        init(self, "instruction", instruction)
        # The instruction and the keys its placeholders read, found once (not per model call);
        # found again by ``_system`` for an instruction assigned later.
        self._keyed = (instruction, _keys(instruction) if isinstance(instruction, str) else ())
        init(self, "max_iterations", max_iterations)
        init(self, "return_directly", frozenset(return_directly))
        init(self, "output_key", output_key)
        init(self, "output_schema", output_schema)
        init(self, "model_options", model_options)
        init(self, "history_rewriter", history_rewriter)
        self.reset_tool_choice = reset_tool_choice
        self._static_tools: dict[str, Any] = {}
        self._dynamic_tools: list[Any] = []
        self._exit_tool: Tool | None = None
        for index, source in enumerate(tools):
            if isinstance(source, type) and (
                callable(getattr(source, "tools", None)) or hasattr(source, "spec")
            ):
                # tools=[MyToolset]: taken for a toolset (its ``tools`` is callable) and failing
                # the run at its start, or for a tool whose ``spec`` is a property object.
                raise TypeError(
                    f"agent '{self.name}': tools[{index}] is the class {source.__name__} (pass "
                    f"an instance: {source.__name__}(...))"
                )
            self._add_tool(source)
        if exit_tool:
            self._exit_tool = _make_exit_tool()
            self._add_tool(self._exit_tool)
        self._check_resource_names()
        self._check_return_directly(return_directly, what)
        self._static_specs = tuple(t.spec for t in self._static_tools.values())
        # (model, model_options, output_schema) -> (options, native); see ``_options_for``
        self._options_cache: tuple[object, object, object, ModelOptions | None, bool] | None = None
        self._core = _ReActCore(self)
        self._adk_flow = FlowAgent(self._core, sub_agents, history_rewriter=history_rewriter)

    def _check_return_directly(self, names: list[Any], what: str) -> None:
        """Refuse a ``return_directly`` naming a tool the agent does not have."""
        if self._dynamic_tools:  # a Toolset's tools may vary by run: only static ones checked
            return
        unknown = [n for n in names if n not in self._static_tools and n != TRANSFER_TOOL]
        if unknown:
            raise ValueError(
                f"{what} return_directly names tools it does not have: {unknown} "
                f"(its tools: {sorted(self._static_tools)})"
            )

    def _add_tool(self, source: ToolSource) -> None:
        if isinstance(source, str) or _is_toolset(source):
            if not isinstance(source, str) and any(s is source for s in self._dynamic_tools):
                # Each of its tools would clash with itself at every start: refused here.
                raise ValueError(
                    f"agent '{self.name}': toolset {type(source).__qualname__} is given twice"
                )
            self._dynamic_tools.append(source)
            if isinstance(source, str):
                _naming.add(self)  # the Runner's check looks for it (adk._naming)
            return
        if isinstance(source, Tool):
            tool: Any = source
        elif callable(source):
            tool = FunctionTool(source)
        else:
            hint = ""
            if isinstance(source, Agent):  # Google ADK ports pass agents where AgentTool goes
                hint = f"; to call agent {source.name!r} as a tool, wrap it: adk.AgentTool(agent)"
            raise TypeError(
                f"agent '{self.name}': a tool must be a Tool, a function, a Toolset or a tool "
                f"resource name, got {type(source).__name__}{hint}"
            )
        _shows_events(tool)  # a ``reports_progress`` that is no bool: refused here, not per call
        name = tool.spec.name
        if not (isinstance(name, str) and _is_tool_name(name)):
            # A tool of one's own names itself (FunctionTool, AgentTool and MCP tools check or
            # mend theirs): one model APIs refuse failed every model call of the agent, a 400.
            raise ValueError(
                f"agent '{self.name}': the tool named {name!r} ({self._origin_of(tool)}) has a "
                "name model APIs refuse: they take 1 to 64 letters, digits, '_' and '-' (no "
                "spaces or dots), so every model call offering it would fail"
            )
        known = self._static_tools.get(name)
        if known is not None:
            raise _two_tools(self.name, name, self._origin_of(known), self._origin_of(tool))
        self._static_tools[name] = tool

    @property
    def model(self) -> ChatModel | str:
        """The ``ChatModel``, or the name of a model resource. May be set after the agent is
        made; a str is recorded (``adk._naming``) so that a ``Runner`` given no resources looks
        for it. (Kept as ``_model``, an attribute of the agent's own: not through ``__dict__``,
        whose read turns its inline attributes into a dict, ~10k instructions an agent made.)"""
        return self._model

    @model.setter
    def model(self, model: ChatModel | str) -> None:
        # Set after the agent is made, checked as when made (the constructor's own set too:
        # a cheap check, where telling the two apart by ``__dict__`` would make the agent's
        # attributes a dict, every read of them slower: see the getter). A subclass may set
        # it before ``super().__init__``, which checks what it is given: no name to say yet.
        try:
            name = self.name
        except AttributeError:
            name = None
        if name is not None:
            _check_model(model, f"ReActAgent {name!r}:")
        self._model = model
        if isinstance(model, str):
            _naming.add(self)

    @model.deleter
    def model(self) -> None:
        # ``mock.patch.object(agent, "model", ...)`` ends by deleting what it set (no "model"
        # in the agent's ``__dict__``), then sets the original back once it reads as missing.
        del self._model

    def __setstate__(self, state: Any) -> None:
        """A copy (``copy.copy``, ``deepcopy``) or an unpickled agent is made without
        ``__init__``: recorded too when it names a resource (``adk._naming``). The state is the
        agent's ``__dict__``, or (``__dict__``, slots) for a subclass with ``__slots__``."""
        if isinstance(state, tuple):
            state, slots = state
            for name, value in (slots or {}).items():
                setattr(self, name, value)
        if state:
            self.__dict__.update(state)
        if self._adk_named_resource() is not None:
            _naming.add(self)

    def _adk_named_resource(self) -> tuple[str, str] | None:
        """The first resource this agent names, (kind, name): its model given as a str, a tool
        given as a str; None when it names none. The ``Runner`` asks it when it is given no
        resources (``adk.runner._named_without_resources``), to refuse where it is made what
        could only fail at this agent's first model call. Read as the agent is now (its
        ``model`` may be set after it is made)."""
        if isinstance(self.model, str):
            return ("model", self.model)
        for source in self._dynamic_tools:
            if isinstance(source, str):
                return ("tool", source)
        return None

    def _check_resource_names(self) -> None:
        """Refuse a tool resource named twice, or named like a tool given: a resource's tool has
        the name it is registered under, so the model would be offered two tools of one name."""
        named: set[str] = set()
        for source in self._dynamic_tools:
            if not isinstance(source, str):
                continue
            resource = f"tool resource {source!r}"
            known = self._static_tools.get(source)
            if known is not None:
                raise _two_tools(self.name, source, self._origin_of(known), resource)
            if source in named:
                raise ValueError(
                    f"agent '{self.name}': two tools are named {source!r}: {resource}, listed twice"
                )
            named.add(source)

    def _origin_of(self, tool: object) -> str:
        """A tool given to the agent (or added by it), described for a clash's error."""
        if tool is self._exit_tool:
            return "the exit tool (exit_tool=True)"
        return tool_origin(tool)

    def _options_for(self, model: object) -> tuple[ModelOptions | None, bool]:
        """The model options for ``model`` and whether it takes ``output_schema`` natively.

        Cached for the last model, ``model_options`` and ``output_schema`` (by identity: the
        public attributes may be replaced between runs, and then the next run uses them)."""
        cached = self._options_cache
        schema, given = self.output_schema, self.model_options
        if cached is not None and cached[0] is model and cached[1] is given and cached[2] is schema:
            return cached[3], cached[4]
        native = schema is not None and bool(getattr(model, "supports_response_format", False))
        options = given
        if native and schema is not None:
            wanted = ModelOptions(response_format=response_format(schema))
            options = (options or ModelOptions()).merged(wanted)
        self._options_cache = (model, given, schema, options, native)
        return options, native

    def _adk_answer(self, value: Any, ctx: RunContext) -> list[AgentEvent]:
        """Its events when a ``before_agent`` callback answered for it with ``value`` (see
        ``adk.callbacks``): the answer stands for the model's, so ``output_key`` is written from
        it and, under ``output_schema``, it must match (as a tool's result that ends the agent
        must, without a retry) and the instance follows as the ``custom`` output."""
        schema = self.output_schema
        core = self._core
        if schema is None:
            message = adk.callbacks._answer_message(self.name, value)
            core._store_output(ctx, message.content)
            return [message_event(message)]
        if isinstance(value, BaseModel):
            if not isinstance(value, schema):
                raise TypeError(
                    f"before_agent answered for agent '{self.name}' with a "
                    f"{type(value).__name__}; its output_schema is {schema.__name__}"
                )
            parsed: BaseModel = value
            message = Message.assistant(value.model_dump_json())
            text = message.content
        elif isinstance(value, dict):
            try:
                parsed = schema.model_validate(value, context=ctx.options)
            except ValidationError as exc:
                raise OutputSchemaError(
                    f"agent '{self.name}': the answer a before_agent callback gave does not "
                    f"match {schema.__name__}: {exc}"
                ) from exc
            except ToolError as exc:  # a validator's rejection, as parse_output_json reads it
                raise OutputSchemaError(
                    f"agent '{self.name}': the answer a before_agent callback gave does not "
                    f"match {schema.__name__}: {rejection(exc)}"
                ) from exc
            message = Message.assistant(parsed.model_dump_json())
            text = message.content
        else:
            message = adk.callbacks._answer_message(self.name, value)
            found, text, problem = parse_output_json(schema, message.content, ctx.options)
            if found is None:
                raise OutputSchemaError(
                    f"agent '{self.name}': the answer a before_agent callback gave does not "
                    f"match {schema.__name__}: {problem}"
                )
            parsed = found
        core._store_output(ctx, text)
        return [message_event(message), AgentEvent(output=AgentOutput(custom=parsed))]

    def _transfer_targets(self) -> list[tuple[str, str]]:
        flow = self._adk_flow
        targets = [(node.name, node.description) for node in flow.sub_agents]
        parent = flow.parent
        if parent is not None and flow.may_transfer_to_parent:
            targets.append((parent.name, parent.description))
        return targets

    @property
    def tools(self) -> list[Tool | Toolset | str]:
        """The tools and tool sources given (plus ``exit`` when ``exit_tool``)."""
        return [*self._static_tools.values(), *self._dynamic_tools]

    @property
    def sub_agents(self) -> list[Agent]:
        """The agents it can transfer to, given here or by ``with_sub_agents`` (not its parent)."""
        agents = [node.agent for node in self._adk_flow.sub_agents]
        return [a.owner if isinstance(a, _ReActCore) else a for a in agents]

    def _uses_flow(self) -> bool:
        flow = self._adk_flow
        return bool(flow.sub_agents) or flow.parent is not None

    @property
    def _adk_flow_span(self) -> bool:
        """Whether its span is a flow's (``FlowAgent._adk_flow_span``): it runs its flow, whose
        transfers run under it, in place (``run``), rather than only its loop. Read by tracing
        once per traced start."""
        return self._uses_flow()

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the model-and-tools loop; through the agent's own flow (which acts on transfers)
        only when it has sub-agents or a parent."""
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        flow = self._adk_flow
        if flow.sub_agents or flow.parent is not None:  # ``_uses_flow``, inlined: once per run
            return flow.run(input, ctx)
        return self._core._loop(ctx, input=input)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Continue after an interrupt (through the flow when ``run`` would use it); of the
        paused tool round, only the calls still open run again."""
        if self._uses_flow():
            return self._adk_flow.resume(ctx)
        return self._core.resume(ctx)

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``), as ``resume`` goes."""
        if self._uses_flow():
            self._adk_flow._adk_preflight(ctx, walk)
        else:
            self._core._adk_preflight(ctx, walk)

    def __repr__(self) -> str:
        return f"ReActAgent(name={self.name!r}, tools={sorted(self._static_tools)})"
