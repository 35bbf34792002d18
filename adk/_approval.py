"""The decisions that answer ``@tool(require_approval=True)``: what approves, what denies, and what
is neither.

Only a clear yes approves (``True``, a yes-word, alone or under ``"approved"``), so a value that
merely looks like one (``"false"``, ``1``) never lets a call through. A value that is neither a
clear yes nor a clear no — ``{"approve": True}`` with its key mistyped, Google ADK's
``{"confirmed": True}``, ``"maybe"`` — is not read as a no either: the runner refuses the resume
before anything runs (``check_decision``), so the checkpoint stays and the person's answer can be
sent again in the right shape. Read as a denial it would end the paused call for good and delete
the checkpoint, losing what the person decided.

A ``require_approval`` function decides per call whether to ask at all (``asks``): once, before
the pause, never on resume, where the decision (or the record that the call was cleared) stands.

One module for both sides: the tools that ask build their pause with ``approval_request`` and read
the answer with ``decision_of`` (``FunctionTool`` itself, as its own pause may follow an approval;
``MCPToolset``'s tools through ``gate``), and the runner checks resume data aimed at an approval
request with ``check_decision``.

An approval may edit the call: ``{"approved": True, "arguments": {...}}`` runs it with those
arguments instead of the model's (the whole set, as the request shows them). The tool executor
applies the edit (``edit_at``, ``edited_call``), so every tool gets it the same way, and checks it
against the tool's own validation (``_adk_check_arguments``) before anything runs, as the check
before a resume does; a tool that cannot check arguments refuses edits. The conversation keeps the
call as the model made it (its history is what the caller already saw) and the result tells the
model what ran (``edit_note``): a model that saw only its own call beside a result for other
arguments would take the result for its call's, or make the call again.
"""

from __future__ import annotations

import inspect
import json
import reprlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._checks import shown
from .interrupts import Interrupt, ResumeContext, _call_ids_named, join_address, tool_segment
from .messages import Message, ToolCall
from .tools.base import ToolContext, ToolError, ToolResult, _own_words

if TYPE_CHECKING:
    from .interrupts import _ResumePlan

__all__ = [
    "approval_request",
    "approves",
    "asks",
    "check_decision",
    "checked_arguments",
    "decision_of",
    "denial_at",
    "denied_calls",
    "deny_hint",
    "edit_at",
    "edit_note",
    "edited_call",
    "gate",
    "is_approval_request",
    "resumed_decision",
    "with_note",
    "without_note",
]

_YES = frozenset({"y", "yes", "true", "approve", "approved"})
_NO = frozenset({"n", "no", "false", "deny", "denied", "reject", "rejected"})
_REQUEST_KEYS = frozenset({"type", "tool", "arguments", "tool_call_id"})
_SHAPES = (
    'True or False, "yes" or "no", or {"approved": True or False, "reason": "..." (optional)}, '
    'or {"approved": True, "arguments": {...}} to run the call with edited arguments; None denies'
)
EDITED_SLOT = "edited"
"""Where a call that ran with edited arguments and then paused on its own keeps them: its next
resume runs it again, and the model's arguments in the conversation are not the ones approved."""

RAN_SLOT = "ran_arguments"
"""Where a call that paused keeps the arguments it ran with when a ``before_tool`` callback had
edited them (filled in a parameter the model does not give, say): the call the conversation and
the checkpoint keep is the model's (``tools._executor``), so the resume's checks before anything
runs (``checked_arguments``) would otherwise find the model's arguments unfit for the tool, and
refuse the resume as if the tool had changed since the pause. The resumed call's callbacks edit
the model's call again; the tool checks what it is then given."""


def is_approval_request(info: object) -> bool:
    """Whether a pending point's ``info`` is what ``require_approval`` pauses with."""
    return (
        isinstance(info, Mapping)
        and info.get("type") == "approval"
        and _REQUEST_KEYS.issubset(info.keys())
    )


def _verdict(value: object) -> bool | None:
    """True for a clear yes, False for a clear no (``None`` included), None for neither."""
    if value is True:
        return True
    if value is False or value is None:
        return False
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def _read(decision: object) -> tuple[bool | None, object]:
    """The verdict of a decision and its reason (None when it gives none)."""
    if isinstance(decision, Mapping):
        if "approved" not in decision:
            return None, None
        reason = decision.get("reason")
        if reason is not None and not isinstance(reason, str):
            return None, None
        return _verdict(decision["approved"]), reason
    return _verdict(decision), None


def check_decision(point_id: str, decision: object) -> None:
    """Refuse (``ValueError``) a decision that neither approves nor denies clearly, that
    approves with edited arguments that are not an object of JSON values, or that approves
    beside an edit under another key than ``"arguments"`` (``_misplaced_edit``). Whether the
    edit fits the tool is checked where the tool is known (``edited_call``)."""
    verdict = _read(decision)[0]
    if verdict is None:
        shown = reprlib.repr(decision)
        # One point pending, a mapping of no point id is its data: {"call_1": True} is the
        # answer keyed by the call's id (LangGraph's way), said so.
        keyed = _call_ids_named(list(decision), [point_id]) if isinstance(decision, Mapping) else ""
        raise ValueError(
            f"resume data for approval point {point_id!r} is not a decision: {shown}; "
            f"expected {_SHAPES}{keyed}. Nothing ran and the checkpoint is kept"
        )
    if verdict and isinstance(decision, Mapping):
        if "arguments" in decision:
            _edit_text(point_id, decision["arguments"])
        elif (key := _misplaced_edit(decision)) is not None:
            raise ValueError(
                f"resume data for approval point {point_id!r} approves beside an object under "
                f"{key!r}, which is not where an edit goes: {reprlib.repr(decision)}; to run the "
                'call with edited arguments, send {"approved": True, "arguments": {...}} with '
                'every argument of the call (LangChain\'s edited_action "args"), or approve '
                "without it. Nothing ran and the checkpoint is kept"
            )


# Keys under which another framework's edit, or "arguments" misspelled, carries edited arguments:
# LangChain's edit decision ("edited_action" with its "args"), Google ADK's confirmation
# "payload". A yes beside one of them, holding an object, ran the call with the model's
# arguments: the person's change dropped without a word, since the other keys of a decision are
# the caller's own (who approved, when) and left alone.
_EDIT_KEYS = frozenset(
    {"args", "edited_action", "edited_args", "edited_arguments", "edit", "payload", "params"}
)


def _misplaced_edit(decision: Mapping[Any, Any]) -> str | None:
    """The key of ``decision`` (a yes without ``"arguments"``) that holds an object and names an
    edit (``_EDIT_KEYS``, or "arguments" in another case or misspelled), or None."""
    for key, value in decision.items():
        if not isinstance(key, str) or not isinstance(value, Mapping):
            continue
        folded = key.strip().lower()
        if folded in _EDIT_KEYS or _distance(folded, "arguments") <= 2:
            return key
    return None


def _distance(a: str, b: str) -> int:
    """The edit distance of two short strings (letters inserted, deleted or replaced): a key two
    typing slips from "arguments" ("arguements", "arugments") is taken for it."""
    if abs(len(a) - len(b)) > 2:
        return 3  # further than any slip counted (the keys are short; nothing to compute)
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        before, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            before, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, before + (x != y))
    return row[-1]


def _edit_text(point_id: str, arguments: object) -> str:
    """The JSON text of edited ``arguments``; ``ValueError`` if they are not a JSON object (they
    replace the call's arguments, and are saved if the call pauses again)."""
    problem = None
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        problem = "they are not an object of the call's arguments by name"
    else:
        try:
            return _json(arguments)
        except (TypeError, ValueError) as exc:
            problem = f"they are not JSON values ({exc})"
    raise ValueError(
        f"edited arguments for approval point {point_id!r} cannot be used: {problem}: "
        f'{reprlib.repr(arguments)}; expected {{"approved": True, "arguments": {{"name": '
        "value, ...}} with every argument of the call. Nothing ran and the checkpoint is kept"
    )


def _json(arguments: Mapping[str, Any]) -> str:
    """Edited arguments as the JSON text the tool gets and the note shows (readable: not ASCII
    escaped)."""
    return json.dumps(dict(arguments), allow_nan=False, ensure_ascii=False)


def _unchanged(call: ToolCall, arguments: object) -> bool:
    """Whether ``arguments`` are the model's own: a form that always sends them back (prefilled
    with the request's) edits nothing, and the model is told nothing."""
    try:
        return bool(json.loads(call.arguments or "{}") == arguments)
    except ValueError:
        return False


def edit_at(plan: _ResumePlan, address: str, call: ToolCall, data: object) -> object:
    """The edited arguments a resumed ``call`` at ``address`` runs with, or None (not edited).

    Answering this call's approval request: the decision ``data``'s arguments, unless they are
    the model's own or those the request showed; for a plain yes (or those shown), the edit the
    request showed when it asked again for an edited call (``EDITED_SLOT``: a ``before_tool``
    callback paused the edited call, and the tool asked again past it); for a denial, none.
    Otherwise the arguments it ran with before it paused again (``EDITED_SLOT``), whoever paused
    it: its function, or a callback, whose answer is never read as a decision (a callback may
    pause with an approval request's shape). Without the slot read after a callback's pause,
    the edit was dropped there: the approval asked again showed the model's arguments, and a
    yes ran those, which the person had changed."""
    saved = plan.resume_for(address, EDITED_SLOT)
    edit = saved.state if saved is not None else None
    if plan.callback_at(address) is None:
        info = plan.info_at(address)
        if is_approval_request(info) and info.get("tool_call_id") == call.id:
            if not approves(data)[0]:
                return None
            if isinstance(data, Mapping) and "arguments" in data:
                given = data["arguments"]
                if given == info.get("arguments"):
                    # Sent back as the request showed them (a form prefilled with them): a
                    # plain yes. They hold the defaults the model left out, so they differ
                    # from its call's and were taken for an edit nobody made.
                    return edit
                return None if _unchanged(call, given) else given
    return edit


def checked_arguments(plan: _ResumePlan, address: str, call: ToolCall, tool: object) -> str:
    """The arguments the resume's checks before anything runs (``_preflight``,
    ``tools._executor.check_resumed_calls``) give a paused ``call``'s tool: a person's edit
    (``ValueError`` if it does not fit), else those it ran with when it paused, if a callback had
    edited them (``RAN_SLOT``), else the model's."""
    resume = plan.resume_for(address)
    if resume is not None and resume.is_target:
        edit = edit_at(plan, address, call, resume.data)
        if edit is not None:
            return edited_call(tool, call, address, edit).arguments
    saved = plan.resume_for(address, RAN_SLOT)
    ran = saved.state if saved is not None else None
    return ran if isinstance(ran, str) else call.arguments


class _EditedCall(ToolCall):
    """A call as it runs with a person's edited arguments: what the hooks and the tool see. Its
    type tells tracing the arguments were edited; it shows as the ``ToolCall`` it is."""

    def __repr_name__(self) -> str:
        return "ToolCall"


def edited_call(tool: object, call: ToolCall, address: str, arguments: object) -> ToolCall:
    """``call`` with the edited ``arguments``, checked as the tool checks its arguments
    (``_adk_check_arguments``: the problems, or None); ``ValueError`` if they do not fit, or the
    tool cannot check them. Raised before anything of the resumed round runs."""
    text = _edit_text(address, arguments)
    check = getattr(tool, "_adk_check_arguments", None)
    if check is None:
        raise ValueError(
            f"the approval of {address!r} edits the arguments of tool '{call.name}', which "
            "cannot check edited arguments (only function tools and MCP tools can): approve it "
            "without arguments, or deny it. Nothing ran and the checkpoint is kept"
        )
    problems = check(text)
    if problems is not None:
        raise ValueError(
            f"the edited arguments for approval point {address!r} do not fit tool "
            f"'{call.name}': {problems}. Nothing ran and the checkpoint is kept; resume again "
            "with arguments that fit"
        )
    return _EditedCall(id=call.id, name=call.name, arguments=text)


def edit_note(arguments: str) -> str:
    """What the tool result starts with for the model about a call a person edited (the line
    before the result's content)."""
    return f"[A person edited this call's arguments before it ran; it ran with {arguments}]\n"


def with_note(edit: object, content: str) -> str:
    """A resumed call's result ``content`` for the model, after the note of the person's ``edit``
    (``edit_note``): the edit the person made, not the arguments a ``before_tool`` callback then
    left (the model is shown no callback's edit of any call), and the note ``without_note`` takes
    off. ``edit`` is one ``edited_call`` took (an object of arguments by name)."""
    if not isinstance(edit, Mapping):  # edited_call refuses any other before the call runs
        raise TypeError(f"an edit is an object of arguments by name, not {type(edit).__name__}")
    return f"{edit_note(_json(edit))}{content}"


def without_note(message: Message) -> None:
    """Take the ``edit_note`` off a tool result that is not for a model to read: one returned
    directly, which is the agent's output (parsed for an ``output_schema``, stored under an
    ``output_key``). Its metadata still holds the edit."""
    edit = message.metadata.get("edited_arguments")
    if edit is not None:
        note = edit_note(_json(edit))
        message.content = message.content.removeprefix(note)


async def asks(
    check: Callable[[ToolContext, dict[str, Any]], bool | Awaitable[bool]],
    ctx: ToolContext,
    arguments: dict[str, Any],
) -> bool:
    """Whether a ``require_approval`` function says this call needs a person's approval: its
    answer, awaited if it is awaitable. Asked once per call, before the pause (a resumed call's
    decision, or its record of having been cleared, stands: the function is not asked again).

    A function that fails, pauses, or answers anything but True or False fails the call with a
    ``ToolError`` (the error result the model reads) and the tool does not run: neither a
    payment through a broken check nor a run crashed by one. Strict on the answer for the reason
    ``check_decision`` is: a ``"no"`` or a ``0`` taken for its truth would approve or ask by
    accident."""
    # pyadk's words, kept on the call's execute_tool span without content capture (what they
    # quote of the function's, its exception's text or its answer, left out there): a broken
    # check is told from the tool's own failure in a trace.
    function = f"the require_approval function of tool '{ctx.tool_name}'"
    try:
        answer = check(ctx, arguments)
        if inspect.isawaitable(answer):
            answer = await answer
    except Interrupt:
        raise _own_words(
            ToolError(
                f"{function} raised Interrupt, so the call did not run; it answers True (pause "
                "the call for approval) or False"
            )
        ) from None
    except Exception as exc:
        kind = type(exc).__name__
        problem = f"{kind}: {exc}" if str(exc) else kind
        raise _own_words(
            ToolError(f"{function} failed ({problem}), so the call did not run"),
            f"{function} failed ({kind}), so the call did not run",
        ) from exc
    if type(answer) is not bool:
        raise _own_words(
            ToolError(
                f"{function} answered {shown(answer)}, not True or False, so the call did not run"
            ),
            f"{function} answered a {type(answer).__name__}, not True or False, so the call did "
            "not run",
        )
    return answer


def approves(decision: Any) -> tuple[bool, str | None]:
    """Whether ``decision`` approves, and the reason it gives. Anything but a clear yes denies
    (the runner has already refused what is neither, see ``check_decision``)."""
    verdict, reason = _read(decision)
    return verdict is True, reason if isinstance(reason, str) and reason else None


def approval_request(tool: str, arguments: Any, ctx: ToolContext) -> dict[str, Any]:
    """The info a call pauses with to ask for approval (``is_approval_request`` recognises it).
    ``arguments`` must be JSON values: the request is saved in the checkpoint."""
    return {
        "type": "approval",
        "tool": tool,
        "arguments": arguments,
        "tool_call_id": ctx.tool_call_id,
    }


class _Denial(ToolResult):
    """The error result a denied call returns. A result like any other for the model and for
    callbacks; its type tells tracing that a person said no, which is not the tool failing."""

    def __repr_name__(self) -> str:  # shown as what it is to its readers: a ToolResult
        return "ToolResult"

    def __eq__(self, other: object) -> bool:
        """Equal to the ``ToolResult`` it shows as (pydantic's equality wants the same class):
        the type is for tracing only. Python asks the subclass first, so ``ToolResult(...) ==
        denial`` lands here too."""
        if type(other) is ToolResult or type(other) is _Denial:
            return self.__dict__ == other.__dict__
        return NotImplemented

    __hash__ = ToolResult.__hash__  # defining __eq__ would otherwise drop it


def decision_of(resume: ResumeContext, info: Any, ctx: ToolContext) -> ToolResult | bool | None:
    """A resumed call's approval decision: ``True`` if approved, the error result a denial
    returns, or None if its pause was not this call's approval request (the tool paused on its
    own, and the resume data is its answer)."""
    if not (is_approval_request(info) and info.get("tool_call_id") == ctx.tool_call_id):
        return None
    approved, reason = approves(resume.data)
    if approved:
        return True
    return _denial(ctx.tool_name, reason)


def _denial(tool: str, reason: str | None) -> _Denial:
    text = f"Error: the call to '{tool}' was not approved"
    return _Denial(content=f"{text}: {reason}" if reason else text, is_error=True)


def _approval_at(plan: _ResumePlan, address: str, call: ToolCall) -> bool:
    """Whether the point at ``address`` is ``call``'s own approval request (not a ``before_tool``
    callback's pause, whose answer is the callback's, nor the tool's own question)."""
    if plan.callback_at(address) is not None:
        return False
    info = plan.info_at(address)
    return is_approval_request(info) and info.get("tool_call_id") == call.id


def denial_at(plan: _ResumePlan, address: str, call: ToolCall) -> ToolResult | None:
    """The result of a resumed ``call`` at ``address`` that this resume denies (its approval
    request answered with a no: ``None`` data included), else None. A denied call never runs, so
    it needs no tool: the resume's checks do not ask for it (``denied_calls``), and the executor
    answers a denied call whose tool is gone (removed or renamed since the pause, an MCP
    server's while it is down) with this, as the tool would have. Reads the resume's data
    without marking the point reached (``_ResumePlan.resume_for`` does, when the call runs)."""
    if address not in plan.targets or not _approval_at(plan, address, call):
        return None
    approved, reason = approves(plan.targets[address])
    return None if approved else _denial(call.name, reason)


def denied_calls(
    plan: _ResumePlan | None, base: str, calls: Sequence[ToolCall]
) -> set[tuple[str, str]]:
    """The ``(name, id)`` of those ``calls`` (addressed below ``base``) that this resume denies
    (``denial_at``): they need no tool to be answered. By name and id, as their points are: a
    checkpoint from before calls got ids of their own may hold two tools' calls of one id, and
    a denial of one is no answer for the other."""
    if plan is None:
        return set()
    return {
        (call.name, call.id)
        for call in calls
        if denial_at(plan, join_address(base, tool_segment(call.name, call.id)), call) is not None
    }


def deny_hint(plan: _ResumePlan | None, base: str, calls: Sequence[ToolCall]) -> str:
    """What a refusal of a resume whose paused ``calls`` (below ``base``) need a tool gone adds
    for those of them awaiting approval: a denial closes them without the tool (an approval or
    an edit cannot: nothing could run the call). Empty when none awaits approval."""
    if plan is None:
        return ""
    points = [
        address
        for call in calls
        if _approval_at(plan, address := join_address(base, tool_segment(call.name, call.id)), call)
    ]
    if not points:
        return ""
    shown = ", ".join(repr(point) for point in points)
    return (
        f"; a denial needs no tool: deny the approval of {shown} to close "
        f"{'it' if len(points) == 1 else 'them'} without it (the model gets the 'not approved' "
        "result and the run goes on); an approval or an edit waits for the tool"
    )


async def gate(
    tool: str,
    arguments: dict[str, Any],
    ctx: ToolContext,
    check: Callable[[ToolContext, dict[str, Any]], bool | Awaitable[bool]] | None = None,
    invalid: Callable[[], str | None] | None = None,
) -> ToolResult | None:
    """For a tool that cannot pause on its own (an MCP server's): pause the call for a person's
    decision (``Interrupt`` with the approval request as its info), unless ``check`` (a
    ``require_approval`` function) says it needs none; on resume, ``None`` to go on if approved,
    else the error result the model reads. A resume of any other pause at this call asks again,
    so nothing runs unapproved. A resumed call's decision stands without asking ``check`` again
    (see ``asks``). ``invalid`` says what is wrong with the call's arguments (its tool's input
    schema), or None: a call it refuses is the model's to correct (its error result), before
    ``check`` or a person is asked, as a function tool's invalid arguments are."""
    decision = resumed_decision(ctx)
    if decision is True:
        return None
    if isinstance(decision, ToolResult):
        return decision
    if invalid is not None:
        problem = invalid()
        if problem is not None:
            return ToolResult.error(f"invalid arguments for tool '{tool}': {problem}")
    if check is not None and not await asks(check, ctx, dict(arguments)):
        return None
    raise Interrupt(approval_request(tool, arguments, ctx))


def resumed_decision(ctx: ToolContext) -> ToolResult | bool | None:
    """``decision_of`` for a call being resumed (None when it is not, or its pause was not this
    call's approval request). A tool applies it whether or not it still asks for approval: a
    denial must hold after a redeploy that stopped asking (the call would otherwise run)."""
    plan = ctx.run_context._run.plan
    if plan is None:
        return None
    resume = plan.resume_for(ctx.address)
    if resume is None:
        return None
    return decision_of(resume, plan.info_at(ctx.address), ctx)
