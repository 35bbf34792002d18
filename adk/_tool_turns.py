"""The tool turns of a conversation a model API takes: each assistant message's tool calls
answered by the tool messages right after it, and each tool message answering a call of the
reply right before it, once. ``Runner.run`` checks its input with it (``runner.
_check_calls_answered``), ``ActionContext.send_event`` a ``ChatRequestEvent``'s messages: either
failed at the model (OpenAI, Anthropic: a 400), late (after a service's 200, or for that record
only), where the refusal here says where and what to do.

Called once the caller has seen a message with calls or a tool message: most conversations have
neither, and their check stays a plain loop in the caller (no frame of this module's)."""

from __future__ import annotations

from .messages import _ASSISTANT, _TOOL, Message

RUN_ADVICE = (
    "if its run paused there, resume its checkpoint; if its run was cut off (its reader stopped "
    "or was cancelled) and its messages were read before its events were closed, read them once "
    "closed (adk.run_messages takes a run whose events are open as still going, and answers the "
    "calls a cut left open once they are closed); or answer the call "
    "(Message.tool(result, tool_call_id=..., name=...) right after that message) or drop it "
    "from the input"
)
"""What to do about a run input's call that no tool message answers. This check cannot tell
where the input came from: a paused turn's messages (no result yet: its checkpoint's resume gives
one), a cut-off run's read while its events were still open (a reader cancelled between events,
not inside one, leaves the run's generator waiting at its ``yield``, which ``run_messages``
cannot tell from a run still going), or a history of the caller's own; so it says what to do in
each case."""

CHAT_ADVICE = (
    "answer the call (Message.tool(result, tool_call_id=..., name=...) right after that message) "
    "or drop it from the messages"
)
"""The same for a ``ChatRequestEvent``'s messages: no checkpoint is the action's to resume."""


def refusal(
    messages: list[Message], where: str, advice: str, *, events_hint: bool = True
) -> str | None:
    """Why a model API refuses ``messages`` for their tool turns, as a refusal naming the message
    (``f"{where} message {index}"``) and what to do; None when it takes them. An assistant
    message's call that no tool message right after it answers (a paused turn's messages kept
    and sent on, a cut-off run's read before it was closed): OpenAI "tool_call_ids did not have
    response messages", Anthropic "tool_use ids were found without tool_result blocks"; a tool
    message that answers no call of the reply right before it (an id no message made, a call
    answered already, a streaming run's ``event.message`` collected without the replies):
    OpenAI "messages with role 'tool' must be a response to a preceding message with
    'tool_calls'". A call is refused rather than answered with an error result as a cut-off
    run's own calls are (``runner._answer_open_calls``): it may be waiting on its checkpoint,
    whose resume answers it, and a made-up result would lose that. A result answers the call of
    the reply right before it, so a model that numbers its calls afresh in each reply
    (``call_0`` every time) is taken. One pass. ``events_hint``: a stray result's refusal says
    where a streaming run's whole conversation is (messages made from its events); not for a
    ``history_rewriter``'s answer, made from the history."""
    count = len(messages)
    index = 0
    while index < count:
        message = messages[index]
        if message.role == _TOOL:  # not right after an assistant message's calls
            return _stray_result(messages, index, None, where, events_hint)
        index += 1
        if not message.tool_calls or message.role != _ASSISTANT:
            continue
        asked = index - 1
        calls = message.tool_calls
        answered: dict[str | None, int] = {}
        while index < count and messages[index].role == _TOOL:
            call_id = messages[index].tool_call_id
            if call_id in answered:  # the call right before answered twice
                return _stray_result(messages, index, asked, where, events_hint)
            answered[call_id] = index
            index += 1
        call = next((c for c in calls if c.id not in answered), None)
        ids = {c.id for c in calls}
        if call is not None:
            late = _late_result(messages, index, call.id)
            if late is not None:  # answered, but another message comes between
                between = messages[index].role
                return (
                    f"{where} message {asked} (assistant) calls the tool {call.name!r} (call id "
                    f"{call.id!r}), answered by message {late} (tool), after message {index} "
                    f"({getattr(between, 'value', between)}), which model APIs refuse: move the "
                    f"tool messages that answer message {asked} right after it, no other message "
                    "between them"
                )
            # Tool messages there under other ids: the ids are what to look at, not a message
            # missing (a service that made its own ids for the results).
            others = sorted((i for i in answered if i not in ids), key=str)
            there = f" (the tool messages right after it answer the call ids {others})"
            there = there if others else ""
            return (
                f"{where} message {asked} (assistant) calls the tool {call.name!r} (call id "
                f"{call.id!r}) and no tool message right after it answers the call{there}, which "
                f"model APIs refuse: {advice}"
            )
        if len(answered) > len(ids):  # every call answered, and some other id too
            stray = min(at for i, at in answered.items() if i not in ids)
            return _stray_result(messages, stray, asked, where, events_hint)
    return None


def _late_result(messages: list[Message], start: int, call_id: str) -> int | None:
    """The index of the tool message at or after ``start`` that answers ``call_id``, a call of
    the assistant message whose run of tool messages ended before ``start``, or None: none
    before an assistant message that makes that id again (a model numbering its calls afresh
    per reply). (Only on a refusal.)"""
    for at in range(start, len(messages)):
        message = messages[at]
        if message.role == _TOOL and message.tool_call_id == call_id:
            return at
        if message.role == _ASSISTANT and any(c.id == call_id for c in message.tool_calls):
            return None
    return None


def _stray_result(
    messages: list[Message], index: int, asked: int | None, where: str, events_hint: bool = True
) -> str:
    """The refusal of ``messages[index]``, a tool message that answers no call of the assistant
    message right before its run of tool messages (``asked``; None: there is none): which call it
    answers a second time when an earlier message made it, else that no message right before it
    made its id. (Only on a refusal: the pass that finds it keeps no record of earlier calls.)"""
    call_id = messages[index].tool_call_id
    refused = "which model APIs refuse"
    drop = "drop it from the input" if where == "run input" else "drop it from the messages"
    for made in range(index - 1, -1, -1):  # the latest earlier call of that id
        earlier = messages[made]
        if earlier.role != _ASSISTANT or not any(c.id == call_id for c in earlier.tool_calls):
            continue
        first = next(
            (
                at
                for at in range(made + 1, index)
                if messages[at].role == _TOOL and messages[at].tool_call_id == call_id
            ),
            None,
        )
        if first is not None:
            return (
                f"{where} message {index} (tool) answers the call id {call_id!r} of message "
                f"{made} (assistant) a second time (message {first} answered it), {refused}: "
                f"{drop.replace('it', 'one of the two', 1)}"
            )
        break
    if asked is not None:
        ids = [c.id for c in messages[asked].tool_calls]
        return (
            f"{where} message {index} (tool) answers the call id {call_id!r}, which the assistant "
            f"message it follows (message {asked}) does not make (its call ids: {ids}), "
            f"{refused}: give it the id of the call it answers, or {drop}"
        )
    return (
        f"{where} message {index} (tool) answers the call id {call_id!r}, which no assistant "
        f"message right before it makes, {refused} (OpenAI: \"messages with role 'tool' must be "
        "a response to a preceding message with 'tool_calls'\"): put it right after the "
        f"assistant message whose call it answers, or {drop}"
        + (
            " (a streaming run's event.message is None for the model's replies: "
            "adk.run_messages(events) or result.messages gives the whole conversation)"
            if events_hint
            else ""
        )
    )
