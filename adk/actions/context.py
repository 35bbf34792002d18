"""What an action sees: ``ActionContext`` (send events, memory, resources); where memory lives.

Short-term memory lives in the run's ``Session`` under ``memory:<agent name>``. That one choice
gives it every property it needs: an execution environment keeps one session per key, so memory
persists per key across inputs; a ``Runner`` user who passes the same session to several runs
gets it across them; and a checkpoint saves the session, so memory survives a pause.

Sensory memory (one input's own) lives in the input's run instead, and in the paused action's
saved state: a key's other records, which run while a record waits at a pause, never reach it.
Both are a ``ShortTermMemory`` (``_memory``: names, dotted paths and nested objects).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Generator, Sequence
from typing import TYPE_CHECKING, Any, Literal, NoReturn, TypeVar, cast, overload

from ..context import RunContext, Session
from ..interrupts import ResumeContext
from ..messages import _TOOL
from ._builtin import check_chat_request
from ._fanin import _FanIn, check_expected
from ._memory import ShortTermMemory
from .events import ChatRequestEvent, Event

if TYPE_CHECKING:
    from ..models.base import ChatModel
    from ..resources import Prompt
    from ..tools.base import Tool
    from ._run import _ActionRun

__all__ = ["ActionContext", "ResourceKind", "ShortTermMemory"]

ResourceKind = Literal["model", "tool", "prompt"]

_E = TypeVar("_E", bound=Event)


def _memory_key(agent_name: str) -> str:
    """The session key an agent's short-term memory lives under."""
    return f"memory:{agent_name}"


class ActionContext:
    """Passed to every action with its event: send events, read and write memory, reach resources.

    ``resume`` is set when this action raised ``adk.Interrupt`` on this event and the run resumed:
    the action runs again on the same event and reads ``resume.data`` (and the ``state`` it saved).
    Events an interrupted action sent are dropped, because it runs again and sends them anew.
    """

    __slots__ = ("_run", "_sent", "action_name", "resume")

    def __init__(self, run: _ActionRun, action_name: str, resume: ResumeContext | None) -> None:
        self._run = run
        self._sent: list[Event] = []
        self.action_name = action_name
        self.resume = resume

    def send_event(self, event: Event) -> None:
        """Queue ``event`` for the actions that listen for its type (after this action returns).

        An event nobody listens for is refused here, where the mistake is, instead of vanishing;
        so is a ``ChatRequestEvent`` whose messages a model API refuses (a tool call no tool
        message right after it answers, a tool message that answers no call of the reply right
        before it), which failed the input only at the provider's 400.
        """
        kind = type(event)
        if not self._run.plan._listeners.get(kind):  # a type not sent before, or no taker
            self._run.check_sendable(event)
        if kind is ChatRequestEvent:  # by exact type: isinstance costs ~1.1k per event sent
            # Its messages looked at here, the check called only for a call or a tool message
            # (a call per request cost ~1.1k instructions more). ``kind``, read once, does not
            # narrow ``event`` for mypy; a cast would be a call per request.
            for message in event.messages:  # type: ignore[attr-defined]
                if message.tool_calls or message.role == _TOOL:
                    agent = self._run.agent.name
                    check_chat_request(self.action_name, agent, "sends", event)  # type: ignore[arg-type]
                    break
        self._sent.append(event)

    def collect_events(
        self,
        event: Event,
        expected: Sequence[type[_E]],
        *,
        buffer_id: str | None = None,
    ) -> list[_E] | None:
        """Fan-in, as LlamaIndex's ``ctx.collect_events``: keep ``event`` and give ``None``
        until an event of each class in ``expected`` has come, then those events, in the order
        of ``expected`` (``[Answer] * 3``: three answers, in the order they came; a subclass
        counts for its class). The events given are taken out; events beyond them wait for the
        next fan-in.

        The events wait in a buffer of this input's own, per action (``buffer_id`` names a
        buffer of its own instead: one per correlation id, say, or one that several actions
        share). Like sensory memory it is gone when the input's run ends, saved with a pause
        and restored on resume, and an action that raises (a retried attempt, a pause) has its
        collecting undone, so each event counts once. ``TypeError``/``ValueError`` here for
        what could never complete: an event that is none of ``expected``, or an expected class
        the action (with ``buffer_id``, any action of the agent) does not take."""
        run = self._run
        if buffer_id is not None and not isinstance(buffer_id, str):
            raise TypeError(f"collect_events: buffer_id is a str, got {buffer_id!r}")
        kinds = check_expected(run.plan, self.action_name, event, expected, buffer_id is not None)
        fanin = run._fanin
        if fanin is None:
            fanin = run._fanin = _FanIn()
        # The action's own buffer by default, named so that no buffer_id of the user's meets it.
        found = fanin.collect(
            buffer_id if buffer_id is not None else f"action:{self.action_name}", event, kinds
        )
        # Instances of ``expected``'s classes, in its order (``check_expected`` took them as they
        # are, ``_FanIn`` gives one of each): of their common class, to a type checker.
        return cast("list[_E] | None", found)

    @property
    def agent_name(self) -> str:
        """The name of the ``ActionAgent`` running the action."""
        return self._run.agent.name

    @property
    def short_term_memory(self) -> ShortTermMemory:
        """This agent's memory, kept in the session under ``memory:<agent name>`` (see the module
        docstring for why): Flink Agents' ``MemoryObject``, with dotted paths and nested
        objects."""
        return self._run.memory

    @property
    def sensory_memory(self) -> ShortTermMemory:
        """This input's own memory, as Flink Agents' sensory memory: shared by the actions of one
        input's run and gone when it ends. Unlike ``short_term_memory`` it is not kept per key,
        so a key's later records cannot replace it while this record waits at a pause: it is
        saved with the pause and restored on resume. Same methods and rules as short-term
        memory (JSON data or registered models; an interrupted action's writes are undone)."""
        return self._run.sensory

    @property
    def session(self) -> Session:
        """The run's session; in an execution environment, the one kept for the record's key."""
        return self._run.ctx.session

    @property
    def run_context(self) -> RunContext:
        """The agent's ``RunContext`` (run path, address, history), for what actions rarely need."""
        return self._run.ctx

    # What each kind of resource is, for type checkers (a registry of one's own may give other
    # objects, as it is duck-typed: see ``adk._checks.check_resources``).
    @overload
    def get_resource(self, name: str, kind: Literal["model"] = "model") -> Awaitable[ChatModel]: ...
    @overload
    def get_resource(self, name: str, kind: Literal["tool"]) -> Awaitable[Tool]: ...
    @overload
    def get_resource(self, name: str, kind: Literal["prompt"]) -> Awaitable[Prompt]: ...
    @overload
    def get_resource(
        self, name: str, kind: ResourceKind
    ) -> Awaitable[ChatModel | Tool | Prompt]: ...
    def get_resource(self, name: str, kind: ResourceKind = "model") -> Awaitable[Any]:
        """The resource ``name`` of ``kind``, awaited (``await ctx.get_resource(name)``, in an
        ``async def`` action): the agent's own ``resources``, else the runner's; ``ActionError``
        when both define it as different objects. Unknown names raise ``KeyError`` saying what is
        known. Used without ``await``, as Flink Agents' synchronous ``get_resource`` is, it raises
        a ``TypeError`` saying so."""
        return _Lookup(self._run.get_resource(name, kind), name)

    def __repr__(self) -> str:
        return f"<ActionContext {self.agent_name}.{self.action_name}>"


class _Lookup(Coroutine[Any, Any, Any]):
    """What ``ActionContext.get_resource`` gives: awaited, the resource. Flink Agents' lookup is
    synchronous, and an action ported as it is used the lookup itself as the resource; that
    failed with "'coroutine' object has no attribute 'chat'" and a never-awaited warning. Reading
    an attribute of it or calling it is a ``TypeError`` that says to await it instead. It is a
    coroutine (``send``/``throw``/``close`` go to the lookup's), so ``asyncio.create_task`` and
    ``gather`` take it as they took the plain one."""

    __slots__ = ("_lookup", "_name")

    def __init__(self, lookup: Coroutine[Any, Any, Any], name: str) -> None:
        self._lookup = lookup
        self._name = name

    def __await__(self) -> Generator[Any, None, Any]:
        return self._lookup.__await__()

    def send(self, value: Any) -> Any:
        return self._lookup.send(value)

    def throw(self, *error: Any) -> Any:
        return self._lookup.throw(*error)

    def close(self) -> None:
        self._lookup.close()

    def _not_awaited(self, use: str) -> NoReturn:
        self._lookup.close()  # never to run: no "never awaited" warning on top of this error
        raise TypeError(
            f"ctx.get_resource({self._name!r}) was not awaited ({use}): write "
            "`await ctx.get_resource(...)` in an `async def` action (Flink Agents' get_resource "
            "is synchronous; this one is not, since MCP tools are listed over the network)"
        )

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith(_PROBED):  # what asyncio and reprs look for on a coroutine
            raise AttributeError(attribute)
        self._not_awaited(f"its attribute {attribute!r} was read")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._not_awaited("it was called")


_PROBED = ("__", "cr_", "gi_", "_asyncio")
