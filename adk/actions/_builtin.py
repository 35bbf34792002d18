"""The built-in actions: chat requests (a model and its tool rounds) and tool requests.

The chat action keeps each conversation that is waiting for tool results in the run
(``_ActionRun.chats``, keyed by the ``ToolRequestEvent`` it sent), so the tool round is an ordinary
event any action can watch, and a pause inside a tool call saves the conversation with the run.
Model and tool calls go through the run's hooks: they are traced and callbacks see them, as in
``ReActAgent``. A model call takes the path ``RunContext.generate``/``stream`` take
(``adk.context.generate_counted``/``stream_counted``): the run's ``max_turns``, its
``"model_options"``, the reply's usage counted once.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import PydanticSerializationError, SchemaSerializer, core_schema

import adk

from .. import _tool_turns
from .._aio import finish
from .._turns_left import count_ahead, spent_text, spent_turns, turns_limit
from .._warned import Warned
from ..checkpoint._state import SavedState
from ..checkpoint.codec import STRUCTURED, CheckpointError, _json_value_at
from ..context import generate_counted, run_model_options, stream_counted
from ..events import AgentEvent, AgentOutput
from ..interrupts import Interrupt, _InterruptSignal, join_address, tool_segment
from ..messages import _TOOL, Message, ToolCall
from ..models import _call
from ..models.base import ModelOptions
from ..tools._executor import (
    ToolOutcome,
    calls_seen,
    execute_tool_calls,
    lone_call,
    own_call_ids,
    run_tool_call,
    unique_call_ids,
)
from ..tools.base import Tool, ToolContext, ToolResult, ToolSpec
from .events import (
    ChatRequestEvent,
    Event,
    ToolRequestEvent,
    ToolResponseEvent,
    _chat_response_event,
    _tool_request_event,
    _tool_response_event,
)

if TYPE_CHECKING:
    from .._preflight import Preflight
    from ..context import RunContext
    from ._run import _ActionRun
    from .context import ActionContext

__all__ = [
    "ActionError",
    "chat_action",
    "chat_streamed",
    "check_turns_left",
    "preflight_tool_action",
    "tool_action",
]


class ActionError(Exception):
    """An action failed, or the events of an input cannot be processed as sent.

    One raised from what an action raised (``__cause__``) names its type in its error's
    ``cause`` (``ErrorInfo.of``): a failed record's ``KeyedOutput.error`` says ``ActionError``
    and what went wrong, ``ValueError``."""

    _names_cause = True


def check_chat_request(action: str, agent: str, verb: str, request: ChatRequestEvent) -> None:
    """Refuse ``request`` when a model API would refuse its messages for their tool turns
    (``_tool_turns.refusal``), naming the action that ``verb`` (sends, takes) it, its agent and
    the event: the model call failed with the provider's 400, late (after its input's other
    work, as a model error of that record). ``send_event`` checks a ``ChatRequestEvent`` as it
    is sent, the built-in chat a subclass of it as it takes one. None to look at in most
    requests: no call, no tool message."""
    messages = request.messages
    for message in messages:
        if message.tool_calls or message.role == _TOOL:
            break
    else:
        return
    where = (
        f"action {action!r} of agent {agent!r} {verb} {type(request).__name__} {request.id!r} "
        f"(model {request.model!r}) whose"
    )
    refused = _tool_turns.refusal(messages, where, _tool_turns.CHAT_ADVICE)
    if refused is not None:  # an ActionError, as the other refusals of a send: not retried
        raise ActionError(refused)


@dataclass(slots=True)
class _Chat:
    """A conversation waiting for the results of the tool calls its model made."""

    request: ChatRequestEvent
    messages: list[Message]
    rounds: int


async def chat_action(event: Event, ctx: ActionContext) -> None:
    """Ask the model of a ``ChatRequestEvent``, or carry on a chat whose tool results arrived."""
    chat = _chat_of(ctx, event)
    if chat is None:
        return
    request, messages, rounds = chat
    run_ctx, model, specs, options = await _call_parts(ctx, request, rounds)
    reply = await generate_counted(run_ctx, model, messages, specs, options)
    _answer(ctx, request, messages, rounds, reply)


async def chat_streamed(event: Event, ctx: ActionContext) -> AsyncGenerator[AgentEvent, None]:
    """``chat_action`` in a streaming run (``Runner(enable_streaming=True)``): each model call
    is streamed, and shown to the caller as it arrives, as ``ReActAgent`` shows its replies
    (``AgentEvent.streaming``). Only shown (``AgentOutput.shown_only``, which callers and a
    relay's ``from_dict`` read too): the reply is not recorded in history nor an output of the
    agent, and goes on as without streaming (a ``ToolRequestEvent`` or a
    ``ChatResponseEvent``), so a streaming run records, saves and sends what one without does.
    A generator of its own, which ``_ActionRun.process`` iterates in a streaming run only: a
    run that does not stream calls ``chat_action`` as before."""
    chat = _chat_of(ctx, event)
    if chat is None:
        return
    request, messages, rounds = chat
    run_ctx, model, specs, options = await _call_parts(ctx, request, rounds)
    stream = stream_counted(run_ctx, model, messages, specs, options)
    shown = AgentEvent(output=AgentOutput(stream=stream, shown_only=True))
    # The calls get ids of their own as the chunks are joined, by whoever joins them first (as
    # ``ReActAgent``'s): a service encoding the shown event as soon as its stream ends, before
    # this action goes on, sends the ids the calls pause under.
    stream._on_join = functools.partial(_own_reply_ids, ctx._run, messages, not rounds)
    try:
        yield shown
        reply = await stream.collect()
    finally:
        # failed, closed or joined: the event's stream must not keep the run
        unjoined, stream._on_join = stream._on_join, None
        # A run closed or cancelled while this action reads the reply itself, once the caller
        # has taken the event (the driver lets a shown stream go then, ``record_stream``, and a
        # cancelled reader does not stop a stream's source): stop the model's stream, or its
        # connection stays open until collected. (At the event the driver closes it too.)
        if not stream.done:
            await stream.aclose()
    _answer(ctx, request, messages, rounds, reply, owned=unjoined is None)


def _chat_of(
    ctx: ActionContext, event: Event
) -> tuple[ChatRequestEvent, list[Message], int] | None:
    """The request, conversation and rounds so far of the chat ``event`` asks or carries on;
    None for a tool response to a tool request an action sent itself (that action's to take)."""
    if isinstance(event, ChatRequestEvent):
        if type(event) is not ChatRequestEvent:  # a subclass: send_event checks the class only
            check_chat_request(ctx.action_name, ctx._run.agent.name, "takes", event)
        return event, list(event.messages), 0
    if not isinstance(event, ToolResponseEvent):  # pragma: no cover - the plan routes only these
        raise ActionError(f"the chat action does not take {type(event).__name__}")
    run = ctx._run
    chat = run.chats.pop(event.request_id, None)
    if chat is None:
        if not run.plan._user_listens_tool_responses:
            raise ActionError(
                f"a ToolResponseEvent answers request {event.request_id!r}, which no chat made, "
                "and no action listens for ToolResponseEvent"
            )
        return None
    return chat.request, [*chat.messages, *event.responses], chat.rounds


def _options(ctx: RunContext, request: ChatRequestEvent, rounds: int) -> ModelOptions | None:
    """The options of a chat's model call: the request's, with the run's ``"model_options"``
    merged over them (``run_model_options``), as a ``ReActAgent`` takes them, and after a tool
    round a ``tool_choice`` that forces a tool dropped, as a ``ReActAgent`` drops it (its
    ``reset_tool_choice``): forced on every round, the model could only call tools and the chat
    failed at ``max_tool_rounds``."""
    options = run_model_options(ctx, request.options)
    return _call.free_tool_choice(options) if rounds else options


async def _call_parts(
    ctx: ActionContext, request: ChatRequestEvent, rounds: int
) -> tuple[RunContext, Any, list[ToolSpec], ModelOptions | None]:
    """What a chat's next model call is made with, streamed or not: the run context it is made
    in, the request's model and its tools' specs (looked up per round), and its options."""
    run = ctx._run  # its lookup directly, per chat round: no wrapper to make (see _Lookup)
    model = await run.get_resource(request.model, "model")
    if request.id in run.restored_requests:
        tools = await _offered_now(run, request)
    else:
        tools = [await run.get_resource(name, "tool") for name in request.tools]
    run_ctx = ctx.run_context
    return run_ctx, model, [tool.spec for tool in tools], _options(run_ctx, request, rounds)


async def _offered_now(run: _ActionRun, request: ChatRequestEvent) -> list[Tool]:
    """The tools a chat a resume restored offers its model: those of its request that are
    still there. The request was made by the code of the pause, and a tool it offers may be
    gone since (removed or renamed in a deploy, its paused call denied or replayed from its
    record): the model is asked without it, as a ``ReActAgent`` resumed is asked with the tools
    it has now, rather than the chat failing after its paused round (its calls made, the
    checkpoint kept). A tool a server that could not be asked may offer still fails the chat,
    as a server down fails a ``ReActAgent``'s toolset."""
    tools: list[Tool] = []
    for name in request.tools:
        try:
            tools.append(await run.get_resource(name, "tool"))
        except KeyError as exc:
            if getattr(exc, "unasked", ()):
                raise
            logging.getLogger("adk.actions").warning(
                "agent %r: the chat %r a resume restored offers tool %r, which is gone since "
                "the pause (%s); its model is asked without it",
                run.agent.name,
                request.id,
                name,
                exc.args[0] if exc.args else "not found",
            )
    return tools


def _answer(
    ctx: ActionContext,
    request: ChatRequestEvent,
    messages: list[Message],
    rounds: int,
    reply: Message,
    owned: bool = False,
) -> None:
    """Send what the model's ``reply`` asks for: its tool calls as a ``ToolRequestEvent`` (the
    chat kept for their results), else the ``ChatResponseEvent``. Its usage is counted already:
    by ``generate_counted`` as it came, by the stream as it ended. ``owned``: its calls have
    ids of their own already (``_own_reply_ids``, run as a streamed reply was joined)."""
    calls = reply.tool_calls
    if not calls:
        if rounds and ctx._run.call_ids is None:  # a chat a resume restored ends: its ids kept
            _run_call_ids(ctx._run, messages)
        ctx.send_event(_chat_response_event(request.id, reply))
        return
    if not owned:
        _own_reply_ids(ctx._run, messages, not rounds, reply, calls)
    if rounds >= request.max_tool_rounds:
        raise ActionError(
            f"model {request.model!r} still calls tools after {rounds} round(s) "
            f"(max_tool_rounds={request.max_tool_rounds})"
        )
    tool_request = _tool_request_event(reply.tool_calls, list(request.tools), request.model)
    ctx._run.chats[tool_request.id] = _Chat(request, [*messages, reply], rounds + 1)
    ctx.send_event(tool_request)


def _own_reply_ids(
    run: _ActionRun,
    messages: list[Message],
    first: bool,
    reply: Message,
    calls: list[ToolCall] | None = None,
) -> None:
    """Give ``reply``'s calls ids of their own, before any action sees them: the ids the
    history keeps. A call under an id an earlier call of the run's chats holds (a server
    numbering each response's calls ``call_0``; a later round, or another chat: they pause at
    one address) gets one of its own: else its pause would be the earlier call's point, and an
    answer sent twice would decide it (``own_call_ids``). A chat's ``first`` round adds its
    request's own messages: a chat asked again with an earlier chat's calls in its history.
    ``calls``: the reply's, if read already (a pydantic field read is not free)."""
    if calls is None:
        calls = reply.tool_calls
    if not calls:
        return
    if len(calls) > 1:
        unique_call_ids(calls)
    seen = _run_call_ids(run, messages)
    if first:
        seen.update(calls_seen(messages))
    own_call_ids(reply, calls, seen)


def _run_call_ids(run: _ActionRun, messages: list[Message]) -> dict[str, None]:
    """The ids of the calls the run's chats made (``_ActionRun.call_ids``), read at the first
    call (after a resume: from the chats it restored, ``messages`` the one answered now)."""
    seen = run.call_ids
    if seen is None:
        seen = run.call_ids = calls_seen(messages)
        for chat in run.chats.values():
            seen.update(calls_seen(chat.messages))
    return seen


async def tool_action(event: Event, ctx: ActionContext) -> AsyncGenerator[AgentEvent, None] | None:
    """Run a ``ToolRequestEvent``'s calls concurrently and answer with one ``ToolResponseEvent``.

    Calls that share an id are given ids of their own first (``<id>-<place>``, in place). A call to a tool the request does not allow, or that no resource provides, is answered with an
    error message the model can read. A call that interrupts pauses the run; on resume only the
    calls still open run again (the finished ones' answers are saved with the pause).

    A round whose calls may show events while they run (a tool reporting progress, an
    ``AgentTool`` showing its inner events, or several calls) is returned unrun, as an async
    generator of those events, which ``_ActionRun.process`` iterates, yielding each to the caller
    of the run as a ``ReActAgent`` does; it answers as it ends. A lone call of any other tool,
    nearly every round, is awaited here and None returned: it shows nothing, and a generator
    would cost it more than the rest of the round (as ``ReActAgent`` awaits such a call).
    """
    if not isinstance(event, ToolRequestEvent):  # pragma: no cover - the plan routes only these
        raise ActionError(f"the tool action does not take {type(event).__name__}")
    calls = event.tool_calls
    # Answers by the call's place in the request, not its id: a model may give two calls one id
    # (or none), and each still gets its own answer, as in ``ReActAgent``. A request an action
    # made itself may share ids too: its calls get ids of their own (in place, so the response
    # answers the request's calls), else two pausing calls would be one interrupt point. Not on
    # resume: the saved request already has them, or was saved before ids were made unique and
    # its pauses are addressed by the ids it holds.
    done: dict[int, Message] = {}
    structured: dict[int, Any] = {}
    saved = None
    if ctx.resume is None:
        if len(calls) > 1:
            unique_call_ids(calls)
    else:
        saved = SavedState(f"action '{ctx.action_name}'", ctx.resume.state)
        done = _saved_answers(saved, calls)
        structured = _saved_structured(saved, done)
    allowed = None if event.tools is None else set(event.tools)
    tools: dict[str, Tool] = {}
    unfound: dict[str, Tool] | None = None
    calls_ctx = ctx._run.action_context(ctx.action_name)
    # Calls this resume denies never run: a tool only they name is not looked up (a server that
    # is down is not asked), and the executor answers them with the denial.
    skipped: set[str] = set()
    if saved is not None:
        denied = adk._approval.denied_calls(calls_ctx._run.plan, calls_ctx.address, calls)
        for name in {name for name, _ in denied}:
            if all(
                (name, c.id) in denied
                for p, c in enumerate(calls)
                if c.name == name and p not in done
            ):
                skipped.add(name)
    for call in calls:
        if call.name in tools or (allowed is not None and call.name not in allowed):
            continue
        if call.name in skipped:  # one registered in code still answers (its callbacks, spans)
            if (registered := ctx._run.registered_tool(call.name)) is not None:
                tools[call.name] = registered
            continue
        try:
            tools[call.name] = await ctx._run.get_resource(call.name, "tool")
        except KeyError as exc:  # not found: answered as an unknown tool, naming the known ones
            if getattr(exc, "unasked", ()):  # ... unless a server that may offer it failed
                unfound = unfound or {}
                unfound[call.name] = _Unfound(call.name, str(exc.args[0]))
    if saved is not None:
        _check_tools_kept(
            saved, calls, done, allowed, tools.__contains__, unfound, calls_ctx, skipped
        )
    if unfound:
        tools.update(unfound)
    if event.tools is not None and any(
        call.name not in tools and call.name not in skipped for call in calls
    ):
        await _offered(ctx, event.tools, tools)
    tally = _Round(event, ctx, done, structured)
    open_calls = tally.open_calls()
    if saved is not None:
        tally.resumed(calls_ctx)
    lone = lone_call(open_calls, tools)
    if lone is not None:
        outcome = await run_tool_call(lone, tools, calls_ctx)
        if tally.recording is not None:
            await tally.record(outcome)
        tally.take(outcome)
        tally.answer()
        return None
    return tally.run(open_calls, tools, calls_ctx)


async def _offered(ctx: ActionContext, names: Sequence[str], tools: dict[str, Tool]) -> None:
    """Add to ``tools`` the other tools a request offers (``names``) that a lookup finds, for the
    answer to a call of a tool it does not offer to list them: it listed only those this round's
    calls had found ('available tools: none' to a model whose request offered two). Only when a
    call names no tool; lookups are kept for the run, as a chat's of the same tools are."""
    for name in names:
        if name not in tools:
            # KeyError: none has it, or a server that may could not be asked
            with contextlib.suppress(KeyError):
                tools[name] = await ctx._run.get_resource(name, "tool")


class _Unfound:
    """Answers a call to a tool that an MCP server which could not be asked (it did not start,
    or is down) may offer, in the lookup's words: the server and why it failed, which "unknown
    tool" would leave out, as if the server did not offer it. A result like any failed call's
    (``is_error``), so the record or the model reads it; a paused call's tool is not answered so
    (``_check_tools_kept`` refuses the resume: the approval is kept for when it is back)."""

    # Its name is whatever the call asked for, as ``_UnknownTool``'s: the tool duration metric
    # takes it as no tool's (``adk.tracing``), or each name made up would be a series of its own.
    _adk_unknown = True

    def __init__(self, name: str, reason: str) -> None:
        self._name = name
        self._reason = reason

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=self._name)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return ToolResult.error(f"tool '{self._name}' could not be found: {self._reason}")


class _Recording:
    """What a resumed round has recorded in the checkpoint it resumes (``_Round.record``): the
    answers the pause saved and those of the calls finished since, in the state's own form
    (``done``, ``places`` and ``structured``, as ``_Round.answer`` saves them, by place), the
    lists themselves in ``state``, which ``_Progress.record`` reads when its write happens;
    ``settles`` the addresses of the calls recorded."""

    __slots__ = ("answers", "ctx", "places", "progress", "settles", "state", "values")

    def __init__(
        self, ctx: RunContext, progress: Any, done: dict[int, Message], structured: dict[int, Any]
    ) -> None:
        self.ctx = ctx
        self.progress = progress
        self.places = sorted(done)
        self.answers = [done[place] for place in self.places]
        self.values = [structured.get(place) for place in self.places]
        self.state: dict[str, Any] = {"done": self.answers, "places": self.places}
        if any(value is not None for value in self.values):
            # only then, as a pause saves it (``_Round.answer``)
            self.state["structured"] = self.values
        self.settles: list[str] = []


class _Round:
    """One tool round of the tool action: its answers by place as they come, its pause, and
    its end (the response sent, or the pause raised). A resumed round records each call it
    finishes in the checkpoint it resumes (``recording``, see ``record``)."""

    __slots__ = ("ctx", "done", "event", "open_places", "recording", "signal", "structured")

    def __init__(
        self,
        event: ToolRequestEvent,
        ctx: ActionContext,
        done: dict[int, Message],
        structured: dict[int, Any],
    ):
        self.event = event
        self.ctx = ctx
        self.done = done
        self.structured = structured  # by place: what a tool gave beside its text, if anything
        self.open_places: dict[int, list[int]] = {}  # each open call object's places, in order
        self.signal: _InterruptSignal | None = None
        self.recording: _Recording | None = None

    def resumed(self, ctx: RunContext) -> None:
        """On resume, once ``open_calls`` are known (``ctx``: where the calls run): the calls an
        earlier resume of this checkpoint finished and recorded (among ``done``) count as
        answered (``_ResumePlan.settle``: the answers go nowhere, they do not run again), as a
        ``ReActAgent``'s recorded calls do; and when the runner can record in the checkpoint
        (``_Progress.can_record``), each call the round finishes is recorded (``record``)."""
        plan = ctx._run.plan
        if plan is None:
            return
        for address in _recorded_at(ctx.address, self.event.tool_calls, self.done):
            plan.settle(address)
        progress = plan.progress
        if progress is not None and progress.can_record(ctx):
            self.recording = _Recording(ctx, progress, self.done, self.structured)

    async def record(self, outcome: ToolOutcome) -> None:
        """Record a resumed call's answer in the checkpoint being resumed, among the answers
        its pause saved, in the call's task as it ends (``execute_tool_calls``' ``taken``),
        before anything else runs (the response, the chat's next model call): a later resume
        of the checkpoint (this one failed, or its reader left, or its process died) takes it
        as a saved answer and does not run the call again, as a ``ReActAgent``'s resumed round
        records its calls (``prebuilt.react``'s ``_record``). The write goes to its end even if
        the run is cancelled meanwhile: the call ran. One that cannot be written is an
        ``adk.checkpoint`` warning (``_Progress.record``), and the round records nothing more.
        A call that paused again is not recorded. The lists are passed whole, read when the
        write happens: calls that ended together are written by the first write."""
        recording = self.recording
        if outcome.signal is not None or recording is None:
            return
        message = outcome.message
        assert message is not None
        message.metadata.pop(STRUCTURED, None)  # recorded once, in "structured" (``take``)
        call = outcome.call
        places = recording.places
        # ``take`` gives the call object's first place left; the same here, before it
        place = next(p for p in self.open_places[id(call)] if p not in places)
        at = bisect.bisect(places, place)
        places.insert(at, place)
        recording.answers.insert(at, message)
        result = outcome.result
        value = None
        if result is not None and result.structured is not None:
            value = _carried(result.structured, call.name, _IN_STATE)
        recording.values.insert(at, value)
        if value is not None:
            recording.state["structured"] = recording.values
        ctx = recording.ctx
        recording.settles.append(join_address(ctx.address, tool_segment(call.name, call.id)))
        what = (
            f"the result of agent {self.ctx._run.agent.name!r}'s action "
            f"{self.ctx.action_name!r}'s resumed call {call.name!r} ({call.id})"
        )
        written = recording.progress.record(ctx, recording.state, what, recording.settles)
        if not await finish(written):
            self.recording = None

    def open_calls(self) -> list[ToolCall]:
        """The calls still to run (all, unless a resume saved some answers), in request order."""
        open_calls: list[ToolCall] = []
        done, places = self.done, self.open_places
        for place, call in enumerate(self.event.tool_calls):
            if place not in done:
                places.setdefault(id(call), []).append(place)
                open_calls.append(call)
        return open_calls

    def take(self, outcome: ToolOutcome) -> None:
        place = self.open_places[id(outcome.call)].pop(0)
        if outcome.signal is not None:
            signal = self.signal = self.signal or _InterruptSignal()
            signal.merge(outcome.signal)
        elif outcome.message is not None:
            self.done[place] = outcome.message
            result = outcome.result
            if result is not None and result.structured is not None:
                # As the tool gave it: looked at only if a pause saves it (``answer``, ``saved_structured``)
                self.structured[place] = result.structured
                # Carried once, on the event (``ToolResponseEvent.structured``), not on its
                # response too (a ``ReActAgent``'s tool message's place for it): saved with the
                # event's fields as JSON, a value it cannot hold there refused the pause.
                outcome.message.metadata.pop(STRUCTURED, None)

    def answer(self) -> None:
        """Send the round's response, or pause with the answers so far saved."""
        done, structured = self.done, self.structured
        if self.signal is not None:
            places = sorted(done)
            state: dict[str, Any] = {"done": [done[place] for place in places], "places": places}
            calls = self.event.tool_calls
            saved = [
                _carried(structured[p], calls[p].name, _IN_STATE) if p in structured else None
                for p in places
            ]
            if any(value is not None for value in saved):
                # only then: a checkpoint without it loads in a pyadk from before it
                state["structured"] = saved
            raise Interrupt._from_signal(self.signal, state)
        count = len(self.event.tool_calls)
        values = None
        if structured:
            values = [structured.get(place) for place in range(count)]
        response = _tool_response_event(
            self.event.id, [done[place] for place in range(count)], values
        )
        self.ctx.send_event(response)

    async def run(
        self, calls: list[ToolCall], tools: dict[str, Tool], ctx: RunContext
    ) -> AsyncGenerator[AgentEvent, None]:
        """The round's calls, concurrently: what they show as it comes, then the answer. Shown
        once it happens, an event is not taken back: a call that runs again on resume (one
        still open at a pause) shows what it shows again, as in a ``ReActAgent``."""
        taken = None if self.recording is None else self.record
        async with aclosing(execute_tool_calls(calls, tools, ctx, None, taken)) as outcomes:
            async for item in outcomes:
                if isinstance(item, AgentEvent):  # a report, an AgentTool's inner event
                    yield item
                else:
                    self.take(item)
        self.answer()


def preflight_tool_action(
    run: _ActionRun, event: ToolRequestEvent, action_name: str, walk: Preflight
) -> None:
    """The resume's check before anything runs (``adk._preflight``) of the calls the paused tool
    action runs again on ``event``, as ``ReActAgent`` checks its open round: the answers it
    saved, the paused points below it (each must lie under a call still open), and each open
    call as ``Preflight.call`` checks it (a person's edit of its arguments, the tool's own check,
    the nested agents of an ``AgentTool``). Checked only once the action ran them again, a call
    that did not fit failed the resume after a parallel branch had made its approved call, and
    the kept checkpoint's next resume made it again.

    Like ``ReActAgent``'s, the walk asks no server: a tool registered in code is found as the
    action finds it (``_ActionRun.registered_tool``); one an MCP server (or a registry of your
    own) provides is looked up after the walk only for a call whose approval edits it
    (``Preflight.defer``), the one check of such a tool the walk would otherwise miss."""
    ctx = run.action_context(action_name)
    resume = ctx.resume
    if resume is None or not resume.is_target:  # not resumed: it does not run again
        return
    calls = event.tool_calls
    saved = SavedState(f"action '{action_name}'", resume.state)
    done = _saved_answers(saved, calls)
    _saved_structured(saved, done)  # refused here, before anything runs, if malformed
    open_calls = [
        (call, join_address(ctx.address, tool_segment(call.name, call.id)))
        for place, call in enumerate(calls)
        if place not in done
    ]
    # The calls an earlier resume recorded are answered from the record (``_Round.resumed``).
    entered = [address for _, address in open_calls]
    entered += _recorded_at(ctx.address, calls, done)
    why = f"agent {run.agent.name!r}'s action {action_name!r} resumes only its open tool calls"
    walk.only_under(ctx.address, entered, why)
    allowed = None if event.tools is None else set(event.tools)
    if not run.may_ask_for_tools():  # every tool it can have is registered: none unseen
        _check_tools_kept(
            saved,
            calls,
            done,
            allowed,
            lambda name: run.registered_tool(name) is not None,
            None,
            ctx,
        )
    for call, address in open_calls:
        if not walk.holds(address) or (allowed is not None and call.name not in allowed):
            continue  # nothing paused there, or a tool the action answers as unknown
        tool = run.registered_tool(call.name)
        if tool is not None:
            walk.call(tool, call, ctx, address)
        elif walk.edits(call, address):
            walk.defer(functools.partial(_check_later, run, walk, call, ctx, address))


def check_turns_left(
    run: _ActionRun, saved: SavedState, current: Event, listener: int, queue: Sequence[Event]
) -> None:
    """Refuse a resume whose run has no model call left (its ``max_turns`` spent before the
    pause, or a resume's lower one) when the built-in chat is certain to call the model after
    the paused action (``chat_asks_after``). Run, the paused action would make its calls (an
    approved refund), the chat then fail on the limit with the checkpoint kept, and a retry
    with a higher limit make them again: refused before anything runs, as ``ReActAgent``
    refuses such a round (its ``_check_round_fits``). Not when the resume leaves one of its
    points waiting: the action pauses again. What an action of one's own sends when it runs
    again cannot be known here; it fails as it asks."""
    turns = spent_turns(run.ctx)
    if (
        turns is not None
        and not _pauses_again(run)
        and chat_asks_after(run, current, listener, queue)
    ):
        raise saved.turns_short(f"{spent_text(turns)}: {_CHAT_ASKS}", turns.limit)


def _pauses_again(run: _ActionRun) -> bool:
    """Whether the resume leaves one of the agent's points waiting (it answers some only): the
    paused action pauses again there once the answered calls ran, and the chat asks no model
    in this resume (``_ResumePlan.leaves_waiting``)."""
    plan = run.ctx._run.plan
    return plan is not None and plan.leaves_waiting(run.ctx.address)


_CHAT_ASKS = (
    "its chat asks the model after the paused action, a model call the limit does not allow; "
    "resume with a higher max_turns (it counts the calls before the pause)"
)


def count_chat_after(
    run: _ActionRun,
    saved: SavedState,
    current: Event,
    listener: int,
    queue: Sequence[Event],
    walk: Preflight,
) -> None:
    """Count, for the resume's check (``adk._turns_left``), the model call the built-in chat is
    certain to make after the paused action (``chat_asks_after``), and refuse the resume when
    the run has no call left for it (the one left going to a nested run's or a parallel
    branch's results): the case ``check_turns_left`` cannot see, which counts nothing."""
    if _pauses_again(run) or not chat_asks_after(run, current, listener, queue):
        return
    refused = count_ahead(walk, run.ctx, f"agent {run.agent.name!r} (its chat)")
    if refused is not None:
        raise saved.turns_short(f"{refused}: {_CHAT_ASKS}", turns_limit(run.ctx))


def chat_asks_after(run: _ActionRun, current: Event, listener: int, queue: Sequence[Event]) -> bool:
    """Whether the built-in chat is certain to call the model after the paused action: the
    chat waiting for the paused tool round's results, or one the remaining listeners of the
    paused event or the saved queue start or carry on."""
    listeners = run.plan.listeners(type(current))
    paused = listeners[listener]
    later = [found.call for found in listeners[listener + 1 :]]
    if (paused.call is tool_action and _chat_takes_response(run, current)) or (
        chat_action in later and _chat_asks(run, current)
    ):
        return True
    return any(_chat_asks(run, event) for event in queue)


def _chat_asks(run: _ActionRun, event: Event) -> bool:
    """Whether the built-in chat, if the agent has it, asks its model on ``event`` (a request,
    or the tool results of a chat it started), or on the response of a chat's tool round."""
    if isinstance(event, ChatRequestEvent | ToolResponseEvent):
        return any(found.call is chat_action for found in run.plan.listeners(type(event))) and (
            isinstance(event, ChatRequestEvent) or event.request_id in run.chats
        )
    return _chat_takes_response(run, event) and any(
        found.call is tool_action for found in run.plan.listeners(type(event))
    )


def _chat_takes_response(run: _ActionRun, event: Event) -> bool:
    """Whether ``event`` is a chat's tool round whose response the built-in chat takes."""
    return (
        isinstance(event, ToolRequestEvent)
        and event.id in run.chats
        and any(found.call is chat_action for found in run.plan.listeners(ToolResponseEvent))
    )


def _check_tools_kept(
    saved: SavedState,
    calls: Sequence[ToolCall],
    done: dict[int, Message],
    allowed: set[str] | None,
    found: Callable[[str], bool],
    unfound: Mapping[str, Tool] | None = None,
    calls_ctx: RunContext | None = None,
    skipped: set[str] | None = None,
) -> None:
    """Refuse a resume whose paused calls name a tool the agent no longer has (removed or
    renamed since the pause), as ``ReActAgent``'s resume does. Answered as an unknown tool, the
    call's approval was spent on nothing, and a chat's next round then failed on the missing tool
    with the checkpoint kept, after a parallel branch had made its approved call, which the next
    resume made again. A call the request does not allow is answered as unknown either way. A
    call the resume denies (``adk._approval.denied_calls``, found below ``calls_ctx``'s address)
    needs no tool: it never runs, and the executor answers it with the denial.

    ``unfound`` holds the names an MCP server that could not be asked may offer (``_Unfound``):
    the refusal adds the lookup's words for them, the server and why, since a server down (not
    ``optional``) is the likely cause, not a deploy that removed the tool. ``skipped``: names
    only denied calls name, not looked up."""
    missing = [
        call
        for place, call in enumerate(calls)
        if place not in done
        and (allowed is None or call.name in allowed)
        and not (skipped and call.name in skipped)
        and not found(call.name)
    ]
    if not missing:
        return
    plan = calls_ctx._run.plan if calls_ctx is not None else None
    if calls_ctx is not None:
        denied = adk._approval.denied_calls(plan, calls_ctx.address, missing)
        missing = [call for call in missing if (call.name, call.id) not in denied]
    if missing:
        names = sorted({call.name for call in missing})
        why = "".join(
            f"; {name}: {tool._reason}"
            for name in names
            if isinstance(tool := (unfound or {}).get(name), _Unfound)
        )
        hint = (
            adk._approval.deny_hint(plan, calls_ctx.address, missing)
            if calls_ctx is not None
            else ""
        )
        raise saved.error(
            f"the paused calls need tools it no longer has: {', '.join(names)} (removed or "
            "renamed since the pause, or a toolset's not offered now, as an optional MCP "
            "server's while it cannot be used, or a server's that could not be asked: the "
            f"checkpoint is kept, to resume once they are back){why}{hint}"
        )


async def _check_later(
    run: _ActionRun, walk: Preflight, call: ToolCall, ctx: RunContext, address: str
) -> None:
    """``walk.call`` for an open call whose tool is found only by asking a server, found as the
    action finds it. A lookup that fails is left to the action, which fails on it (or answers
    the call as an unknown tool) before its calls run."""
    try:
        tool = await run.get_resource(call.name, "tool")
    except Exception:
        return
    walk.call(tool, call, ctx, address)


def _recorded_at(address: str, calls: Sequence[ToolCall], done: dict[int, Message]) -> list[str]:
    """The addresses (below the action's ``address``) of the answered calls (``done``) that an
    earlier resume may have recorded (``_Round.record``): those of every answered call but one
    that an open call shares (a checkpoint saved before a request's calls got ids of their own:
    its point is the open call's). An answer the pause saved has no point at its address, so
    ``_ResumePlan.settle`` finds nothing there."""
    if not done:
        return []
    open_at = {
        join_address(address, tool_segment(call.name, call.id))
        for place, call in enumerate(calls)
        if place not in done
    }
    found: list[str] = []
    for place in sorted(done):
        call = calls[place]
        at = join_address(address, tool_segment(call.name, call.id))
        if at not in open_at and at not in found:
            found.append(at)
    return found


def _saved_answers(saved: SavedState, calls: Sequence[ToolCall]) -> dict[int, Message]:
    """The answers saved at a pause, by the place of the call each answers.

    The places are saved with the answers, since ids alone cannot tell apart calls a model gave
    one id. Checkpoints written before places were saved hold answers in request order: each goes
    to the first call not yet answered with its id and tool name.
    """
    answers = saved.messages("done")
    if "places" not in saved.values:
        return _placed(calls, answers)
    places = saved.counts("places", below=len(calls))
    if len(places) != len(answers) or len(set(places)) != len(places):
        raise saved.error("'places' must name one distinct call for each answer in 'done'")
    return dict(zip(places, answers, strict=True))


def _saved_structured(saved: SavedState, done: dict[int, Message]) -> dict[int, Any]:
    """The structured outputs saved at a pause beside the answers (``_Round.answer``), by place:
    a list with one value per saved answer, in the order of ``places``; none in a checkpoint
    written before they were saved, or where no finished call gave one."""
    if "structured" not in saved.values:
        return {}
    values = saved.values["structured"]
    if not isinstance(values, list) or len(values) != len(done):
        raise saved.error("'structured' must hold one value for each answer in 'done'")
    return {
        place: value for place, value in zip(sorted(done), values, strict=True) if value is not None
    }


_warned_unsaved = Warned()
"""The tools ``_carried`` warned about, the last 256 of them (see ``adk._warned``)."""


_IN_STATE = 4
"""How deep a saved round's structured value lies in the body's ``states`` (address, slot, the
state's ``structured`` list, its place), which a resume reads whole: ``_carried`` counts its
nesting from there, as the pause's save does (``checkpoint._snapshot._STATE_DEPTH`` + 2, not
imported: ``import adk.actions`` loads no snapshot code; tests/test_action_records_calls.py
checks the sum). Counted from 0, a value nested nearly ``MAX_DEPTH`` deep passed, and a
resumed call's record (``_Round.record``) wrote a checkpoint that every later resume refused
as malformed."""


def _carried(value: Any, tool: str, depth: int = 0) -> Any:
    """``value``, a tool's ``ToolResult.structured``, if a checkpoint can hold it (JSON values,
    registered pydantic models) ``depth`` levels inside what a resume reads (``_IN_STATE`` in a
    round's saved state), as it must for the response to be saved at a pause; else its
    pydantic JSON form if a checkpoint can hold that (an unregistered model as its fields, as a
    ``ReActAgent``'s tool message is saved); else None, with a warning the first time for the
    tool: the model reads the text all the same, and a
    pause was refused for a value no action asked for (``ToolResult.structured`` is anything).
    Asked only when a pause saves the value (the round's answers so far, ``_Round.answer``, or a
    response an action paused on, ``saved_structured``): a round that does not pause carries
    the tool's value as it gave it, never walked (a 1000-row result cost ~10 ms a call)."""
    try:
        _json_value_at(value, "structured", depth)
    except CheckpointError as exc:
        # As a ReActAgent's tool message keeps it (its ``metadata``, dumped by pydantic): an
        # unregistered model as its fields, a datetime as its text. Only an object pydantic
        # cannot write either (one of your own) is lost.
        try:
            plain = _as_saved(value)
            _json_value_at(plain, "structured", depth)
        except (CheckpointError, PydanticSerializationError, ValueError, TypeError, RecursionError):
            pass
        else:
            return plain
        if _warned_unsaved.first(tool):
            logging.getLogger("adk.actions").warning(
                "tool %r returned a ToolResult.structured that a checkpoint cannot hold (%s): "
                "it is saved as None, so the ToolResponseEvent of a resume that reads it from "
                "the checkpoint carries None for it, and its text alone; return JSON values or "
                "a model registered with adk.register_type",
                tool,
                exc,
            )
        return None
    return value


_any_serializer: list[SchemaSerializer] = []
"""The serializer of an ``Any`` value (``_as_saved``), made at the first pause that needs it."""


def _as_saved(value: Any) -> Any:
    """``value`` as a ``ReActAgent``'s checkpoint writes it in a tool message's ``metadata`` (an
    ``Any`` place, ``codec._own_json``): models as their own dumps (by alias only where their
    config says so, no computed field: ``round_trip``), NaN kept a float. Not pydantic_core's
    ``to_jsonable_python``, which names every field by its alias and writes computed fields, so
    a resume read another dict from an action than from a chat for the same tool's result."""
    if not _any_serializer:
        config = core_schema.CoreConfig(ser_json_inf_nan="constants")
        _any_serializer.append(SchemaSerializer(core_schema.any_schema(), config))
    return _any_serializer[0].to_python(value, mode="json", round_trip=True)


def saved_structured(values: list[Any], responses: list[Message]) -> list[Any] | None:
    """A ``ToolResponseEvent``'s ``structured`` as a pause saves it: each value a checkpoint
    cannot hold is None (``_carried``'s warning naming its response's tool); None when then
    none holds a value (saved without the field, as a pyadk from before it reads it)."""
    saved = [
        None if value is None else _carried(value, response.name or "?")
        for value, response in zip(values, responses, strict=False)
    ]
    return saved if any(value is not None for value in saved) else None


def _placed(calls: Sequence[ToolCall], saved: list[Message]) -> dict[int, Message]:
    """Places for answers saved without them (see ``_saved_answers``)."""
    placed: dict[int, Message] = {}
    for message in saved:
        for place, call in enumerate(calls):
            if (
                place not in placed
                and call.id == (message.tool_call_id or "")
                and message.name in (None, call.name)
            ):
                placed[place] = message
                break
    return placed
