"""Building an agent's input from the run's history.

An agent started by a flow or workflow sees the run's root input, then every recorded message in
order. Its own messages stay as they are; other agents' messages become user messages starting with
``For context:`` so one model does not mistake another's words for its own. The rewrite of an entry
is the same for every other reader, so it is made once and cached on the entry.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Collection, Sequence

from . import _tool_turns
from .agent import AgentInput
from .context import HistoryEntry, RunContext, _Entry
from .messages import Message, Role

_new = object.__new__
_TOOL = Role.TOOL  # an enum member read once: ``Role.TOOL`` is a metaclass lookup each time
_ASSISTANT = Role.ASSISTANT

__all__ = [
    "HistoryEntry",
    "HistoryRewriter",
    "build_input",
    "build_messages",
    "default_rewriter",
    "rewrite_message",
]


HistoryRewriter = Callable[[Sequence[HistoryEntry], str], list[Message]]
"""``(entries, agent_name) -> messages``: replaces the default rewriting for one reading agent."""


def rewrite_message(author: str, message: Message) -> Message:
    """Another agent's message as a user message that says who said or did what."""
    if message.role == _TOOL:
        text = f"For context: [{author}] `{message.name or 'tool'}` tool returned result: "
        text += f"{message.content}."
        return Message.user(text)
    parts = ["For context:"]
    if message.content:
        parts.append(f"[{author}] said: {message.content}.")
    for call in message.tool_calls:
        parts.append(f"[{author}] called tool: `{call.name}` with arguments: {call.arguments}.")
    if len(parts) == 1:
        # An empty reply (a model that answered with no text, or with reasoning only, which
        # other agents are not shown): a bare "For context:" told the reader nothing, not even
        # that the agent had answered. Said as what happened, so a supervisor or a later step
        # knows the agent gave nothing rather than wondering whether it ran.
        parts.append(f"[{author}] said nothing.")
    return Message.user(" ".join(parts))


def _input_without_tool(
    ctx: RunContext,
    agent_name: str,
    tool: str,
    since: Collection[str] = (),
    without: Collection[str] = (),
) -> list[Message]:
    """``build_messages(ctx, agent_name)`` with every call of the tool named ``tool`` and every
    result of it left out (a message left with nothing to say goes too). ``since``: names of
    agents; once one of them recorded a message, the input starts after the last such one,
    without the run's input (a ``PlanExecute`` delegated to again reads only what was said since
    its last turn, not what it was asked the times before). ``without``: names of agents whose
    messages are left out, carried ones included (a ``PlanExecute``'s own earlier turns, in a
    ``LoopAgent``'s next iteration or a conversation carried from run to run), but for the answer
    of each of their turns: the last of a run of their messages, when it says something and calls
    no tool or is a tool's result (``_answers``). What comes next (a critic's ``shorten it``, a
    user's ``Book it.``) refers to it.

    For bookkeeping that says nothing about the task: ``PlanExecute`` reads its objective from
    its planner's input, and under a ``Supervisor`` that input holds the supervisor's
    ``transfer_to_agent`` calls and their results ("Transferred to agent 'research'"), which
    every executor and replanner prompt would otherwise repeat as part of the objective. Read
    once per plan, so it rewrites without the cache ``_view`` keeps."""
    lane = ctx._lane
    entries = lane.entries if lane.parent is None else lane.snapshot()
    start = 0
    if since:
        for at in range(len(entries) - 1, -1, -1):
            if entries[at].agent_name in since:
                start = at + 1
                break
    messages = _carried_without_tool(lane.root, tool, since, without) if not start else []
    read = entries[start:] if start else entries
    answers = _answers(read, without) if without else None
    for at, entry in enumerate(read):
        if answers is not None and entry.agent_name in without and at not in answers:
            continue
        message = entry.message
        if message.role == _TOOL and message.name == tool:
            continue
        calls = message.tool_calls
        if calls and any(call.name == tool for call in calls):
            kept = [call for call in calls if call.name != tool]
            if not kept and not message.content:
                continue
            message = message.model_copy(update={"tool_calls": kept})
        if entry.agent_name != agent_name:
            message = rewrite_message(entry.agent_name, message)
        messages.append(message)
    return messages


def _answers(entries: Sequence[_Entry], without: Collection[str]) -> set[int]:
    """Where in ``entries`` the turns of the agents ``without`` names end with an answer: the
    last entry of each run of their entries, when it is a message with text and no tool call, or
    a tool's result (a return-directly tool's answer); a turn that ended on a call or saying
    nothing answered nothing."""
    kept: set[int] = set()
    last = len(entries) - 1
    for at, entry in enumerate(entries):
        if entry.agent_name not in without:
            continue
        if at < last and entries[at + 1].agent_name in without:
            continue
        message = entry.message
        if message.role == _TOOL or (
            message.role == _ASSISTANT and message.content.strip() and not message.tool_calls
        ):
            kept.add(at)
    return kept


def _carried_without_tool(
    root: Sequence[Message], tool: str, since: Collection[str], without: Collection[str] = ()
) -> list[Message]:
    """The run's input as ``_input_without_tool`` reads the history, for a conversation carried
    from run to run on ``result.messages``: there the earlier turns of a multi-agent run are the
    user messages ``rewrite_message`` made (``For context: [A] ...``), which are read in its words.
    A result of ``tool`` goes, and so does each call of it (a message left saying nothing too);
    with ``since``, the input starts after the last message one of those agents said, as the
    history does after their last entry, and a message one of ``without`` said goes, but for the
    last of a run of theirs when it is an answer (``For context: [A] said: ...`` and no call, or
    a tool's result), as ``_answers`` keeps it in the history. A message that is not in those
    words is kept as it is.

    A message's author is what it names before its first ``] `` (agent names are free text:
    ``desk [EU]``), and its calls are found by that author's words, so each is found by one
    search for its literal opening: a pattern tried at every `` [`` of a message, reading on to
    the next ``]``, cost a message of many `` [`` and no ``]`` its length squared (86 s of the
    event loop for 150 kB of a client's message). Arguments holding braces are no call of these
    words (a transfer's never do) and stay."""
    begin = 0
    if since:
        heads = tuple(f"{_CONTEXT}{name}] " for name in since)
        for at in range(len(root) - 1, -1, -1):
            if root[at].role == Role.USER and root[at].content.startswith(heads):
                begin = at + 1
                break
    returned = f"`{tool}` tool returned result: "
    kept: list[Message] = []
    read = root[begin:]
    authors = [_carried_author(message) for message in read] if without else None
    for at, message in enumerate(read):
        text = message.content
        if message.role == Role.USER and text.startswith(_CONTEXT):
            named = text.find("] ", len(_CONTEXT))
            if named >= 0:
                if text.startswith(returned, named + 2):
                    continue
                author = text[len(_CONTEXT) : named]
                if authors is not None and author in without:
                    following = authors[at + 1] if at + 1 < len(read) else None
                    if following in without or not _answered(text, named, author):
                        continue
                rest = _without_calls(text, author, tool)
                if rest != text:
                    if rest == "For context:":
                        continue
                    message = message.model_copy(update={"content": rest})
        kept.append(message)
    return kept


_CONTEXT = "For context: ["


def _carried_author(message: Message) -> str | None:
    """The author a carried message names (``For context: [A] ...``), or None."""
    text = message.content
    if message.role != Role.USER or not text.startswith(_CONTEXT):
        return None
    named = text.find("] ", len(_CONTEXT))
    return text[len(_CONTEXT) : named] if named >= 0 else None


def _answered(text: str, named: int, author: str) -> bool:
    """Whether a carried message of ``author`` (``rewrite_message``'s words, its author's name
    closed at ``named``) is an answer (``_answers``): it only says something, or it is a tool's
    result; not a call, nor saying nothing."""
    if text.startswith("`", named + 2):
        return text.find("` tool returned result: ", named + 3) >= 0
    return text.startswith("said: ", named + 2) and f" [{author}] called tool: " not in text


def _without_calls(text: str, author: str, tool: str) -> str:
    """``text`` (``rewrite_message``'s words, by ``author``) without its calls of ``tool``."""
    if f"] called tool: `{tool}` with arguments: {{" not in text:
        return text  # the common case: no pattern made
    said = re.escape(f" [{author}] called tool: ")
    name = re.escape(f"`{tool}` with arguments: {{")
    call = re.compile(said + name + r"[^{}]*\}\.(?=" + said + r"|\Z)")
    return call.sub("", text)


def _view(entry: _Entry, reader: str) -> Message:
    if entry.agent_name == reader:
        return entry.message
    cached = entry._as_context
    if cached is None:
        cached = entry._as_context = rewrite_message(entry.agent_name, entry.message)
    return cached


def default_rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
    """The default rewriting, for custom rewriters that want to adjust rather than replace it."""
    return [
        e.message
        if e.is_user_input or e.agent_name == agent_name
        else rewrite_message(e.agent_name, e.message)
        for e in entries
    ]


def build_messages(
    ctx: RunContext, agent_name: str, rewriter: HistoryRewriter | None = None
) -> list[Message]:
    """Root input plus this lane's recorded messages, as ``agent_name`` should see them."""
    return build_input(ctx, agent_name, rewriter).messages


def build_input(
    ctx: RunContext, agent_name: str, rewriter: HistoryRewriter | None = None
) -> AgentInput:
    """A lazily built input: the history as it stands now, rewritten only if the agent reads it.
    It starts with the lane's root input (``_Lane.root``): the run's, or a parent agent's."""
    lane = ctx._lane
    entries = lane.entries if lane.parent is None else lane.snapshot()  # the root lane: no call
    # A lazy input (see ``AgentInput``), its fields set here: one is made for every agent start,
    # and a classmethod to make it would cost more than the rest of this.
    value = _new(AgentInput)
    value._messages = None
    value._build = _messages_for
    value._build_args = (entries, len(entries), lane.root, agent_name, rewriter)
    value.enable_streaming = ctx.enable_streaming
    return value


def _is_history_view(input: AgentInput, ctx: RunContext) -> bool:
    """Whether ``input`` is the run's history as the framework hands it to an agent (built by a
    flow or workflow, or the run's own input at the root), rather than an input a parent agent
    made itself. A ``history_rewriter`` reshapes only the former: it shapes how an agent reads
    the history, not what a parent asks of it (PlanExecute's step prompt, a custom agent's)."""
    return input._build is not None or input._messages is ctx._run.root


def _messages_for(
    entries: list[_Entry],
    count: int,
    root: list[Message],
    agent_name: str,
    rewriter: HistoryRewriter | None,
) -> list[Message]:
    """The input messages of ``agent_name``: the root input, then the first ``count`` entries (the
    lane may have grown since the input was made)."""
    taken = entries[:count]
    if rewriter is not None:
        view = [HistoryEntry("", m, True) for m in root]
        view.extend(HistoryEntry(e.agent_name, e.message) for e in taken)
        return _rewritten(rewriter(view, agent_name), rewriter, agent_name)
    return [*root, *(_view(e, agent_name) for e in taken)]


def _check_rewriter(rewriter: object, where: str) -> None:
    """Refuse, where it is given, a ``history_rewriter`` that cannot be called as ``f(entries,
    agent_name)`` (a one-parameter ``lambda entries: ...``, as a port of Google ADK's
    ``include_contents`` or LangGraph's message trimmers writes it): called, it would fail the
    agent's every start with Python's "takes 1 positional argument but 2 were given", which names
    neither the hook nor its parameters. A callable whose signature cannot be read is taken as it
    is; a decorated one is checked as the wrapper that is called, as callbacks are."""
    if rewriter is None:
        return
    if not callable(rewriter):
        raise TypeError(
            f"{where}: history_rewriter must be a function f(entries, agent_name) -> "
            f"list[Message], got {type(rewriter).__name__}"
        )
    if inspect.iscoroutinefunction(rewriter) or inspect.iscoroutinefunction(
        type(rewriter).__call__  # an object whose ``async def __call__``
    ):
        raise TypeError(_async_refusal(where, rewriter))
    try:
        signature = inspect.signature(rewriter, follow_wrapped=False)
    except (TypeError, ValueError):
        return
    try:
        signature.bind("entries", "agent_name")
    except TypeError as exc:
        raise TypeError(
            f"{where}: history_rewriter {rewriter!r} cannot be called as f(entries, agent_name) "
            f"-> list[Message]: {exc}"
        ) from None


def _rewritten(messages: object, rewriter: HistoryRewriter, agent_name: str) -> list[Message]:
    """A rewriter's answer, if it is messages: what it returns goes to the agent's model as its
    input, where entries (``[e for e in entries if e.is_user_input]``, the entries rather than
    their ``message``) went unnoticed to a test model and failed a provider's adapter far from
    the rewriter, if it failed at all."""
    if isinstance(messages, list | tuple):
        wrong = next((m for m in messages if not isinstance(m, Message)), None)
        if wrong is None:
            kept = list(messages)
            if any(m.tool_calls or m.role == _TOOL for m in kept):
                _check_tool_turns(kept, rewriter, agent_name)
            return kept
        got = f"{type(wrong).__name__} among them"
        if isinstance(wrong, HistoryEntry):
            got += " (an entry's message is entry.message)"
    else:
        if inspect.isawaitable(messages):  # not known as async where it was given
            if inspect.iscoroutine(messages):
                messages.close()  # never to be awaited: no "was never awaited" warning
            raise TypeError(_async_refusal(f"agent '{agent_name}'", rewriter))
        got = type(messages).__name__
    raise TypeError(
        f"agent '{agent_name}': history_rewriter {rewriter!r} must return a list of Messages, "
        f"got {got}; adk.history.default_rewriter(entries, agent_name) is the default view"
    )


def _async_refusal(where: str, rewriter: object) -> str:
    """Why an async ``history_rewriter`` is refused: the input it shapes is built where nothing
    is awaited (lazily, when the agent reads ``input.messages``), so its coroutine could never run;
    a summary made by a model, what it is written async for, has two places that can await."""
    return (
        f"{where}: history_rewriter {rewriter!r} is async, and it must be a plain function "
        "f(entries, agent_name) -> list[Message]: it runs as the agent's input is built, where "
        "nothing is awaited. To summarise old turns with a model, do it before the run (in the "
        "messages you pass) or in an async before_model callback, which may change the call's "
        "request.messages (docs/agents.md, a long conversation)"
    )


_REWRITER_ADVICE = (
    "cut the conversation only before a user message, never between a model's tool calls and "
    "their results (docs/agents.md, a long conversation), or keep or drop a call and its results "
    "together"
)


def _check_tool_turns(messages: list[Message], rewriter: HistoryRewriter, agent_name: str) -> None:
    """Refuse a rewriter's answer that parts a model's tool call from its result (a trim by count,
    the tool results dropped to save tokens), as the run's own input is refused (``_tool_turns``):
    sent on, a model API answers 400 ("tool_call_ids did not have response messages", "messages
    with role 'tool' must be a response to a preceding message with 'tool_calls'") naming no
    rewriter, after the request was made. Only for an answer holding calls or results."""
    refused = _tool_turns.refusal(messages, "its", _REWRITER_ADVICE, events_hint=False)
    if refused is not None:
        raise ValueError(
            f"agent '{agent_name}': history_rewriter {rewriter!r} returned messages no model "
            f"can be sent: {refused}"
        )
