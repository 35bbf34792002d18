"""Running a model's tool calls: concurrently, each failure an error result, interrupts collected.

Used by ``ReActAgent`` and the event-driven layer. Outcomes arrive in completion order; events that
tools emit while running (an ``AgentTool`` forwarding its inner events, a tool's progress reports)
arrive as they happen. A single call runs inline, without a task, because that is the common case
and a task costs more than the rest of the call; a call of a tool that emits (``_emits_events``)
runs in one, so its events can pass while it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

# ``adk._approval`` loads on first use (the package's ``__getattr__``): only a resumed call reads
# it, for a person's edit of its arguments.
import adk

from .._aio import cancel_and_wait, cancelled_beyond
from .._doing import doing, timed
from .._driver import is_cancellation, signal_of
from .._run_error import MaxTurnsExceeded
from ..checkpoint.codec import STRUCTURED, CheckpointError
from ..context import RunContext
from ..events import AgentAction, AgentEvent, _type_name
from ..interrupts import Interrupt, _InterruptSignal, _ResumePlan, join_address, tool_segment
from ..messages import _CALL_ID_MARK, Message, ToolCall, _unique_call_ids, tool_message
from .base import (
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
    _shows_events,
    new_tool_context,
)

__all__ = [
    "ToolOutcome",
    "calls_seen",
    "cut_calls",
    "execute_tool_calls",
    "lone_call",
    "own_call_ids",
    "run_tool_call",
    "unique_call_ids",
]

logger = logging.getLogger("adk.tools")


@dataclass(slots=True)
class ToolOutcome:
    """What one call produced: a tool message, or an interrupt signal; plus requested actions."""

    call: ToolCall
    message: Message | None = None
    result: ToolResult | None = None
    action: AgentAction | None = None
    signal: _InterruptSignal | None = None
    # The name ``message`` was made with (the call's as the tool ended), for its event
    # (``tool_result_event``): read once, not again from the message.
    tool_name: str = ""


_Item = AgentEvent | ToolOutcome | BaseException | asyncio.Future[None]
"""What concurrent calls pass to the loop awaiting them: forwarded events, outcomes, the error
that fails a resume or the run (a ``BaseException`` that is no ``Exception`` included: raised where
the calls are awaited), or a future the loop sets once its reader asked for what came after the
events before it (``_Emitter.passed``)."""

_FAILS_RUN = (CheckpointError, MaxTurnsExceeded)
"""A call's errors that fail the calling agent rather than being an error result for its model."""


class _UnknownTool:
    """Answers a call to a tool the agent does not have, so the model can correct itself. It goes
    through the hooks like any tool: the call is traced and callbacks see it."""

    # Its name is whatever the model asked for: a metric must not take it as a tool's name
    # (``adk.tracing``), or each name a model made up would be a series of its own.
    _adk_unknown = True

    def __init__(self, name: str, tools: Mapping[str, Tool]) -> None:
        self._name = name
        # Not a stand-in of the same kind (``_adk_unknown``: a tool action's answer for a name an
        # MCP server that could not be asked may offer), which no tool has.
        known = [key for key, tool in tools.items() if not getattr(tool, "_adk_unknown", False)]
        self._known = ", ".join(sorted(known)) or "none"

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self._name)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return ToolResult.error(f"unknown tool '{self._name}'; available tools: {self._known}")


class _DeniedTool:
    """Answers a resumed call that the resume denies when the agent no longer has its tool
    (removed or renamed since the pause, an MCP server's that cannot be asked): with the denial,
    as the tool would have, without running anything. Through the hooks like any tool."""

    # Its name is the call's, of no tool the agent has (``_UnknownTool``'s reason).
    _adk_unknown = True

    def __init__(self, name: str, denial: ToolResult) -> None:
        self._name = name
        self._denial = denial

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self._name)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return self._denial


class _CutCall:
    """Answers a call whose arguments the model's reply was cut in, at its token limit (Chat's
    ``finish_reason: "length"``, a Responses reply incomplete for ``max_output_tokens``): the
    tool is not run with the part of its arguments that came, and the model and the history
    are told why they are incomplete, where the tool would have said only "invalid JSON
    arguments" and not that raising ``max_tokens`` is the fix. Through the hooks like any tool."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self._name)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return ToolResult.error(
            f"Error: the model's reply was cut at its token limit (finish_reason 'length') "
            f"in the middle of the arguments of its call to tool '{self._name}', which did not "
            "run: they are not whole JSON. Raise the model's max_tokens (ModelOptions.max_tokens) "
            "or make a smaller call."
        )


def cut_calls(
    reply: Message, calls: Sequence[ToolCall], tools: Mapping[str, Tool]
) -> dict[str, Tool] | None:
    """The calls of ``reply`` whose arguments its cut at the token limit left unparseable, by id,
    each answered by a ``_CutCall`` (an ``instead`` of ``execute_tool_calls``); None when the
    reply was not cut, or no call was cut. Whole calls of a cut reply run as any call does, and
    a call to a tool not in ``tools`` is answered as any such call (``_UnknownTool``): whole
    arguments would not make it run, and its name, the model's own, is kept off span names."""
    if reply.metadata.get("finish_reason") != "length":
        return None
    cut: dict[str, Tool] | None = None
    for call in calls:
        if call.name not in tools:
            continue
        try:
            # Empty: cut before any of them came (the adapters give a whole call's as ``{}``).
            json.loads(call.arguments)
        except (ValueError, RecursionError):  # cut deep in nesting: past json's recursion
            cut = cut if cut is not None else {}
            cut[call.id] = _CutCall(call.name)
    return cut


def _describe(exc: BaseException) -> str:
    name = _type_name(exc)
    return f"{name}: {exc}" if str(exc) else name


def _not_async(exc: BaseException) -> str | None:
    """What is wrong when a hand-written tool's ``run`` is a plain ``def``: the framework awaited
    what it returned, and the model read only Python's "object str can't be used in 'await'
    expression", which says nothing of the fix. Told apart by the ``await`` that failed being the
    framework's own (the innermost frame is in ``adk``), not one inside the tool. Asked only once
    a call has failed: nothing is added to a call that runs. Not refused where the tool is given:
    a plain ``def run`` that returns a coroutine (a wrapper handing the call on) is a working
    tool."""
    if not isinstance(exc, TypeError) or "'await' expression" not in str(exc):
        return None
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not str(tb.tb_frame.f_globals.get("__name__", "")).startswith("adk."):
        return None
    return (
        "its run is not a coroutine function: a Tool's run must be an async def (async def "
        f"run(self, arguments, ctx)), or return an awaitable ({_describe(exc)})"
    )


def failed_call(exc: BaseException, name: str, tool_ctx: ToolContext) -> ToolResult:
    """The error result of a call to ``name`` that raised ``exc`` (one the caller found to be the
    call's failure, not the run's), its actions dropped: a failed call's exit or transfer would
    hide the error from the model. ``ToolError`` is the tool's own words."""
    tool_ctx.action = None
    if isinstance(exc, ToolError):
        return ToolResult.error(str(exc) or "tool failed")
    return ToolResult.error(f"tool '{name}' failed: {_not_async(exc) or _describe(exc)}")


def tool_failure(exc: BaseException, name: str, tool_ctx: ToolContext) -> ToolResult | None:
    """For the ``after_tool`` callbacks (``adk.callbacks``), which review every call's result: the
    error result of the tool's raising ``exc``, or None when ``exc`` is not the call's to answer
    (the run's cancellation, its turn limit, a checkpoint that cannot be read), which goes on up
    to ``run_tool_call`` as before."""
    if is_cancellation(exc) or isinstance(exc, (MaxTurnsExceeded, CheckpointError)):
        return None
    return failed_call(exc, name, tool_ctx)


def unique_call_ids(calls: Sequence[ToolCall]) -> None:
    """Give calls of one reply that share an id (servers that number every call "call_0", or
    send none) ids of their own, ``<id>-<place>``: results are matched to calls, and pauses
    addressed, by id. In place, so the reply the history recorded, the results and the next request
    carry the same ids (``_unique_call_ids``, by which the adapter keeps what a server put on a
    call). Used by ``ReActAgent`` and the event-driven tool action alike."""
    ids = [call.id for call in calls]
    for call, call_id, given in zip(calls, _unique_call_ids(ids), ids, strict=True):
        if call_id != given:
            call.id = call_id


def calls_seen(messages: Sequence[Message]) -> dict[str, None]:
    """The tool call ids the assistant messages of ``messages`` hold: those a later reply's calls
    must not take again (``own_call_ids``). A dict used as a set: holding only strings, it is
    not tracked by the garbage collector, as a set is (a run waiting on its model holds it)."""
    seen: dict[str, None] = {}
    for message in messages:
        for call in message.tool_calls:
            seen[call.id] = None
    return seen


def own_call_ids(reply: Message, calls: Sequence[ToolCall], seen: dict[str, None]) -> None:
    """Give a reply's calls whose id an earlier call of the same conversation holds (``seen``)
    ids of their own, ``<id>-<n>`` with the least ``n`` from 1 that no call holds (of the
    conversation, ``seen``, or of the reply: a server's own ``call_0-1`` keeps it), and add every
    call's id to ``seen``. A server that numbers each response's calls from ``call_0`` (and pyadk
    itself for a server sending none) gives the model's next call the id of the call just
    answered: its pause would be the same interrupt point, so an answer sent twice (a double
    click) would decide a call nobody was shown. In place, before the reply's event goes out,
    so its event, the history, a checkpoint, the results and the next request carry the same
    id (a request pairs results to calls by id). The calls of one reply are unique already
    (``unique_call_ids``). Ids unique already are left as they are: a lookup and a store a call."""
    for call in calls:
        given = call.id
        if given in seen:
            taken = {other.id for other in calls}  # a later call of this reply keeps its own
            number = 1
            renamed = f"{given}{_CALL_ID_MARK}{number}"
            while renamed in seen or renamed in taken:
                number += 1
                renamed = f"{given}{_CALL_ID_MARK}{number}"
            call.id = renamed
            _rekey_extras(reply, given, renamed)
            seen[renamed] = None
        else:
            seen[given] = None


def _rekey_extras(reply: Message, given: str, renamed: str) -> None:
    """What a server put on a call to be sent back with it (``OpenAIChatModel``'s
    ``tool_call_extra_content``), kept under the call's new id."""
    from ..models._openai_chat import EXTRA_CONTENT  # only when an id is renamed: rare

    extras = reply.metadata.get(EXTRA_CONTENT)
    if type(extras) is dict and given in extras:
        kept = dict(extras)
        kept[renamed] = kept.pop(given)
        reply.metadata[EXTRA_CONTENT] = kept


async def run_tool_call(
    call: ToolCall,
    tools: Mapping[str, Tool],
    ctx: RunContext,
    emit: _Emitter | None = None,
    tool: Tool | None = None,
) -> ToolOutcome:
    """Run one call (with ``tool`` instead of the one named, when given); never raises except for
    cancellation, ``CheckpointError`` when a resumed call's saved state does not fit, and
    ``MaxTurnsExceeded`` when the run's limit is reached inside the call (an ``AgentTool``'s run).
    ``emit`` is the call's way to the caller, given (by ``execute_tool_calls``) only for a tool
    that shows events while it runs (``_shows_events``): a report from any other is refused
    where it is made, in a round of one call or of several alike."""
    # Read once until the tool runs (a pydantic field read is ~0.4k instructions): only a
    # callback or the tool, which run below, could change the call.
    name, call_id = call.name, call.id
    address = join_address(ctx.address, tool_segment(name, call_id))
    plan = ctx._run.plan
    resumed = False
    edit: object = None
    callback_paused = False
    if plan is not None:
        resume = plan.resume_for(address)
        if resume is not None:
            if not resume.is_target:
                return ToolOutcome(call, signal=plan.subtree(address))
            resumed = True
            callback_paused = plan.callback_at(address) is not None
            edit = adk._approval.edit_at(plan, address, call, resume.data)
    if tool is None:
        tool = tools.get(name) or _UnknownTool(name, tools)
    if resumed and plan is not None and getattr(tool, "_adk_unknown", False):
        # A denied call never runs: its tool gone since the pause (or an MCP server's, down) is
        # no reason to refuse it, and the model gets the denial as from the tool itself.
        denial = adk._approval.denial_at(plan, address, call)
        if denial is not None:
            tool = _DeniedTool(name, denial)
    # The call as it runs: with a person's edited arguments, checked here before it runs (a round
    # of several calls checked them all before any ran, ``check_resumed_calls``).
    ran = call if edit is None else adk._approval.edited_call(tool, call, address, edit)
    hooks = ctx._run.hooks
    if hooks is not None and ran is call and hooks.edits_calls(ctx):
        # The callbacks get a copy, as Google ADK's get a deep copy of the args: a before_tool
        # that edits ``call.arguments`` changes what the tool runs with (and what after_tool and
        # the span see), not the call the model made, which its reply's event, the history and
        # a checkpoint keep. ~2 us per call, only where tool callbacks run for it: tracing
        # alone, which only reads the call, is given the model's.
        ran = ToolCall(id=call_id, name=name, arguments=call.arguments)
    tool_ctx = new_tool_context(ctx, name, call_id, address, emit)
    invoke: _Invoke | None = None
    # A record's run under a timeout: its error names a call cut off (``adk._doing``).
    running = doing.get() if timed else None
    if running is not None:
        mark = running.start("tool {:q} (call {})", name, call_id)
    try:
        if callback_paused or edit is not None:  # resumed calls only: what ran is told apart
            invoke = _Invoke(plan if callback_paused else None, address, tool, ran, tool_ctx)
            output = await (
                invoke() if hooks is None else hooks.call_tool(tool_ctx, ran, invoke, tool)
            )
        elif hooks is None:
            output = await tool.run(ran.arguments, tool_ctx)
        else:
            output = await hooks.call_tool(
                tool_ctx, ran, lambda: tool.run(ran.arguments, tool_ctx), tool
            )
    except Interrupt as exc:
        signal = signal_of(exc, address)
        if edit is not None:  # paused again on its own: its next resume runs the edited call
            signal.save(address, edit, adk._approval.EDITED_SLOT)
        elif ran is not call and ran.arguments != call.arguments:
            # A callback edited the arguments it ran with: what the resume's checks give the
            # tool (``adk._approval.checked_arguments``), the model's call kept as it was.
            signal.save(address, ran.arguments, adk._approval.RAN_SLOT)
        return ToolOutcome(call, signal=signal, action=tool_ctx.action)
    except (Exception, asyncio.CancelledError) as exc:
        if is_cancellation(exc):
            raise
        if resumed and isinstance(exc, CheckpointError):
            # The state this call saved at the pause cannot be read back: the resume fails, it
            # is not the tool's failure for the model to work around.
            raise
        if isinstance(exc, MaxTurnsExceeded):  # the run's limit, reached in an AgentTool's run
            raise
        output = failed_call(exc, call.name, tool_ctx)
    finally:
        if resumed and plan is not None:
            plan.consume(address)
        if running is not None:
            running.end(mark)
    if isinstance(output, ToolResult):
        result: ToolResult | None = output
        content = output.content
    elif isinstance(output, str):
        result, content = None, output
    else:
        # A hand-written tool (or an after_tool callback) that returned a dict or a model: made
        # the tool message, it failed the whole run with pydantic's error for a Message, where
        # every other failure of a call is an error result the model reads.
        result = ToolResult.error(
            f"tool '{call.name}' returned {type(output).__name__}, not a str or a ToolResult "
            "(a Tool's run returns text; FunctionTool turns other values into JSON)"
        )
        content = result.content
        tool_ctx.action = None
    edited = edit is not None and invoke is not None and invoke.reached
    if edited:
        # The conversation keeps the call as the model made it: the result says what ran, as
        # the person edited it. Not when a callback answered instead (a limit refusing the
        # edited amount): nothing ran.
        content = adk._approval.with_note(edit, content)
    name = call.name  # the name the model gave: callbacks edit a copy of the call (above)
    message = tool_message(content, call.id, name)
    if result is not None:
        if result.is_error:
            message.metadata["is_error"] = True
        if result.parts:  # images, sounds, files the tool returned: the model sees them too
            message.parts = result.parts
        if result.structured is not None:  # for code reading the event, not for a model
            message.metadata[STRUCTURED] = result.structured
    if edited:
        message.metadata["edited_arguments"] = edit
    return ToolOutcome(call, message, result, tool_ctx.action, None, name)  # positional: cheaper


class _Emitter:
    """A call's way to the caller (``ToolContext._emit``): ``queue.put_nowait`` for its events,
    safe from the thread a sync function tool runs in (a progress report): there it is handed to
    the loop, which puts it before the call's outcome, as the thread's return reaches the loop
    after it.

    Ended with the call (``ended``, set as the call's task in ``execute_tool_calls`` ends): a
    report made after, by a task the tool started and did not await or by a sync tool's thread
    still running past its timeout, would come after the call's result, or into a queue no one
    reads any more once its round is over; shown, it would mislead whoever shows it. It is dropped, with a warning on the
    ``adk.tools`` logger the first time for the call, rather than raised: the code reporting is
    no longer the call's, and an error in a task or thread no one awaits would reach no one. A
    report a thread handed over before the call ended passes when it reaches the loop first (as
    before a sync function's return, handed over after it); one that reaches the loop after the
    call ended (a timeout or the run's cancellation ended it meanwhile, a tool's own thread
    racing its return) is a late report all the same: dropped, with the same warning."""

    __slots__ = ("_loop", "_put", "call_id", "ended", "tool_name", "warned")

    def __init__(self, queue: asyncio.Queue[_Item], tool_name: str, call_id: str) -> None:
        self._put = queue.put_nowait
        self._loop = asyncio.get_running_loop()
        self.tool_name = tool_name
        self.call_id = call_id
        self.ended = False
        self.warned = False

    def __call__(self, event: AgentEvent) -> None:
        if self.ended:
            self.late(event)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread: no loop of its own
            running = None
        if running is self._loop:
            self._put(event)
        else:
            # The loop may have closed since (a thread outliving its run): no one to tell.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._handed, event)

    async def passed(self) -> None:
        """Wait until the round's reader has taken every event this call emitted so far: asked
        for what comes after them, as a ``ParallelAgent``'s branch waits for each of its events
        to be taken. An ``AgentTool`` forwarding its nested run's events waits here after each
        that carries a stream still arriving, so that the nested run goes on (and reads its
        model's stream past what the reader took) only as the reader does, as the run's own
        agents do. In the loop only; at once for a call that has ended."""
        await self.taken()

    def taken(self) -> asyncio.Future[None]:
        """What ``passed`` awaits, not awaited: a future the round's reader resolves once it has
        taken every event this call emitted so far (done already for a call that has ended). Its
        awaiter may stop waiting for it (set it done) without awaiting: an MCP call's progress,
        coalesced while the reader is behind (``adk.mcp._hooks._Reports``), is let go so as its
        call ends, where the reader of a stopped round never resolves it."""
        waiter: asyncio.Future[None] = self._loop.create_future()
        if self.ended:
            waiter.set_result(None)
        else:
            self._put(waiter)
        return waiter

    def _handed(self, event: AgentEvent) -> None:
        if self.ended:
            self.late(event)
        else:
            self._put(event)

    def late(self, event: AgentEvent) -> None:
        """A report after the call ended: dropped, said once per call. The tool's thread (a
        report it makes late) and the loop (one it handed over, dropped) may both come here at
        once: the look and the mark are one step under ``_LATE``, or both could warn."""
        with _LATE:
            if self.warned:
                return
            self.warned = True
        logger.warning(
            "tool %r reported progress after its call %r had ended: the report is "
            "dropped (a report must come before the tool returns; a task the tool "
            "starts to report must be awaited by it)",
            self.tool_name,
            self.call_id,
        )


_LATE = threading.Lock()
"""Makes ``_Emitter.late``'s look and mark one step. One for every call: taken only by a late
report, rare, so no call pays for a lock of its own."""


class _Invoke:
    """The tool's run for a resumed call that a ``before_tool`` callback paused or a person
    edited, which notes whether the tool was reached: a callback may answer in its place, and
    a result the tool did not give must not say that the edited call ran.

    After a callback's pause (``plan`` given) the callbacks have had their answer and the tool
    has not been reached yet, so it runs as on a first call (its ``ctx.resume`` None: an
    approval asks, the function asks its own questions). Without the point consumed first, the
    tool took the callback's answer for its own, and a ``require_approval`` tool refused the call
    as never approved. (A callback removed since the pause has nothing to answer: the call goes
    on as the current callbacks have it.)"""

    __slots__ = ("address", "call", "ctx", "plan", "reached", "tool")

    def __init__(
        self, plan: _ResumePlan | None, address: str, tool: Tool, call: ToolCall, ctx: ToolContext
    ) -> None:
        self.plan = plan
        self.address = address
        self.tool = tool
        self.call = call
        self.ctx = ctx
        self.reached = False

    def __call__(self) -> Awaitable[str | ToolResult]:
        self.reached = True
        if self.plan is not None:
            self.plan.consume(self.address)
        return self.tool.run(self.call.arguments, self.ctx)


def lone_call(calls: Sequence[ToolCall], tools: Mapping[str, Tool]) -> ToolCall | None:
    """The call of a round of one call whose tool forwards no events (the common case), which
    ``execute_tool_calls`` runs inline, without a task; None for any other round. A caller may
    then await ``run_tool_call`` itself: that is all ``execute_tool_calls`` would do."""
    # The framework's tools answer in one lookup, in one expression (it is per round); a
    # hand-written tool, which has no ``_emits_events``, by its ``reports_progress``.
    if len(calls) == 1 and getattr(tools.get(calls[0].name), "_emits_events", None) is False:
        return calls[0]
    if len(calls) == 1:
        tool = tools.get(calls[0].name)
        if getattr(tool, "_emits_events", None) is None and not _shows_events(tool):
            return calls[0]
    return None


def check_resumed_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    ctx: RunContext,
    instead: Mapping[str, Tool] | None = None,
) -> None:
    """On resume, before a round of several calls starts: raise the ``CheckpointError`` a call
    of it would raise on running (its tool's ``_adk_check_resume``: arguments that no longer fit,
    an approval it never had), or the ``ValueError`` of a person's edit of its arguments that
    does not fit its tool. The calls run concurrently, so one beside it (an approved
    payment) would otherwise have run before the refusal, and run again on the next resume of
    the checkpoint the refusal keeps."""
    plan = ctx._run.plan
    for call in calls:
        tool = (instead.get(call.id) if instead else None) or tools.get(call.name)
        address = join_address(ctx.address, tool_segment(call.name, call.id))
        # A person's edit (refusing the resume if it does not fit), or those the call ran with
        # when a callback had edited them, else the model's.
        arguments = (
            adk._approval.checked_arguments(plan, address, call, tool)
            if plan is not None
            else call.arguments
        )
        check = getattr(tool, "_adk_check_resume", None)
        if check is not None:
            check(arguments, new_tool_context(ctx, call.name, call.id, address, None))


async def execute_tool_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    ctx: RunContext,
    instead: Mapping[str, Tool] | None = None,
    taken: Callable[[ToolOutcome], Awaitable[None]] | None = None,
) -> AsyncGenerator[ToolOutcome | AgentEvent, None]:
    """Run ``calls`` concurrently; yield forwarded events and outcomes as they happen.
    ``instead`` maps call ids to the tool that answers that call in place of the one it names (it
    still goes through the hooks, so the call is traced and callbacks see it). ``taken`` is
    awaited with each outcome as its call ends, in the call's task, before the outcome is passed
    on (a resumed round records it there: the round may be closed before it takes it); what
    it raises fails the round as a call's ``CheckpointError`` does."""
    call = lone_call(calls, tools)
    if call is not None:
        substitute = instead.get(call.id) if instead else None
        outcome = await run_tool_call(call, tools, ctx, tool=substitute)
        if taken is not None:
            await taken(outcome)
        yield outcome
        return
    if ctx._run.plan is not None:
        check_resumed_calls(calls, tools, ctx, instead)
    queue: asyncio.Queue[_Item] = asyncio.Queue()
    round_ = _Round(asyncio.current_task())

    async def one(call: ToolCall) -> None:
        # Every way out of this task puts something on the queue: a task ended without putting
        # its outcome would leave the round waiting for it forever, the loop idle.
        emit = None
        try:
            try:
                substitute = instead.get(call.id) if instead else None
                # Only a tool that shows events while it runs (an ``AgentTool`` forwarding, a
                # tool reporting progress) is given a way out (a lone call, none: ``lone_call``).
                if _shows_events(substitute or tools.get(call.name)):
                    emit = _Emitter(queue, call.name, call.id)
                outcome = await run_tool_call(call, tools, ctx, emit, substitute)
            except _FAILS_RUN as exc:  # fails the resume or run: raised where calls are awaited
                round_.whose[id(exc)] = call.name
                queue.put_nowait(exc)
                return
            except asyncio.CancelledError as exc:
                if not round_.own_cancellation():
                    raise
                # The call's task was cancelled by none of the round (the tool cancelled
                # ``asyncio.current_task()``, or a watchdog it gave the task to): the call's
                # failure, as a CancelledError the tool let out on its own is (``run_tool_call``),
                # not the run's, which nobody cancelled.
                outcome = _cancelled_call(call, exc)
            except Exception as exc:  # a failing hook; the call still needs an answer
                name = call.name
                text = f"Error: tool '{name}' failed: {_describe(exc)}"
                message = Message.tool(text, tool_call_id=call.id, name=name)
                outcome = ToolOutcome(call, message, None, None, None, name)
            finally:
                if emit is not None:  # its result is out: a report now would come after it
                    emit.ended = True
            if taken is not None:
                try:
                    await taken(outcome)
                except Exception as exc:  # whatever it raises goes to the round, and fails it
                    queue.put_nowait(exc)
                    return
        except BaseException as exc:
            # No Exception (a program's own abort, pytest.fail's, KeyboardInterrupt), from the
            # tool or the record: raised where the calls are awaited, as a lone call's would be.
            # Our own cancellation too, harmless: the round has stopped reading the queue.
            round_.whose[id(exc)] = call.name
            queue.put_nowait(exc)
            raise
        queue.put_nowait(outcome)

    tasks = [asyncio.create_task(one(call)) for call in calls]
    remaining = len(tasks)
    try:
        while remaining:
            item = await queue.get()
            if isinstance(item, BaseException):  # _FAILS_RUN, what a ``taken`` hook raised,
                round_.raised = id(item)  # or a BaseException that is no Exception
                raise item
            if isinstance(item, ToolOutcome):
                remaining -= 1
            elif isinstance(item, asyncio.Future):  # the events before it were taken
                if not item.done():
                    item.set_result(None)
                continue
            yield item
    finally:
        round_.stopping = True  # a call's cancellation from now on is the round's own
        for task in tasks:
            # A task that ended with the BaseException the round raised: its outcome read, or
            # the loop reports it again ("Task exception was never retrieved") when collected.
            if task.done() and not task.cancelled():
                task.exception()
        try:
            # Through cancellations of our own (an anyio cancel scope): see ``cancel_and_wait``.
            await cancel_and_wait(tasks)
        finally:
            round_.report_unraised(queue)
            round_.task = None  # an error's traceback holds this frame: no cycle through the task


class _Round:
    """What ``execute_tool_calls``' round of several calls knows of itself, for its call tasks:
    whether it has stopped (it cancels the calls still running then), the id of the error it
    raised, and which call's tool each error put on the queue came from. Only failures and the
    round's end write to it."""

    __slots__ = ("raised", "stopping", "task", "whose")

    def __init__(self, task: asyncio.Task[object] | None) -> None:
        self.task = task  # the task awaiting the calls: the run's
        self.stopping = False
        self.raised = 0
        self.whose: dict[int, str] = {}

    def own_cancellation(self) -> bool:
        """Whether the cancellation of the current call's task (out of its call) is the call's
        own: the round has not stopped, so did not cancel it, and the task awaiting the calls is
        not being cancelled (the loop shutting down cancels every task at once: that is no call's
        failure to record). Its cancellation requests are taken back (``uncancel``) when so:
        the call's task goes on, to pass its outcome and record it (``taken``)."""
        if self.stopping or (self.task is not None and cancelled_beyond(self.task)):
            return False
        task = asyncio.current_task()
        while task is not None and task.cancelling() > 0:
            task.uncancel()
        return True

    def report_unraised(self, queue: asyncio.Queue[_Item]) -> None:
        """Log the errors the round's calls put on the queue that it did not raise: a second
        BaseException (or run-failing error) of one round, or one of a call that ended after the
        round stopped. The round raises one error, its type kept (``except`` clauses of the
        caller still apply; asyncio.TaskGroup raises the first ``KeyboardInterrupt`` or
        ``SystemExit`` alone too); without this the others were lost without a word. Our own
        cancellations of the calls are no news."""
        while not queue.empty():
            item = queue.get_nowait()
            if (
                isinstance(item, BaseException)
                and not isinstance(item, asyncio.CancelledError)
                and id(item) != self.raised
            ):
                logger.error(
                    "tool %r of a round of calls failed with %s, which is not raised: %s",
                    self.whose.get(id(item), "?"),
                    _describe(item),
                    "the round raised the first error its calls ended with"
                    if self.raised
                    else "its round had stopped (its reader left, or it was cancelled)",
                    exc_info=item,
                )
        self.whose.clear()


def _cancelled_call(call: ToolCall, exc: BaseException) -> ToolOutcome:
    """The error outcome of a call whose task was cancelled by none of its round (see
    ``_Round.own_cancellation``): the words a CancelledError the tool let out gets."""
    name = call.name
    result = ToolResult.error(f"tool '{name}' failed: {_describe(exc)}")
    message = tool_message(result.content, call.id, name)
    message.metadata["is_error"] = True
    return ToolOutcome(call, message, result, None, None, name)
