"""``AgentTool``: an agent called as a tool, in a nested run.

The nested run shares the caller's session values but keeps its own history. Its result is the text
of the inner agent's last message, with the images, sounds and files that message carries (its
``parts``, as a ``ToolResult``'s), or the JSON of the pydantic model it gave as its output after
that message (a ReActAgent's ``output_schema`` answer); an inner error becomes a tool error (not
the run's ``max_turns`` reached inside, which fails the run: the calling model would carry on); inner
``exit`` ends only the inner agent and inner transfers are ignored outside. The nested run's
addresses live under the tool call's address, so an interrupt inside becomes an interrupt of the
tool call whose saved state is the nested run's root input and history; on resume the same global
plan routes back inside.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

import pydantic_core
from pydantic import BaseModel, ValidationError

# ``adk._preflight`` and ``checkpoint._snapshot`` load on first use (the packages' ``__getattr__``):
# only a paused or resumed agent tool needs them.
import adk

from . import checkpoint
from ._aio import closing
from ._checks import check_agent, shown
from ._driver import NO_EVENT, drive
from ._run_error import MaxTurnsExceeded
from .agent import Agent, AgentInput
from .checkpoint._state import SavedState
from .checkpoint.codec import CheckpointError, _nan_json
from .context import RunContext, _RunState, new_run
from .events import _FORWARDED, AgentEvent
from .history import build_messages
from .interrupts import Interrupt, agent_segment, join_address
from .messages import Message, parts_as_text
from .tools.base import (
    ToolContext,
    ToolError,
    ToolProgress,
    ToolResult,
    ToolSpec,
    _own_words,
)
from .tools.function import _TOOL_NAME, _is_tool_name, format_validation_error

if TYPE_CHECKING:
    from ._preflight import Preflight

__all__ = ["AgentTool"]

_new = object.__new__

_SHOWN_AHEAD = 64
"""How many events without an open stream a forwarding ``AgentTool`` shows before it waits for
the reader outside to have taken them (``_Emitter.passed``); an event with an open stream waits
at once."""

_REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": "What to ask the agent."}},
    "required": ["request"],
    # Nothing else, as a function tool's schema says: an argument the model invents is refused
    # by name (``AgentTool._request``), not dropped.
    "additionalProperties": False,
}


def _spec_of(agent: Agent, input_schema: type[BaseModel] | dict[str, Any] | None) -> ToolSpec:
    """The spec of an ``AgentTool`` of ``agent`` taking ``input_schema``, both checked: named and
    described after the agent."""
    check_agent(agent, "AgentTool(agent)")
    description = agent.description
    if not isinstance(description, str):
        raise TypeError(f"AgentTool needs a str description, got {shown(description)}")
    if not description.strip():
        # The model decides when to call the tool from it: blank is as good as none.
        raise ValueError(
            f"AgentTool needs an agent with a non-empty description; agent {agent.name!r} has "
            f"{description!r}"
        )
    if not _is_tool_name(agent.name):
        # The tool is called by the agent's name, so the name must be a valid tool name.
        suggestion = re.sub(r"[^a-zA-Z0-9_-]", "_", agent.name)[:64]
        raise ValueError(
            f"AgentTool: agent name {agent.name!r} cannot be a tool name, which model APIs "
            f"require to match {_TOOL_NAME!r} (1 to 64 letters, digits, '_' and '-'); name "
            f"the agent e.g. {suggestion!r}"
        )
    if input_schema is None:
        parameters = _REQUEST_SCHEMA
    elif isinstance(input_schema, dict):
        parameters = input_schema
    elif isinstance(input_schema, type) and issubclass(input_schema, BaseModel):
        parameters = input_schema.model_json_schema()
    else:
        raise TypeError(
            "AgentTool: input_schema must be a pydantic model class, a JSON schema dict or None, "
            f"got {shown(input_schema)}"
        )
    return ToolSpec(name=agent.name, description=description, parameters=parameters)


def _fixed(attribute: str) -> AttributeError:
    """The refusal of setting ``attribute`` on an ``AgentTool`` already made: what it makes, the
    tool's spec, is what an agent given the tool offers its model, taken when the agent is made
    (``ReActAgent`` keeps its tools' specs, by name), so a spec changed afterwards would have
    the model call a tool that no longer takes what it is offered, or is not called so."""
    return AttributeError(
        f"AgentTool.{attribute} cannot be set once the tool is made: the tool's name, "
        "description and parameters come from it, and agents given the tool have taken them; "
        "make a new AgentTool(agent, ...) instead"
    )


class AgentTool:
    """A ``Tool`` named and described after ``agent`` that runs it on the model's request."""

    def __init__(
        self,
        agent: Agent,
        input_schema: type[BaseModel] | dict[str, Any] | None = None,
        full_history: bool = False,
        emit_inner_events: bool = False,
    ) -> None:
        self._spec = _spec_of(agent, input_schema)
        self._agent = agent
        self._input_schema = input_schema
        self.full_history = full_history
        # A bool, checked as the setter checks it: ``lone_call`` tests ``is False``; read per
        # round and per inner event.
        self.emit_inner_events = emit_inner_events

    @property
    def agent(self) -> Agent:
        """The agent it runs, which names and describes the tool: fixed once the tool is made."""
        return self._agent

    @agent.setter
    def agent(self, agent: Agent) -> None:
        raise _fixed("agent")

    @property
    def input_schema(self) -> type[BaseModel] | dict[str, Any] | None:
        """The parameters the model is offered (``{"request": str}`` when None): fixed once the
        tool is made."""
        return self._input_schema

    @input_schema.setter
    def input_schema(self, input_schema: type[BaseModel] | dict[str, Any] | None) -> None:
        raise _fixed("input_schema")

    @property
    def emit_inner_events(self) -> bool:
        """Whether the inner agent's outputs are shown in the caller's event stream. May be set
        after the tool is made (a bool)."""
        return self._emits_events

    @emit_inner_events.setter
    def emit_inner_events(self, value: bool) -> None:
        if value is not True and value is not False:
            raise TypeError(
                f"AgentTool.emit_inner_events must be True or False, got {shown(value)}"
            )
        self._emits_events = value

    @property
    def spec(self) -> ToolSpec:
        """Named and described after the agent; the parameters are ``{"request": str}`` unless
        ``input_schema`` gives others."""
        return self._spec

    @property
    def _adk_origin(self) -> str:
        """The agent it runs, for an error naming two tools of one name (``tools._origin``)."""
        return f"AgentTool of agent {self.agent.name!r}"

    def _request(self, arguments: str) -> str:
        """The user message the inner agent receives, from the model's raw arguments."""
        schema = self._input_schema
        if isinstance(schema, type):
            try:
                schema.model_validate_json(arguments or "{}")
            except ValidationError as exc:
                raise ToolError(format_validation_error(self._agent.name, exc)) from exc
            return arguments
        try:
            # pydantic_core's parser is loaded anyway; the json module would cost `import adk`.
            parsed = pydantic_core.from_json(arguments or "{}")
        except ValueError as exc:
            raise ToolError(f"invalid JSON arguments for tool '{self._agent.name}': {exc}") from exc
        if schema is not None:
            return arguments
        if not isinstance(parsed, dict):
            raise ToolError(
                f"tool '{self._agent.name}' needs a string argument 'request', got arguments "
                f"that are no JSON object ({type(parsed).__name__})"
            )
        request = parsed.get("request")
        unknown = [name for name in parsed if name != "request"]
        if unknown:
            # A model that guessed the parameter's name ({"query": ...}) learns which it gave.
            named = ", ".join(repr(name) for name in unknown)
            plural = "s" if len(unknown) > 1 else ""
            raise ToolError(
                f"tool '{self._agent.name}' takes one string argument, 'request': unknown "
                f"argument{plural} {named}"
            )
        if request is None:
            raise ToolError(f"tool '{self._agent.name}' needs a string argument 'request'")
        if not isinstance(request, str):
            raise ToolError(
                f"tool '{self._agent.name}': argument 'request' must be a string, got "
                f"{type(request).__name__}"
            )
        return request

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        """Run the agent in a nested run (the caller's session, its own history) and return the
        text of its last message (with that message's ``parts``, when it carries some, as a
        ``ToolResult`` whose text holds a placeholder for each), or the JSON of a pydantic model
        it output after it (its structured answer); an inner error fails the call, an inner
        interrupt pauses it."""
        outer = ctx.run_context
        resume = ctx.resume
        state = None
        if resume is not None and resume.state is not None:
            state = SavedState(f"agent tool '{self._agent.name}'", resume.state)
            root_input = state.messages("root_input")
        else:
            root_input = [Message.user(self._request(arguments))]
            if self.full_history:
                root_input = [*build_messages(outer, self._agent.name), *root_input]
        run, inner_ctx = self._nested(ctx, root_input, state)
        last: Message | None = None
        # A pydantic model the inner agent gave as its output after its last message: its
        # structured answer (ReActAgent's ``output_schema``), which the result is instead.
        answer: BaseModel | None = None
        previous: AgentEvent | None = None
        ahead = 0  # events shown since the reader outside last took them all (``_SHOWN_AHEAD``)
        events = drive(self._agent, AgentInput(root_input, outer.enable_streaming), inner_ctx)
        try:
            async with closing(events):
                async for event in events:
                    if previous is not None:  # every layer below is done with it: adk.events
                        previous._flags = 0
                    previous = event
                    if event._signal is not None:
                        saved = {
                            "root_input": root_input,
                            "history": checkpoint._snapshot.dump_history(run.history),
                        }
                        raise Interrupt._from_signal(event._signal, saved)
                    if event.error is not None:
                        if resume is not None and isinstance(event.exception, CheckpointError):
                            # The nested run cannot resume from what was saved: the caller's resume
                            # fails too, rather than the model being told the tool failed.
                            raise event.exception
                        if isinstance(event.exception, MaxTurnsExceeded):
                            # The run's limit, not this call's failure: the whole run fails
                            # (the tool executor lets it through), rather than the model being
                            # told the tool failed and a return-directly result ending the run.
                            raise event.exception
                        # pyadk's words and the inner error's type stay on the call's span
                        # without content capture; the inner error's text is the agent's content.
                        failed = f"agent '{self._agent.name}' failed"
                        raise _own_words(
                            ToolError(f"{failed}: {event.error}"), f"{failed}: {event.error.type}"
                        )
                    # Shown before collecting, so that a stream reads live outside.
                    output = event.output
                    if self._forward(ctx, event):
                        assert output is not None  # (``_forward`` shows only outputs)
                        if output.stream is not None and not output.stream.done:
                            # A stream still arriving: read from its model only as the reader
                            # outside reads it until the reader took its event (asked for the
                            # next one), as a stream of the run's own agents is, not at the
                            # model's pace into memory.
                            ahead = _SHOWN_AHEAD
                        else:
                            # A whole message (or custom output): the nested run goes on, but
                            # no more than _SHOWN_AHEAD events ahead of the reader, as a
                            # ParallelAgent's branch waits for each of its events: a reader
                            # slower than a chatty nested run (a fan-out inside it) held all of
                            # its events in memory. A run showing fewer pays nothing.
                            ahead += 1
                        if ahead >= _SHOWN_AHEAD:
                            ahead = 0
                            passed = getattr(ctx._emit, "passed", None)  # one of one's own: none
                            if passed is not None:
                                await passed()
                    # A further-nested AgentTool's shown event is no message of this agent's.
                    if output is not None and not event._flags & _FORWARDED:
                        if output.stream is not None:
                            if output.shown_only:  # shown, no answer
                                continue
                            try:
                                last = await output.stream.collect()
                            except Exception:
                                # The inner agent reads the same stream: its own error event
                                # comes next and becomes the tool error (its callbacks and
                                # span see the failure), as without streaming.
                                continue
                            answer = None
                        elif output.message is not None:
                            last = output.message
                            answer = None
                        elif (
                            isinstance(output.custom, BaseModel)
                            and type(output.custom) is not ToolProgress  # shown, no answer
                        ):
                            answer = output.custom
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            if previous is not None:
                previous._flags = 0
                previous = None

        if answer is not None:
            # The validated object as JSON, as a function tool returning it sends it (and as
            # RunResult.output is the instance): not the model's text, which may wrap the JSON
            # in code fences and words. Google ADK's AgentTool returns the validated object too.
            return _nan_json(answer)
        if last is None:
            return ""
        if last.parts:
            # The images, sounds and files its answer carries (a chart its own tool made and
            # returned directly, a message built with them) reach the calling model as a
            # tool's do; those of its other messages stay in its own history. The text keeps a
            # placeholder for each, as a tool's result does, for the agents reading the history
            # as text: one the text names already is not added again.
            return ToolResult(content=parts_as_text(last.content, last.parts), parts=last.parts)
        return last.content

    def _nested(
        self, ctx: ToolContext, root_input: list[Message], state: SavedState | None
    ) -> tuple[_RunState, RunContext]:
        """The nested run of one call and its agent's context, below the call's address; a
        resumed call's history loaded from its saved ``state``."""
        outer = ctx.run_context
        run = new_run(
            root_input,
            outer.session,
            outer._run.run_id,
            outer._run.plan,
            outer._run.hooks,
            outer._run.resources,
            nested=True,
        )
        # The caller's run options, designated ones included: the nested run is part of its call.
        run.options = outer._run.options
        run.designated = outer._run.designated
        # Its model calls count in the enclosing run's usage (``RunResult.usage``).
        run.totals = outer._run.totals or outer._run
        # Its model calls count against the enclosing run's max_turns (one count for the run).
        run.turns = outer._run.turns
        # Where the call sits in the enclosing runs, for its spans' ``adk.run_path``: the outer
        # path the forwarded events carry (``_forward``), whether or not they are forwarded.
        run.outer_path = (*outer._run.outer_path, *outer.run_path)
        if state is not None:
            checkpoint._snapshot.load_history(run, state.values.get("history"))
        inner_ctx = RunContext(
            run,
            (self._agent.name,),
            join_address(ctx.address, agent_segment(self._agent.name)),
            run.history,
            enable_streaming=outer.enable_streaming,
            options=run.options_for(self._agent.name),
            trace=outer._trace,
        )
        return run, inner_ctx

    def _adk_preflight_call(self, ctx: ToolContext, walk: Preflight) -> None:
        """The resume's check of a paused call before anything runs (``adk._preflight``): the
        nested run resumes its agent, below the call, from the state the call saved."""
        resume = ctx.resume
        below = walk.below(ctx.address)
        if resume is None or not below:
            return
        if resume.state is None:
            why = f"the call of agent tool {self._agent.name!r} saved no nested run to resume"
            raise walk.unreachable(below, why)
        state = SavedState(f"agent tool '{self._agent.name}'", resume.state)
        _, inner_ctx = self._nested(ctx, state.messages("root_input"), state)
        why = f"agent tool {self._agent.name!r} resumes its agent {self._agent.name!r}"
        walk.only_under(ctx.address, [inner_ctx.address], why)
        walk.agent(self._agent, inner_ctx)

    def _adk_check_resume(self, arguments: str, ctx: ToolContext) -> None:
        """Before a resumed round of several calls starts (``check_resumed_calls``): the nested
        tree's check, so a call beside this one is not made before the nested resume is refused,
        and made again on the next resume of the checkpoint the refusal keeps. (The runner's own
        walk before the resume covers the rounds it can see; this covers the others, e.g. a
        call an action makes.)"""
        plan = ctx.run_context._run.plan
        if plan is not None:
            walk = adk._preflight.Preflight(plan, None)
            walk.within(lambda: self._adk_preflight_call(ctx, walk))

    def _forward(self, ctx: ToolContext, event: AgentEvent) -> bool:
        """Show an inner event outside, without its actions: inner exits, transfers and loop
        breaks belong to the nested run and must not act on the caller. Flagged as such
        (``_FORWARDED``), without the inner flags, which were the nested run's layers'. Whether
        it was shown."""
        if not self._emits_events or ctx._emit is None or event.output is None:
            return False
        # The copy shares the output: a stream only shown (``shown_only``) stays so outside.
        # Made with its fields set directly, as ``AgentEvent.of`` makes one: made once per
        # enclosing AgentTool for every event shown from the innermost one, where
        # ``dataclasses.replace`` (keywords, ``__init__``, a look at every field) was a fifth of
        # a forwarding level's cost per event. An event of a class of one's own (a subclass,
        # its own fields too) is copied as it is, by ``dataclasses.replace``: made an
        # AgentEvent, it lost its class and fields only when shown from inside an AgentTool.
        path = (*ctx.run_path, *event.run_path)
        if type(event) is AgentEvent:
            shown = _new(AgentEvent)
            shown.agent_name = event.agent_name
            shown.run_path = path
            shown.output = event.output
            shown.action = None
            shown.error = event.error
            shown.exception = event.exception
            shown._flags = _FORWARDED
            shown._signal = event._signal
        else:
            shown = dataclasses.replace(event, run_path=path, action=None, _flags=_FORWARDED)
        run = ctx.run_context._run
        if run.keeps_shown:  # its collector finds its output without it (``runner._own_output``)
            if run.forwarded is None:
                run.forwarded = [shown]
            else:
                run.forwarded.append(shown)
        ctx._emit(shown)
        return True
