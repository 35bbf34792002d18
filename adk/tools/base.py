"""The tool contract: specs shown to models, the ``Tool`` and ``Toolset`` protocols, tool context.

A tool receives the model's raw argument text and returns text (or a ``ToolResult``). Everything that
can go wrong with a call — bad JSON, failed validation, an exception — becomes an error result the
model can read and correct; only ``Interrupt`` travels up, because it pauses the run on purpose
(and two failures of the run rather than the call: its turn limit reached inside an ``AgentTool``,
and a resumed call's saved state that cannot be read back).

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string when the models are created at ``import adk``. Forward references are quoted.
"""

from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from .._ported_names import install as _install_ported_names
from ..checkpoint.codec import register_type
from ..events import _FORWARDED, AgentAction, AgentEvent, AgentOutput
from ..interrupts import ResumeContext
from ..messages import Part, _no_parts, _shown_args

if TYPE_CHECKING:
    from ..context import RunContext, Session

__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolProgress",
    "ToolResult",
    "ToolSpec",
    "Toolset",
]

_new = object.__new__

_LIVE = object()
"""``ToolContext._view`` when ``resume`` is read from the run's resume plan, as for the tool; while
a ``before_tool`` callback runs on a resumed run the view is that callback's own (``adk.callbacks``)."""


class ToolSpec(BaseModel):
    """What a model is told about a tool: name, description and JSON-schema ``parameters``."""

    model_config = ConfigDict(defer_build=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolResult(BaseModel):
    """A tool's answer. ``content`` is what the model reads; ``structured`` keeps machine-readable
    output (MCP structured content, a pydantic model's data) for code that wants it; ``parts``
    holds the images, sounds and files it returns (an MCP tool's screenshot), which reach a model
    that takes them, ``content`` keeping a placeholder for each."""

    model_config = ConfigDict(defer_build=True)

    content: str
    is_error: bool = False
    structured: Any = None
    parts: tuple[Part, ...] = Field(default=(), exclude_if=_no_parts)

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        return _shown_args(super().__repr_args__())

    @classmethod
    def error(cls, message: str) -> "ToolResult":
        """An error result (``Error: `` prefixed unless already there). Returned, it keeps the
        actions the tool asked for (``ctx.exit()``...); a raised ``ToolError`` drops them."""
        text = message if message.startswith("Error:") else f"Error: {message}"
        return cls(content=text, is_error=True)


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a bool is not a number")
    return value


class ToolProgress(BaseModel):
    """What a running tool reports to the caller of the run (``ToolContext.report_progress``, and
    an MCP server's progress notifications): the call it comes from, ``progress`` so far out of
    ``total`` when known, a ``message`` for a person, and any JSON ``data``. It arrives as the
    ``custom`` output of an event (``output.tool_name`` names the tool) while the call runs; no
    model sees it and nothing records or saves it. Registered as ``adk.ToolProgress``, so
    ``AgentEvent.to_dict``/``from_dict`` carry it."""

    model_config = ConfigDict(defer_build=True)

    tool_call_id: str
    # Finite: a count or a fraction. NaN (a 0/0 ratio) or an infinity was taken and shown, and
    # failed only where a service wrote the event out (``to_dict``: JSON has no number for it),
    # far from the tool that made it; refused here, the tool's call fails naming it.
    # Not a bool: ``report_progress(True, 2)`` was shown as 1.0 of 2, a flag taken for a count.
    progress: Annotated[float | None, BeforeValidator(_not_bool)] = Field(
        default=None, allow_inf_nan=False
    )
    total: Annotated[float | None, BeforeValidator(_not_bool)] = Field(
        default=None, allow_inf_nan=False
    )
    message: str | None = None
    data: Any = None


register_type(ToolProgress, "adk.ToolProgress")


class ToolError(Exception):
    """Raise from a tool to return a clean error result (no traceback type name in the text)."""


_E = TypeVar("_E", bound=Exception)


def _own_words(error: _E, without_content: str | None = None) -> _E:
    """``error``, a ``ToolError`` pyadk raises in its own words, marked so that its
    ``execute_tool`` span keeps them without content capture (``adk.tracing._content_free``):
    the whole message, or ``without_content``, the message without what it quotes (an inner
    agent's error, a user function's exception). A tool's own ``ToolError`` is its answer to
    the model, content, and kept off the span; pyadk's say why the call failed, which an SRE
    must tell apart from a tool's failure. An attribute, so it pickles with the error.

    Any other exception whose message quotes content (a model's refusal an ``OutputSchemaError``
    repeats) is marked with ``without_content`` alone: an agent's span, and those of the agents
    its failure passes through, then record that text instead when content is not captured."""
    error._adk_content_free = True if without_content is None else without_content  # type: ignore[attr-defined]
    return error


@runtime_checkable
class Tool(Protocol):
    """Anything with a ``spec`` and an async ``run(arguments, ctx)``."""

    @property
    def spec(self) -> ToolSpec:
        """What the model is told about the tool. Keep it fixed: a ``ReActAgent`` may read the
        spec of a ``Tool`` it is given only once, when it is built."""
        ...

    async def run(self, arguments: str, ctx: "ToolContext") -> str | ToolResult:
        """Run one call; ``arguments`` is the model's raw JSON text. Any exception but
        ``Interrupt`` (which pauses the run) becomes an error result the model can read."""
        ...


@runtime_checkable
class Toolset(Protocol):
    """A source of tools resolved at run time (an MCP server is one)."""

    async def tools(self, ctx: "RunContext") -> Sequence[Tool]:
        """The tools to offer, asked when an agent run starts (and on resume), so they may change
        from one run to the next. A sequence, so a ``list[FunctionTool]`` is one (a ``list[Tool]``
        alone would be, as lists are invariant)."""
        ...


class ToolContext:
    """What a running tool knows: the session, where it runs, its call id, resume data, and the
    actions it may ask for (``exit``, ``transfer``, ``break_loop``)."""

    __slots__ = ("_emit", "_view", "action", "address", "run_context", "tool_call_id", "tool_name")

    def __init__(
        self,
        run_context: "RunContext",
        *,
        tool_name: str,
        tool_call_id: str,
        address: str,
        emit: Callable[[AgentEvent], Any] | None = None,
    ) -> None:
        self.run_context = run_context
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self.address = address
        self.action: AgentAction | None = None
        self._emit = emit
        self._view: ResumeContext | object | None = _LIVE

    @property
    def session(self) -> "Session":
        """The run's session, shared by every agent of the run."""
        return self.run_context.session

    @property
    def run_id(self) -> str:
        """The run's id (``RunContext.run_id``): the conversation a tool call belongs to."""
        return self.run_context.run_id

    @property
    def run_path(self) -> tuple[str, ...]:
        """The run path of the agent that made the call."""
        return self.run_context.run_path

    @property
    def agent_name(self) -> str:
        """The name of the agent that made the call (the last element of ``run_path``): inside an
        ``AgentTool``, the inner agent. As ``RunContext.agent_name`` and Google ADK's
        ``tool_context.agent_name``, so a ported tool or tool callback acts for one agent without
        reading it out of the run path."""
        return self.run_context.agent_name

    @property
    def resume(self) -> ResumeContext | None:
        """Set when the run resumes and this call (or a nested run under it) was interrupted;
        ``data`` is what the resume sent to this call. A ``before_tool`` callback sees its own
        pause's resume here, else None (``adk.callbacks``): the pause may have been the tool's."""
        view = self._view
        if view is not _LIVE:
            return view  # type: ignore[return-value]
        plan = self.run_context._run.plan
        return plan.resume_for(self.address) if plan is not None else None

    def _act(self) -> AgentAction:
        if self.action is None:
            self.action = AgentAction()
        return self.action

    def exit(self) -> None:
        """End the run once this tool round's results are out (inside an ``AgentTool``, only the
        nested run: exit does not cross that boundary). Dropped if the tool then fails."""
        self._act().exit = True

    def transfer(self, agent_name: str) -> None:
        """Hand the conversation to another agent once this tool round's results are out.
        Dropped if the tool then fails."""
        self._act().transfer_to = agent_name

    def break_loop(self) -> None:
        """Stop the innermost enclosing loop after the calling agent finishes."""
        self._act().break_loop = True

    def report_progress(
        self,
        progress: float | None = None,
        total: float | None = None,
        message: str | None = None,
        *,
        data: Any = None,
    ) -> "_Reported":
        """Show the caller of the run how this call is going, while it runs: an event whose
        ``output.custom`` is a ``ToolProgress`` (``output.tool_name`` this tool), yielded by the
        calling agent before the call's result. Not in history, not saved; on the call's
        ``execute_tool`` span as an ``adk.tool.progress`` event when traced. Callable from a sync
        tool's thread too. A report made once the call has ended (a timed-out thread running on)
        is dropped: it would come after the call's result.

        Only a tool that says it reports progress (``FunctionTool(progress=True)``, an MCP
        server's tool) is given a way to the caller: the framework runs its call in a task so
        that events can pass while it runs, which a call that reports nothing need not pay for.
        Any other call raises ``RuntimeError`` here, saying so, rather than the report being
        lost unseen.

        The report is out when this returns; ``await ctx.report_progress(...)``, as an MCP
        server's tool writes it (FastMCP's is a coroutine), waits for nothing more."""
        emit = self._emit
        if emit is None:
            raise RuntimeError(
                f"tool '{self.tool_name}' reported progress, but it was not declared to report "
                "any, so no one receives it: make it with FunctionTool(..., progress=True) or "
                "@tool(progress=True) (a Tool class of your own: reports_progress = True)"
            )
        try:
            report = ToolProgress(
                tool_call_id=self.tool_call_id,
                progress=progress,
                total=total,
                message=message,
                data=data,
            )
        except ValidationError as exc:
            raise _bad_report(exc) from None  # the tool's failure names the tool
        # Flagged as no output of the agent that yields it (``_FORWARDED``): a PlanExecute step,
        # an AgentTool's result or a run's answer never take a report for the agent's words.
        event = AgentEvent(
            agent_name=self.run_context.agent_name,
            run_path=self.run_context.run_path,
            output=AgentOutput(custom=report, tool_name=self.tool_name),
            _flags=_FORWARDED,
        )
        emit(event)
        return _REPORTED


def _bad_report(exc: ValidationError) -> TypeError | ValueError:
    """The error for a report whose arguments ``ToolProgress`` refused: pydantic's own says
    "1 validation error for ToolProgress", which names neither the call nor its parameters, and
    ``ctx.report_progress("half")`` (the text where the number goes) is the likely slip; a
    ``ValueError`` for a NaN or infinite number alone."""
    errors = exc.errors()
    wrong = "; ".join(
        f"{error['loc'][0]} must be {_wanted(error['loc'][0], error['type'], error['input'])} "
        f"or None, got {type(error['input']).__name__} {error['input']!r:.60}"
        + ("; it is too large for a float" if _overflows(error["type"], error["input"]) else "")
        for error in errors
    )
    call = "ctx.report_progress(progress=None, total=None, message=None, *, data=None)"
    if all(
        error["type"] == "finite_number" or _overflows(error["type"], error["input"])
        for error in errors
    ):
        # The right type, a wrong value: NaN (a 0/0 ratio), an infinity, or an int too large to
        # be a float (which would be one).
        return ValueError(f"{call} takes finite numbers: {wrong}")
    return TypeError(f"{call} takes the numbers first and the text as message=: {wrong}")


def _overflows(error: str, value: object) -> bool:
    """Whether pydantic refused ``value`` as no float because it is an int too large for one."""
    return error == "float_type" and type(value) is int


def _wanted(field: object, error: str, value: object) -> str:
    """What a report's ``field`` takes, as ``_bad_report`` says it for pydantic's ``error``."""
    if field == "message":
        return "a str"
    if isinstance(value, bool):
        return "a number, not a bool,"
    return "a finite number" if error == "finite_number" or _overflows(error, value) else "a number"


class _Reported:
    """What ``ToolContext.report_progress`` returns: nothing to wait for, yet awaitable. A tool
    ported from an MCP server awaits its progress call (FastMCP's ``Context.report_progress`` is
    a coroutine); were this ``None``, that ``await`` would fail the call, after its report had
    gone, with Python's "object NoneType can't be used in 'await' expression", which names
    neither the method nor the fix."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        yield from ()  # ends at once: the report was handed on before this was returned


_REPORTED = _Reported()


_install_ported_names(ToolContext)  # where a Google ADK name went (adk._ported_names)


def _shows_events(tool: object) -> bool:
    """Whether a call of ``tool`` may show events while it runs (progress reports, an
    ``AgentTool``'s inner events), so that it runs in a task with a way to the caller. The
    framework's tools say so in ``_emits_events`` (``FunctionTool(progress=)``,
    ``AgentTool(emit_inner_events=)``, an MCP server's tools), which the executor reads per round
    of one call; a ``Tool`` of one's own says so in its public ``reports_progress`` (a class
    attribute), read only when there is no ``_emits_events``: a tool of the framework's pays no
    second lookup. A ``reports_progress`` that is no bool is refused, naming the tool: ``"no"``
    is truthy, and would run every call of the tool in a task for nothing."""
    emits = getattr(tool, "_emits_events", None)
    if emits is None:
        emits = getattr(tool, "reports_progress", False)
        if emits is not True and emits is not False:
            raise TypeError(
                f"{type(tool).__qualname__}.reports_progress must be True or False, got {emits!r}"
            )
    return bool(emits)


def new_tool_context(
    run_context: "RunContext",
    tool_name: str,
    tool_call_id: str,
    address: str,
    emit: Callable[[AgentEvent], Any] | None,
) -> ToolContext:
    """``ToolContext(run_context, tool_name=..., tool_call_id=..., address=..., emit=...)``, made
    for every tool call: its fields set directly, without the keyword arguments' dict and
    ``__init__``'s frame, which cost more than the rest of it."""
    ctx = _new(ToolContext)
    ctx.run_context = run_context
    ctx.tool_name = tool_name
    ctx.tool_call_id = tool_call_id
    ctx.address = address
    ctx.action = None
    ctx._emit = emit
    ctx._view = _LIVE
    return ctx
