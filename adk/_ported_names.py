"""The ``AttributeError`` of a context attribute that Google ADK has and pyadk names otherwise.

A tool or callback ported from Google ADK reads ``tool_context.state`` or
``callback_context.invocation_id``, or a model callback ``llm_request.config`` (the request's
names are ``REQUEST_HINTS``, installed on ``ModelRequest``). Out of a tool, the plain
``'ToolContext' object has no attribute 'state'`` became the error result the model read,
telling no one what the name is here; the error now says it. The OpenAI Agents SDK's
``Runner.run_sync`` and ``run_streamed`` (``RUNNER_HINTS``) are read from the class itself, as
that SDK calls them: ``install_absent`` raises there too. Each such name is a property of the
context classes that raises that error (``install``), set after the class is made so type checkers
do not see it and a ported name stays a type error. Not a ``__getattr__``: a class with one has
every attribute read of its instances left unspecialised by CPython's adaptive interpreter (it
cost ~5k instructions per agent step of a workflow, measured), and it hid a property's own
``AttributeError``.

``AGENT_ARGUMENT_HINTS`` is the same kind of table for another SDK's agent constructor arguments
(``instructions=``, ``before_model_callback=``), which ``prebuilt.ReActAgent``'s ``TypeError``
names. It is data only, so it lives here, where ``adk`` may hold it and ``prebuilt`` reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NoReturn

__all__ = [
    "AGENT_ARGUMENT_HINTS",
    "REQUEST_HINTS",
    "RUNNER_HINTS",
    "install",
    "install_absent",
    "no_attribute",
]

_HINTS = {
    "state": "Google ADK's state is ctx.session here (ctx.session['k'], ctx.session.get('k'))",
    "invocation_id": "Google ADK's invocation_id is ctx.run_id here",
    "actions": (
        "Google ADK's actions are methods here: ctx.exit(), ctx.transfer(name), "
        "ctx.break_loop() for escalate; skip_summarization is the agent's "
        "return_directly=[tool name]"
    ),
    "tool_confirmation": (
        "Google ADK's tool_confirmation is ctx.resume here (None on a first call; the answer "
        "is ctx.resume.data): ask with raise adk.Interrupt(info) or give the tool "
        "require_approval=True"
    ),
    "request_confirmation": (
        "Google ADK's request_confirmation(hint=, payload=) is raise "
        "adk.Interrupt({'hint': ..., 'payload': ...}) here; the answer comes back as "
        "ctx.resume.data when the call runs again"
    ),
    "function_call_id": "Google ADK's function_call_id is ctx.tool_call_id here",
    "save_artifact": "there are no artifacts here: keep files in your own storage",
    "load_artifact": "there are no artifacts here: keep files in your own storage",
}

REQUEST_HINTS = {
    "config": (
        "Google ADK's llm_request.config is request.options here (temperature, max_tokens, ...); "
        "its system_instruction is request.messages[0], a system message, when the agent has an "
        "instruction: replace it, do not edit it"
    ),
    "contents": "Google ADK's llm_request.contents is request.messages here (adk.Message items)",
    "append_instructions": (
        "Google ADK's append_instructions([...]) is replacing request.messages[0] here with a "
        "system message holding both texts (or inserting one when there is none)"
    ),
}
"""Google ADK's ``LlmRequest`` names, for the ``ModelRequest`` a model callback gets."""

RUNNER_HINTS = {
    "run_streamed": (
        "the OpenAI Agents SDK's Runner.run_streamed is Runner(agent, enable_streaming=True)"
        ".run(input) here: iterate its events (adk.run_messages(events) and "
        "adk.run_usage(events) once read)"
    ),
    "run_sync": (
        "the OpenAI Agents SDK's Runner.run_sync is asyncio.run(Runner(agent).invoke(input)) here"
    ),
}
"""The OpenAI Agents SDK's ``Runner`` methods, called on the class as that SDK does."""

_CALLBACK_ARGUMENTS = {
    f"{when}_{what}_callback": f"Google ADK's {when}_{what}_callback is callbacks=[adk.Callbacks("
    f"{when}_{what}=...)] here (a ReActAgent's own callbacks, with pyadk's parameters)"
    for when in ("before", "after")
    for what in ("agent", "model", "tool")
}
AGENT_ARGUMENT_HINTS = {
    "instructions": "the OpenAI Agents SDK's instructions is instruction= here",
    "handoffs": "the OpenAI Agents SDK's handoffs are sub_agents= here",
    "output_type": (
        "the OpenAI Agents SDK's output_type is output_schema= (a pydantic model class) here"
    ),
    "model_settings": (
        "the OpenAI Agents SDK's model_settings is model_options=adk.ModelOptions(...) here"
    ),
    "generate_content_config": (
        "Google ADK's generate_content_config is model_options=adk.ModelOptions(...) here"
    ),
    "handoff_description": "the OpenAI Agents SDK's handoff_description is description= here",
    "tool_use_behavior": (
        "the OpenAI Agents SDK's tool_use_behavior (stop_on_first_tool, StopAtTools) is "
        "return_directly=[tool names] here"
    ),
    "hooks": "the OpenAI Agents SDK's AgentHooks are callbacks=[adk.Callbacks(...)] here",
    "input_guardrails": (
        "the OpenAI Agents SDK's input guardrails are callbacks=[...] with a before_model "
        "callback that raises here"
    ),
    "output_guardrails": (
        "the OpenAI Agents SDK's output guardrails are callbacks=[...] with an after_model "
        "callback that raises here"
    ),
    **_CALLBACK_ARGUMENTS,
    "include_contents": (
        "Google ADK's include_contents is history_rewriter= (a function of the history "
        "entries) here"
    ),
    "global_instruction": (
        "Google ADK's global_instruction is a before_model callback given to "
        "Runner(agent, callbacks=[...]) here"
    ),
    "disallow_transfer_to_parent": (
        "Google ADK's disallow_transfer_to_parent is adk.with_sub_agents(parent, [...], "
        "allow_transfer_to_parent=False) here, chosen by the parent"
    ),
}
"""Another SDK's agent arguments a ported agent is given, with what they are here (the
``TypeError`` of ``prebuilt.ReActAgent``'s unknown keyword arguments says it)."""


def no_attribute(obj: object, name: str, hints: Mapping[str, str] = _HINTS) -> AttributeError:
    """The error for ``obj.name``, which does not exist, with where the Google ADK name went."""
    text = f"{type(obj).__name__!r} object has no attribute {name!r}"
    hint = hints.get(name)
    if hint is not None:
        text = f"{text}: {hint}"
    return AttributeError(text, name=name, obj=obj)


def install(cls: type, hints: Mapping[str, str] = _HINTS) -> None:
    """Give ``cls`` a property for each Google ADK name of ``hints`` it does not have, raising
    :func:`no_attribute` (so ``getattr(ctx, "state", None)`` and ``hasattr`` behave as for any
    missing attribute). Set or deleted, it raises the same error: a property without a setter
    said only "property of 'ModelRequest' object has no setter" (Python 3.11's words) to a
    ported ``llm_request.contents = [...]``."""
    for name in hints:
        if not any(name in vars(klass) for klass in cls.__mro__):
            read = _raiser(name, hints)
            setattr(cls, name, property(read, _write_raiser(read), read, doc=hints[name]))


def _raiser(name: str, hints: Mapping[str, str]) -> Callable[[object], NoReturn]:
    def read(obj: object) -> NoReturn:
        raise no_attribute(obj, name, hints)

    return read


def _write_raiser(read: Callable[[object], NoReturn]) -> Callable[[object, object], NoReturn]:
    def write(obj: object, value: object) -> NoReturn:
        read(obj)

    return write


class _Absent:
    """A name read from a class or its instances that raises the ``AttributeError`` Python
    would, with where the other SDK's name went: a property would be found on the class
    (``Runner.run_sync(agent, input)``, as the OpenAI Agents SDK calls it, then read as the
    property object, "'property' object is not callable")."""

    def __init__(self, name: str, hint: str) -> None:
        self.name = name
        self.hint = hint

    def __get__(self, obj: object, owner: type | None = None) -> NoReturn:
        if obj is None:
            name = owner.__name__ if owner is not None else "?"
            text = f"type object {name!r} has no attribute {self.name!r}: {self.hint}"
            raise AttributeError(text, name=self.name, obj=owner)
        raise no_attribute(obj, self.name, {self.name: self.hint})


def install_absent(cls: type, hints: Mapping[str, str]) -> None:
    """Give ``cls`` each name of ``hints`` it does not have, raising where it is read, from the
    class as from an instance."""
    for name, hint in hints.items():
        if not any(name in vars(klass) for klass in cls.__mro__):
            setattr(cls, name, _Absent(name, hint))
