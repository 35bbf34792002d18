"""One input's run of an ``ActionAgent``: the event queue, the action calls, pause and resume.

Events are processed one at a time, in the order they were sent; the actions listening for an event
run one after the other in plan order, and the events an action sends join the queue when it
returns. So one input's processing is deterministic, and a pause is always at one action on one
event: the saved state is that event, the action's place among its listeners, the queue behind it
and the chats waiting for tool results. Concurrency comes from the execution environment (inputs of
different keys), from tool rounds (calls of one request run concurrently), and from the built-in
chat's model calls for events queued together (``_chats_together``: answered in queue order, and a
model call cannot pause).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from inspect import isawaitable
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

from pydantic import Json
from pydantic_core import PydanticSerializationError

from .._doing import doing, timed
from .._driver import is_cancellation, signal_of
from .._run_error import MaxTurnsExceeded
from ..checkpoint._state import SavedState
from ..checkpoint.codec import (
    _NAMES,
    CheckpointError,
    _has_any_place,
    _json_dump,
    _Unstorable,
    _with_excluded,
    from_json_value,
    to_json_value,
)
from ..context import RunContext, generate_counted
from ..events import AgentAction, AgentEvent, _type_name
from ..interrupts import Interrupt, ResumeContext, join_address
from ..messages import Message
from ..models.base import ChatModel
from ..resources import Resources, _RenamedTool, _TemplatePrompt, _Unknown
from ..tools._origin import tool_origin
from ..tools.base import Tool, ToolError
from ._builtin import (
    ActionError,
    _answer,
    _call_parts,
    _Chat,
    _chat_of,
    chat_action,
    chat_streamed,
    check_turns_left,
    saved_structured,
    tool_action,
)
from ._fanin import _FanIn
from ._memory import _copied
from .context import ActionContext, ShortTermMemory, _memory_key
from .events import ChatRequestEvent, Event, OutputEvent, ToolResponseEvent
from .plan import AgentPlan, _Action, _type_key

if TYPE_CHECKING:
    from .agent import ActionAgent

__all__ = ["_ActionRun"]

logger = logging.getLogger("adk.actions")

_new = object.__new__


_CHAT_EVENTS = frozenset((ChatRequestEvent, ToolResponseEvent))
"""The events the built-in chat asks its model on (``_ActionRun._overlaps``): by exact type, a
set lookup being what every other event pays (a subclass of ``ChatRequestEvent`` does not
overlap: it is one an action of its own may take)."""


def _sensory_memory(values: dict[str, Any]) -> ShortTermMemory:
    """One input's own memory: a ``ShortTermMemory`` that its errors call sensory memory."""
    memory = ShortTermMemory(values)
    memory._kind = "sensory memory"
    return memory


def _action_segment(name: str) -> str:
    if "/" in name or "#" in name or "%" in name:  # see adk.interrupts._escaped
        name = name.replace("%", "%25").replace("/", "%2F").replace("#", "%23")
    return f"action:{name}"


class _ActionRun:
    """Everything one input's processing works with."""

    __slots__ = (
        "_fanin",
        "_found",
        "_memory",
        "_sensory",
        "agent",
        "call_ids",
        "chats",
        "count",
        "ctx",
        "plan",
        "queue",
        "restored_requests",
    )

    def __init__(self, agent: ActionAgent, ctx: RunContext) -> None:
        self.agent = agent
        # An agent with resources of its own runs under a context that finds its models there
        # (``_ActionRunContext``); one without runs under its own, as any agent does.
        self.ctx = ctx if agent.resources is None else _ActionRunContext._of(ctx, agent)
        self.plan: AgentPlan = agent.plan
        self._memory: ShortTermMemory | None = None
        self._sensory: ShortTermMemory | None = None  # this input's own, made on first use
        self._fanin: _FanIn | None = None  # ``collect_events``' buffers, made on first use
        self.chats: dict[str, _Chat] = {}
        # The ids of the calls this run's chats made, once one made any (``_builtin._answer``):
        # its chats pause at one address, so a later call's id must be its own. None until then,
        # and after a resume (read again from the chats it restored).
        self.call_ids: dict[str, None] | None = None
        # The ids of the chat requests a resume restored (``restore``): made by the code of the
        # pause, their offered tools may be gone since (``_builtin._call_parts``).
        self.restored_requests: set[str] = set()
        self.queue: deque[Event] = deque()
        self.count = 0  # events processed for this input, against the agent's max_events
        self._found: dict[tuple[str, str], Any] = {}  # resources looked up in this run

    # -- services for actions ------------------------------------------------------------------
    @property
    def memory(self) -> ShortTermMemory:
        """The agent's memory in the session, made on first use: agents that keep none leave no
        empty entry in every session."""
        memory = self._memory
        if memory is None:
            values = self.ctx.session.values
            key = _memory_key(self.agent.name)
            stored = values.get(key)
            if not isinstance(stored, dict):
                stored = values[key] = {}
            memory = self._memory = ShortTermMemory(stored)
        return memory

    @property
    def sensory(self) -> ShortTermMemory:
        """This input's memory (Flink Agents' sensory memory): not in the session, so a key's
        other records never see or replace it, but saved with a pause and restored on resume."""
        sensory = self._sensory
        if sensory is None:
            sensory = self._sensory = _sensory_memory({})
        return sensory

    def forget_empty_memory(self) -> None:
        """Remove the agent's memory from the session when the run leaves it empty: an agent that
        only reads its memory (or deletes what it held) leaves no ``memory:<name>: {}`` behind,
        which an execution environment would otherwise keep for every key it ever saw."""
        memory = self._memory
        if memory is not None and not memory._values:
            values = self.ctx.session.values
            key = _memory_key(self.agent.name)
            if values.get(key) is memory._values:
                del values[key]

    def check_sendable(self, event: Event) -> None:
        """Refuse what no action would take (``ActionContext.send_event`` calls this only for a
        type it has not seen sent)."""
        if not isinstance(event, Event):
            if isinstance(event, type) and issubclass(event, Event):
                raise TypeError(
                    f"send_event takes an Event, got the class {event.__name__} itself: send an "
                    f"instance, {event.__name__}(...)"
                )
            raise TypeError(f"send_event takes an Event, got {type(event).__name__}")
        if not isinstance(event, OutputEvent) and not self.plan.listeners(type(event)):
            raise ActionError(
                f"no action of agent {self.agent.name!r} listens for {type(event).__name__}; "
                "add one with @action(...) or do not send it"
            )

    async def get_resource(self, name: str, kind: str) -> Any:
        """Looked up once per run: a chat asks for its model and tools again every round."""
        found = self._found.get((kind, name))
        if found is None:
            found = self._found[kind, name] = await self._look_up(name, kind)
        return found

    async def _look_up(self, name: str, kind: str) -> Any:
        """The agent's own resource ``name``, else the runner's: the agent's resources are its,
        and the runner's (the execution environment's) add the names the agent does not define.
        A name both define as different objects is an error rather than either one picked: an
        agent given a model by its deployment would otherwise run on another, silently. The
        runner's are checked for it without asking their MCP servers (its models, and the tools
        and prompts registered in code): finding out would start them, or wait for a dead one,
        on every lookup of the agent's own names; those the runner's servers have listed
        already are read, though (``Resources._listed``), so a clash is refused once it can be
        seen without a request."""
        if kind not in ("model", "tool", "prompt"):
            raise ValueError(f"resource kind must be 'model', 'tool' or 'prompt', not {kind!r}")
        if kind == "model":  # no MCP server supplies models: found without a request
            return _model_of(self.agent, self.ctx._run.resources, name)
        own, shared = self.agent.resources, self.ctx._run.resources
        if own is None or shared is None or own is shared:
            source = own if own is not None else shared
            if source is None:
                raise _no_resources(self.agent.name, kind, name)
            return await _get(source, name, kind)
        try:
            found = await _get(own, name, kind)
        except KeyError as exc:
            try:
                other = await _get(shared, name, kind)
            except KeyError as missing:
                # Both: the runner's may say a server that may offer the name could not be asked.
                raise _in_neither(self.agent.name, kind, name, exc, missing) from None
            unasked = getattr(exc, "unasked", ())
            if unasked:  # the agent's own may be the one: not the runner's in its place
                raise ActionError(
                    f"agent {self.agent.name!r} needs {kind} {name!r}: the runner's resources "
                    f"offer one ({_shown(other)}), but the agent's own MCP server(s) "
                    f"{', '.join(map(repr, unasked))} could not be asked and may offer it; "
                    f"{exc.args[0]}"
                ) from exc
            return other
        registered = getattr(shared, "_registered", None)
        other = registered(name, kind) if registered is not None else None
        listed = getattr(shared, "_listed", None)
        if other is None and kind != "model" and listed is not None:
            offered = listed(name, kind)
            if offered is not None and not _same(found, offered[1]):
                raise ActionError(
                    f"{kind} name {name!r} is defined both by agent {self.agent.name!r}'s own "
                    f"resources ({_shown(found)}) and offered by the runner's MCP server "
                    f"{offered[0]!r}: the agent's resources are its own and the runner's add "
                    "names it does not define; give the server a prefix, or the agent's "
                    f"{kind} another name"
                )
        if other is not None and not _same(found, other):
            raise _defined_twice(self.agent.name, kind, name, found, other)
        return found

    def registered_tool(self, name: str) -> Tool | None:
        """The tool ``get_resource(name, "tool")`` gives that is found without asking a server
        (registered in code), or None when only asking one could tell, or nothing offers it.
        For the resume's check before anything runs (``adk._preflight``), which asks no server.
        As ``_look_up`` goes: the agent's own resources first, the runner's only for a name the
        agent's cannot offer (none of its MCP servers may). A registry that is no ``Resources``
        is not read: its lookup is its own."""
        for source in (self.agent.resources, self.ctx._run.resources):
            if source is None:
                continue
            if not isinstance(source, Resources):
                return None
            tool = source._registered_tool(name)
            if tool is not None:
                return tool
            if source._mcp:
                return None
        return None

    def may_ask_for_tools(self) -> bool:
        """Whether a tool lookup may find one ``registered_tool`` does not: a source of the
        agent's tools has MCP servers, or is a registry of one's own."""
        return any(
            source is not None and (not isinstance(source, Resources) or bool(source._mcp))
            for source in (self.agent.resources, self.ctx._run.resources)
        )

    def address_of(self, action_name: str) -> str:
        """Where an action's interrupts (and the tool calls it makes) are addressed."""
        return join_address(self.ctx.address, _action_segment(action_name))

    def action_context(self, action_name: str) -> RunContext:
        """The agent's context placed at ``action_name``: tool calls an action makes are addressed
        below it, so their interrupt points name the action."""
        ctx = self.ctx
        return ctx._copy(ctx.run_path, self.address_of(action_name), ctx._lane, ctx._loop_depth)

    # -- processing ----------------------------------------------------------------------------
    async def process(
        self, current: Event | None, start: int = 0, resumed: bool = False
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run ``current`` from its listener ``start`` (a resumed pause), then the queue.

        Written for the cost per event: the listener cache is read directly, and contexts are
        made without a call into ``__init__``.
        """
        plan, queue, limit = self.plan, self.queue, self.agent.max_events
        cached = plan._listeners
        # A streaming run shows the built-in chat's replies as they arrive (``chat_streamed``);
        # one that does not pays a test of this local per action.
        streaming = self.ctx.enable_streaming
        # A record's run under a timeout notes each action as it runs (``adk._doing``), so the
        # error of a record cut off names it; None otherwise: two tests per action.
        running = doing.get() if timed else None
        while True:
            if current is None:
                if not queue:
                    if self._fanin is not None and self._fanin.buffers:
                        self._report_waiting(self._fanin)
                    return
                current = queue.popleft()
                start, resumed = 0, False
                count = self.count = self.count + 1
                if count > limit:
                    raise ActionError(
                        f"agent {self.agent.name!r} processed more than {limit} events for one "
                        "input (max_events); do its actions send events in a cycle?"
                    )
            kind = type(current)  # for the overlap test and the listener lookup
            if (  # inline tests first: any other event pays no call
                queue
                and kind in _CHAT_EVENTS
                and not streaming
                and not resumed
                and self._overlaps(current)
                and self._overlaps(queue[0])
            ):
                await self._chats_together(current)  # and those queued right behind it
                current = None
                continue
            listeners = cached.get(kind) or plan.listeners(kind)
            for index in range(start, len(listeners)):
                found = listeners[index]
                resume = self._resume_of(found) if resumed and index == start else None
                actx = _new(ActionContext)
                actx._run = self
                sent: list[Event] = []
                actx._sent = sent
                actx.action_name = found.name
                actx.resume = resume
                attempt = 1
                while True:  # more than once only for an action with a retry policy that failed
                    if running is not None:
                        mark = running.start("action {:q} on {}", found.name, kind.__name__)
                    try:
                        if streaming and found.call is chat_action:
                            async with aclosing(chat_streamed(current, actx)) as shown:
                                async for streamed in shown:
                                    yield streamed
                            result = None
                        else:
                            result = found.call(current, actx)
                        if result is not None:
                            if found.is_async or isawaitable(result):
                                result = await result
                            if result is not None:
                                if found.call is not tool_action:
                                    raise ActionError(
                                        _returned(found.name, self.agent.name, result)
                                    )
                                # A round whose calls may show events (see ``tool_action``):
                                # each goes to the caller as it comes.
                                async with aclosing(result) as shown:
                                    async for event in shown:
                                        yield event
                    except Interrupt as exc:
                        self._undo_writes()  # it runs again on resume: its writes, too
                        signal = signal_of(exc, self.address_of(found.name))
                        signal.save(self.ctx.address, self.pause_state(current, index))
                        yield AgentEvent(
                            action=AgentAction(interrupted=signal.info()), _signal=signal
                        )
                        return
                    except (Exception, asyncio.CancelledError) as exc:
                        # The run's max_turns is the run's failure, not the action's: not wrapped.
                        if is_cancellation(exc) or isinstance(
                            exc, ActionError | CheckpointError | MaxTurnsExceeded
                        ):
                            raise
                        policy = found.retry
                        if (
                            policy is not None
                            and attempt < policy.max_attempts
                            and policy._retries_error(exc)  # its status, if it has one
                        ):
                            self._undo_writes()  # it runs again: its writes and events count once
                            sent.clear()
                            await asyncio.sleep(policy._wait_after(exc, attempt))
                            attempt += 1
                            continue
                        tries = f" after {attempt} attempts" if attempt > 1 else ""
                        raise ActionError(
                            f"action {found.name!r} of agent {self.agent.name!r} failed on "
                            f"{type(current).__name__}{tries}: {_type_name(exc)}: {exc}"
                        ) from exc
                    finally:
                        if resume is not None:
                            self._consume(found)
                        if running is not None:
                            running.end(mark)
                    break
                memory = self._memory
                if memory is not None and memory._undo:  # the action returned: its writes stand
                    memory._keep_writes()
                memory = self._sensory
                if memory is not None and memory._undo:
                    memory._keep_writes()
                fanin = self._fanin
                if fanin is not None and fanin.undo:
                    fanin.undo.clear()
                for event in sent:
                    if isinstance(event, OutputEvent):
                        yield _output_event(event.output)
                        if not plan.listeners(type(event)):
                            continue
                    queue.append(event)
            current = None

    def _overlaps(self, event: Event) -> bool:
        """Whether ``event``'s one action is the built-in chat asking its model: a
        ``ChatRequestEvent``, or the tool results of a chat it started (no retry policy: the
        built-ins have none). Such events queued together have their model calls made at once
        (``_chats_together``)."""
        if type(event) not in _CHAT_EVENTS:
            return False
        listeners = self.plan._listeners.get(type(event)) or self.plan.listeners(type(event))
        if (
            len(listeners) != 1
            or listeners[0].call is not chat_action
            or listeners[0].retry is not None
        ):
            return False
        return not isinstance(event, ToolResponseEvent) or event.request_id in self.chats

    async def _chats_together(self, first: Event) -> None:
        """Process ``first`` and the events queued right behind it that ``_overlaps`` takes, as
        one after the other would, but with their model calls in flight at once: an LLM grader
        per passage waits for one model round trip, not one per passage.

        What stays as in series: the events are counted against ``max_events`` in order; each
        chat's request, conversation and tool lookups are read in order, and the calls started
        in order, so each takes its turn of ``max_turns`` in request order (a call past the
        limit fails before it is sent, the ones before it made); each reply is then answered
        (its ``ToolRequestEvent`` or ``ChatResponseEvent`` queued) in request order, whatever
        order they arrive in, so what the other actions see, and in what order, is the same.
        The first chat to fail, in request order, fails the run as in series: those before it
        are answered, those after it cancelled. No pause can come of it: a model call does not
        pause (a model callback's ``Interrupt`` is refused), and the tool rounds the chats send
        run one after the other as before. Not in a streaming run, which shows each reply as
        it comes (``chat_streamed``): those stay one after the other."""
        queue, limit, listeners = self.queue, self.agent.max_events, self.plan.listeners
        batch = [first]
        while queue and self.count < limit and self._overlaps(queue[0]):
            batch.append(queue.popleft())
            self.count += 1
        started: list[tuple[_Action, Event, ActionContext, Any, asyncio.Task[Message]]] = []
        failed: tuple[_Action, Event, BaseException] | None = None
        try:
            for event in batch:
                found = listeners(type(event))[0]
                actx = _new(ActionContext)
                actx._run, actx._sent, actx.action_name, actx.resume = self, [], found.name, None
                try:
                    chat = _chat_of(actx, event)
                    assert chat is not None  # ``_overlaps``: a chat's own tool results
                    request, messages, rounds = chat
                    run_ctx, model, specs, options = await _call_parts(actx, request, rounds)
                except Exception as exc:  # a cancellation goes on at once (``finally``)
                    failed = (found, event, exc)  # after those before it are answered
                    break
                call = asyncio.create_task(
                    generate_counted(run_ctx, model, messages, specs, options)
                )
                started.append((found, event, actx, chat, call))
            for found, event, actx, (request, messages, rounds), call in started:
                try:
                    reply = await call
                except (Exception, asyncio.CancelledError) as exc:
                    raise self._chat_failed(found, event, exc)  # noqa: B904 (its cause set)
                _answer(actx, request, messages, rounds, reply)
                queue.extend(actx._sent)
            if failed is not None:
                raise self._chat_failed(*failed)
        finally:
            calls = [call for *_, call in started]
            for call in calls:
                call.cancel()  # those after a failure (a done one ignores it)
            if calls:  # their outcomes read: no "exception was never retrieved"
                await asyncio.gather(*calls, return_exceptions=True)

    def _chat_failed(self, found: _Action, event: Event, exc: BaseException) -> BaseException:
        """What a chat's failure in ``_chats_together`` raises: as ``process`` has it."""
        if is_cancellation(exc) or isinstance(
            exc, ActionError | CheckpointError | MaxTurnsExceeded
        ):
            return exc
        wrapped = ActionError(
            f"action {found.name!r} of agent {self.agent.name!r} failed on "
            f"{type(event).__name__}: {_type_name(exc)}: {exc}"
        )
        wrapped.__cause__ = exc
        return wrapped

    def _undo_writes(self) -> None:
        """Undo the memory writes of the action that raised: it runs again (on resume, or as
        its retry policy's next attempt), and its writes must count once."""
        if self._memory is not None:
            self._memory._undo_writes()
        if self._sensory is not None:
            self._sensory._undo_writes()
        if self._fanin is not None:
            self._fanin.undo_changes()

    def _report_waiting(self, fanin: _FanIn) -> None:
        """The input's run ended with events still waiting in a fan-in: the events it waited
        for never came (a branch that sent nothing, a count one too many). Not an error, as a
        branch may send nothing by design, but not silent either: the fan-in's action never
        went on, so the input may have no output."""
        for buffer_id, events in fanin.buffers.items():
            logger.warning(
                "agent %r ended its input with fan-in %r incomplete: %d event(s) collected "
                "(%s) and dropped; collect_events never had all it expected",
                self.agent.name,
                buffer_id,
                len(events),
                ", ".join(type(event).__name__ for event in events),
            )

    def _resume_of(self, found: _Action) -> ResumeContext | None:
        plan = self.ctx._run.plan
        if plan is None:
            return None
        return plan.resume_for(self.address_of(found.name))

    def _consume(self, found: _Action) -> None:
        plan = self.ctx._run.plan
        if plan is not None:
            plan.consume(self.address_of(found.name))

    # -- pause and resume ------------------------------------------------------------------------
    def pause_state(self, current: Event, listener: int) -> dict[str, Any]:
        state: dict[str, Any] = {
            "event": self._encode(current),
            "listener": listener,
            # By name too: ``restore`` finds the paused action by it (see ``_paused_listener``).
            "actions": [found.name for found in self.plan.listeners(type(current))[: listener + 1]],
            "queue": [self._encode(event) for event in self.queue],
            "chats": {
                request_id: {
                    "request": self._encode(chat.request),
                    "messages": chat.messages,
                    "rounds": chat.rounds,
                }
                for request_id, chat in self.chats.items()
            },
            "count": self.count,
        }
        if self._sensory is not None and self._sensory._values:
            state["sensory"] = _copied(self._sensory._values)
        if self._fanin is not None and self._fanin.buffers:
            state["collected"] = {
                buffer_id: [self._encode(event) for event in events]
                for buffer_id, events in self._fanin.buffers.items()
            }
        return state

    def restore(self, state: Any) -> tuple[Event, int]:
        """Rebuild the queue and chats from a pause state; the paused event and listener index."""
        saved = SavedState(f"agent {self.agent.name!r}", state)
        current = self._decode(saved, saved.values.get("event"))
        listener = self._paused_listener(saved, type(current))
        queued = saved.values.get("queue", [])
        if not isinstance(queued, list):
            raise saved.error("'queue' must be a list of events")
        self.queue.extend(self._decode(saved, item) for item in queued)
        chats = saved.values.get("chats", {})
        if not isinstance(chats, dict):
            raise saved.error("'chats' must map request ids to chats")
        for request_id, chat in chats.items():
            fields = SavedState(f"chat {request_id!r} of agent {self.agent.name!r}", chat)
            request = self._decode(fields, fields.values.get("request"))
            if not isinstance(request, ChatRequestEvent):
                raise fields.error("its 'request' is not a ChatRequestEvent")
            self.chats[request_id] = _Chat(
                request, fields.messages("messages"), fields.count("rounds")
            )
            self.restored_requests.add(request.id)
        self.count = saved.count("count", default=0)
        sensory = saved.values.get("sensory", {})
        if not isinstance(sensory, dict) or not all(type(key) is str for key in sensory):
            raise saved.error("'sensory' must map names to values")
        if sensory:  # a copy: the resumed actions' writes must not reach the saved state
            self._sensory = _sensory_memory(_copied(sensory))
        collected = saved.values.get("collected", {})
        if not isinstance(collected, dict) or not all(
            type(key) is str and isinstance(events, list) for key, events in collected.items()
        ):
            raise saved.error("'collected' must map fan-in buffer ids to lists of events")
        if collected:
            self._fanin = _FanIn(
                {
                    buffer_id: [self._decode(saved, item) for item in events]
                    for buffer_id, events in collected.items()
                    if events
                }
            )
        check_turns_left(self, saved, current, listener, self.queue)
        return current, listener

    def _paused_listener(self, saved: SavedState, event_type: type[Event]) -> int:
        """The index of the paused action among the event's listeners, found by its name.

        The saved index alone would, once the actions changed between pause and resume (a
        redeploy), run whichever action now stands there: an action added before the paused one
        would make an action that already ran on the event run again, and the paused one run
        fresh, its resume data dropped. So the pause saves the names of the listeners that ran
        up to the paused one (``actions``): actions added or removed around it do not matter, but
        the paused action gone (or renamed), or one that ran before it moved after it (where it
        would run again), is refused. Older checkpoints saved no names: their index is read as a
        position, as before.
        """
        listeners = self.plan.listeners(event_type)
        if saved.values.get("actions") is None:
            return saved.count("listener", below=len(listeners))
        ran = saved.names("actions")
        # The listeners up to the paused one, so the saved index is the last of them.
        if saved.count("listener", below=max(len(ran), 1)) != len(ran) - 1:
            raise saved.error(f"'listener' is not the last of the saved actions {ran!r}")
        names = [found.name for found in listeners]
        if not ran or ran[-1] not in names:
            listed = ", ".join(repr(name) for name in names) or "none"
            paused = repr(ran[-1]) if ran else "(none saved)"
            raise saved.error(
                f"the action that paused, {paused}, no longer takes {event_type.__name__} "
                f"(its actions for it: {listed})"
            )
        index = names.index(ran[-1])
        again = [name for name in ran[:-1] if name in names[index + 1 :]]
        if again:
            raise saved.error(
                f"action(s) {', '.join(map(repr, again))} ran on the event before action "
                f"{ran[-1]!r} paused and now come after it: resuming would run them again"
            )
        return index

    def _encode(self, event: Event) -> dict[str, Any]:
        """An event as JSON: fields that may hold anything (``Any`` anywhere in their type:
        ``list[Any]``, ``dict[str, Any]``, ``Any | None``) go through the checkpoint codec, which
        keeps registered models tagged and refuses other objects, naming the field; typed fields
        are pydantic's JSON, validated back on resume."""
        fields: dict[str, Any] = {}
        coded: list[str] = []
        dumped: dict[str, Any] | None = None
        loose = _loose_fields(type(event))
        added = _added_fields(event)
        for name, info in type(event).model_fields.items():
            value = getattr(event, name)
            if name == "structured" and value is not None and isinstance(event, ToolResponseEvent):
                value = saved_structured(value, event.responses)  # carried raw until saved
            if value is None and name in added:
                continue  # read back as its default, None, here and by a pyadk from before it
            # A ``Json[...]`` field is saved as its text (``_loose_fields``), whatever it holds.
            if name in loose or (_holds_tagged(value) and not _is_json(info.metadata)):
                fields[name] = to_json_value(
                    value, f"{type(event).__name__}.{name} of a paused agent"
                )
                if name not in loose:
                    coded.append(name)
            else:
                if dumped is None:  # NaN kept (JSON mode makes one in a dict[str, Any] None)
                    dumped = _dumped(event, loose)
                fields[name] = dumped[name]
        record = {"type": _type_key(type(event)), "fields": fields}
        if coded:  # only then: a checkpoint without it loads in a pyadk from before it
            record["coded"] = coded
        return record

    def _decode(self, saved: SavedState, data: Any) -> Event:
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise saved.error(f"an event must be {{'type': ..., 'fields': ...}}, not {data!r}")
        event_type = self.plan.event_type(data["type"])
        if event_type is None:
            alike = self.plan.named_alike(data["type"])
            if alike:
                names = ", ".join(map(_type_key, alike[:-1])) + f" and {_type_key(alike[-1])}"
                raise saved.error(
                    f"it holds an event of type {data['type']!r}, and its classes of that name, "
                    f"{names}, are more than one: the saved module names neither"
                )
            raise saved.error(
                f"it holds an event of type {data['type']!r}, which none of its actions takes"
            )
        fields = data.get("fields")
        if not isinstance(fields, dict):
            raise saved.error(f"the {data['type']!r} event has no fields")
        coded = data.get("coded", [])
        if not isinstance(coded, list) or not all(type(name) is str for name in coded):
            raise saved.error(f"the {data['type']!r} event's coded fields are not a list of names")
        try:
            loose = _loose_fields(event_type).union(coded)
            values = {
                name: from_json_value(value) if name in loose else value
                for name, value in fields.items()
            }
            # By name, as saved, and by alias, for an alias's own validation.
            return event_type.model_validate(values, by_alias=True, by_name=True)
        except CheckpointError as exc:
            raise saved.error(f"the {data['type']!r} event {exc}", exc.reason) from None
        except (ValueError, ToolError, TypeError, KeyError) as exc:  # ValidationError: a ValueError
            # A validator's ``adk.ToolError`` (a Pydantic AI port's ``ModelRetry``), which
            # pydantic passes through unwrapped, is as much a no: the same refusal, not a bare
            # ToolError out of the resume (the codec's ``_validator_rejected`` for its models);
            # so is its TypeError or KeyError (unwrapped too), which a checkpoint's own values
            # make a malformed checkpoint (``checkpoint._points._MALFORMED``).
            raise saved.error(f"the {data['type']!r} event is invalid: {exc}") from None


# Fields a built-in event gained after checkpoints held it, each None by default: saved only
# when they hold a value, as a pyadk from before the field (``Event``'s ``extra="forbid"``)
# refuses an event with a field it does not know, even null, and with it the whole checkpoint: a
# worker not yet upgraded, in a rolling deploy, could resume nothing an upgraded one paused on.
_ADDED_FIELDS: tuple[tuple[type[Event], frozenset[str]], ...] = (
    (ToolResponseEvent, frozenset({"structured"})),
)


def _added_fields(event: Event) -> frozenset[str]:
    """The fields of ``event`` (its class or a subclass of it) in ``_ADDED_FIELDS``."""
    for event_type, names in _ADDED_FIELDS:
        if isinstance(event, event_type):
            return names
    return frozenset()


def _holds_tagged(value: Any) -> bool:
    """Whether a typed field's ``value`` goes through the checkpoint codec: a registered model
    with a place typed ``Any``, where pydantic's JSON of the field wrote a registered model held
    there as a dict (and the resumed event held the dict); the codec keeps it tagged. So does a
    list, tuple or dict holding one (a field typed ``list[Model]``, ``dict[str, Model]``), which
    pydantic's JSON wrote the same way. The event's record names such fields (``coded``) for
    the resume to read them back by the codec."""
    cls = type(value)
    if cls is list or cls is tuple:
        return any(_holds_tagged(item) for item in value)
    if cls is dict:
        return any(_holds_tagged(item) for item in value.values())
    return cls in _NAMES and _has_any_place(cls)


def _dumped(event: Event, loose: frozenset[str]) -> dict[str, Any]:
    """``event``'s typed fields as pydantic's JSON. A value pydantic cannot write (an object of
    an ``arbitrary_types_allowed`` field, as a LlamaIndex port's retrieved nodes) failed the pause
    with pydantic's "Unable to serialize unknown type", naming neither the event, nor the field,
    nor the checkpoint it was for: the error names them now."""
    try:
        # By field name whatever the model's config says (``_encode`` looks fields up by it);
        # round_trip: a ``Json[...]`` field stays the text it validates from on resume.
        dumped: dict[str, Any] = _json_dump(
            event, exclude=set(loose) or None, by_alias=False, round_trip=True
        )
        # A ``Field(exclude=True)`` field too, or the event comes back without it (the pause
        # failed on one with a bare ``KeyError``); a loose one is the codec's, as above.
        return {
            name: value
            for name, value in _with_excluded(event, dumped).items()
            if name not in loose
        }
    except _Unstorable as exc:  # a nested model that could not be read back (``_with_excluded``)
        raise CheckpointError(
            f"{type(event).__name__} of a paused agent cannot be saved in its checkpoint: "
            f"{exc.reason}",
            reason="unstorable",
        ) from None
    except PydanticSerializationError as exc:
        name = type(event).__name__
        failing = next(
            (field for field in type(event).model_fields if not _writes(event, field)), None
        )
        where = f"{name}.{failing}" if failing is not None else name
        raise CheckpointError(
            f"{where} of a paused agent cannot be saved in its checkpoint: {exc}; an event "
            "still to be processed at a pause is saved as JSON, so its fields hold JSON values "
            "and pydantic models",
            reason="unstorable",
        ) from None


def _writes(event: Event, field: str) -> bool:
    """Whether pydantic can write ``event``'s ``field`` as JSON (to name the one it cannot)."""
    try:
        _json_dump(event, include={field})
    except PydanticSerializationError:
        return False
    return True


_LOOSE: weakref.WeakKeyDictionary[type[Event], frozenset[str]] = weakref.WeakKeyDictionary()
"""Per event class, the fields ``_loose_fields`` found: worked out once, at the first pause."""


def _loose_fields(event_type: type[Event]) -> frozenset[str]:
    """The fields of ``event_type`` whose type holds ``Any`` (or ``object``) anywhere.

    Such a field may hold a pydantic model pydantic knows nothing of when it writes JSON: it
    wrote the model's fields, and the resumed event held a dict where the action had sent the
    model (``list[Any]``, ``dict[str, Any]``, ``Any | None``; only a field typed ``Any`` itself
    went through the codec). The codec keeps a registered model, and refuses any other object
    naming the field, as it does for a field typed ``Any``."""
    found = _LOOSE.get(event_type)
    if found is None:
        found = _LOOSE[event_type] = frozenset(
            name
            for name, info in event_type.model_fields.items()
            # ``Json[Any]``, ``Json[dict[str, Any]]`` (pydantic keeps ``Json`` in the metadata):
            # a text field, saved as its text (``_dumped``'s round_trip) and validated from it.
            # Taken for a loose field, it was saved parsed, and the resume refused the value
            # where the field takes text: the checkpoint never resumed.
            if not _is_json(info.metadata) and _holds_any(info.annotation, 0)
        )
    return found


def _is_json(metadata: Any) -> bool:
    """Whether a field's (or an ``Annotated`` type's) metadata makes it pydantic's ``Json``."""
    return any(item is Json or type(item) is Json for item in metadata)


def _holds_any(annotation: Any, depth: int) -> bool:
    if annotation is Any or annotation is object:
        return True
    if depth > 20:  # a recursive alias: what it holds is typed all the way down
        return False
    if get_origin(annotation) is Annotated and _is_json(annotation.__metadata__):
        return False  # ``Optional[Json[Any]]``: see ``_loose_fields``
    return any(_holds_any(arg, depth + 1) for arg in get_args(annotation))


def _output_event(output: Any) -> AgentEvent:
    if isinstance(output, Message):
        return AgentEvent.of(output)
    if isinstance(output, str):
        return AgentEvent.of(Message.assistant(output))
    return AgentEvent.custom(output)


def _returned(action: str, agent: str, value: object) -> str:
    """Why an action's return value is an error: actions act by sending events, so a returned
    one (an ``OutputEvent`` above all) would otherwise be dropped without a word."""
    where = f"action {action!r} of agent {agent!r} returned {type(value).__name__}"
    if isinstance(value, Event):
        return f"{where}: send it with ctx.send_event(...) instead of returning it"
    return f"{where}: an action returns nothing; it sends events with ctx.send_event(...)"


class _ActionRunContext(RunContext):
    """The context an ``ActionAgent`` given resources of its own runs its actions under (what
    ``ActionContext.run_context`` gives, and what the tool calls of its actions are placed at):
    a model named in ``generate``/``stream`` is found as the agent's chat finds its model, in the
    agent's own resources first (``_model_of``). ``RunContext`` looks in the runner's alone, so
    an action calling its agent's model by name failed ("the runner has no resources"), or ran
    on the runner's model of that name. Made once per input's run of such an agent; a child
    agent's context (``_child``) is a plain one again: the resources are this agent's own."""

    __slots__ = ("_agent",)

    _agent: ActionAgent

    @classmethod
    def _of(cls, ctx: RunContext, agent: ActionAgent) -> _ActionRunContext:
        made = ctx._copy(ctx.run_path, ctx.address, ctx._lane, ctx._loop_depth)
        return cls._placed(made, agent)

    @classmethod
    def _placed(cls, ctx: RunContext, agent: ActionAgent) -> _ActionRunContext:
        made = _new(cls)
        made._run, made.run_path, made.address, made._lane = (
            ctx._run,
            ctx.run_path,
            ctx.address,
            ctx._lane,
        )
        made.enable_streaming, made.options = ctx.enable_streaming, ctx.options
        made._loop_depth, made._trace, made._agent = ctx._loop_depth, ctx._trace, agent
        return made

    def _copy(
        self, run_path: tuple[str, ...], address: str, lane: Any, loop_depth: int
    ) -> RunContext:
        # An action's placed context and a traced tool call's (``_fork``) stay this agent's.
        return _ActionRunContext._placed(
            RunContext._copy(self, run_path, address, lane, loop_depth), self._agent
        )

    def _model_named(self, name: str) -> ChatModel:
        found: ChatModel = _model_of(self._agent, self._run.resources, name)
        return found


_new = object.__new__


def _model_of(agent: ActionAgent, shared: Any, name: str) -> Any:
    """The model ``name`` of ``agent``, as ``_ActionRun._look_up`` finds a resource: the agent's
    own, else the runner's (``shared``); one both define as different objects is refused.
    Synchronous (no MCP server supplies models), so ``RunContext.stream`` can use it too."""
    own = agent.resources
    if own is None or shared is None or own is shared:
        source = own if own is not None else shared
        if source is None:
            raise _no_resources(agent.name, "model", name)
        return source.get_model(name)
    try:
        found = own.get_model(name)
    except KeyError as exc:
        try:
            return shared.get_model(name)
        except KeyError as missing:
            raise _in_neither(agent.name, "model", name, exc, missing) from None
    registered = getattr(shared, "_registered", None)
    other = registered(name, "model") if registered is not None else None
    if other is not None and not _same(found, other):
        raise _defined_twice(agent.name, "model", name, found, other)
    return found


def _no_resources(agent_name: str, kind: str, name: str) -> KeyError:
    return KeyError(
        f"agent {agent_name!r} needs {kind} {name!r} but has no resources: pass "
        "resources= to the agent, the Runner or the execution environment"
    )


def _in_neither(agent_name: str, kind: str, name: str, own: KeyError, shared: KeyError) -> KeyError:
    """Keeps the servers that could not be asked (``unasked``), of either: the tool action
    answers a call to such a name with these words, not as an unknown tool."""
    unasked = (*getattr(own, "unasked", ()), *getattr(shared, "unasked", ()))
    return _Unknown(
        f"agent {agent_name!r} needs {kind} {name!r}, which neither its own resources nor the "
        f"runner's offer; its own: {own.args[0]}; the runner's: {shared.args[0]}",
        unasked,
    )


def _defined_twice(agent_name: str, kind: str, name: str, found: Any, other: Any) -> ActionError:
    return ActionError(
        f"{kind} name {name!r} is defined both by agent {agent_name!r}'s own resources "
        f"({_shown(found)}) and by the runner's ({_shown(other)}), as different objects: the "
        "agent's resources are its own and the runner's add names it does not define; remove "
        "one, or give one another name"
    )


async def _get(source: Any, name: str, kind: str) -> Any:
    """``source``'s ``kind`` resource ``name`` (``KeyError`` if it has none)."""
    if kind == "model":
        return source.get_model(name)
    if kind == "tool":
        return await source.get_tool(name)
    return await source.get_prompt(name)


def _same(found: Any, registered: Any) -> bool:
    """Whether the agent's ``found`` item and the runner's ``registered`` one of its name are one
    resource: the same object, a tool registered under another name counting as the tool itself
    (as ``Resources._registered`` gives it). A prompt given as text or messages is made into a
    template by each registry it is added to, so the same text in both is one prompt: compared
    by what it renders, or the same constant registered twice would be refused as two."""
    if isinstance(found, _RenamedTool):
        found = found._tool
    if found is registered:
        return True
    return (
        type(found) is _TemplatePrompt
        and type(registered) is _TemplatePrompt
        and found._messages == registered._messages
        and found.description == registered.description
    )


def _shown(item: Any) -> str:
    """An item in an error: a tool by where it comes from, anything else by its type."""
    if hasattr(item, "spec"):
        return tool_origin(item)
    return type(item).__qualname__
