"""What a paused ``ReActAgent`` saves, and how resume rebuilds its conversation from it.

The state holds the open tool calls, the held results (return-directly and exit), the requested
actions and the conversation without the messages the checkpoint's history holds anyway. The driver
records every message the agent emits in the history, and the runner (or an ``AgentTool``) saves
that history next to this state; the input came from the lane's root input (``_Lane.root``: the
run's, or the one a parent gave the lane, ``PlanExecute``'s step prompt, which its step renders
again on resume from the state it saved) and the history too. So the state keeps only what the
history cannot give back:

- ``given``: the input when it cannot be derived (a ``history_rewriter`` is user code and is not
  run again; an input that is not the lane's root plus the history as this agent reads it, e.g. one
  a custom parent made), else ``[]``. The system prompt is not saved: it is configuration, not
  conversation, so the resume renders the agent's current instruction (with the session values as
  they are then) in its place, as a fresh run would. Checkpoints of earlier versions saved it as the
  start of ``head`` (the system prompt, then the input when it could not be derived), or of
  ``messages``; their saved prompt is replaced by the current one too (see ``_saved_prompt``);
- ``input``: ``{"root": n, "seen": [[agent, run_path, count], ...]}``: the lane's ``n`` root
  input messages, then the first ``count`` history entries of each recorder, in history order,
  viewed as this agent reads them (``rewrite_message`` for other agents). Earlier versions
  compared the input with the run's root input even in a lane of its own, so the agents of a
  workflow in a ``PlanExecute`` role saved their whole input as ``given`` (which still resumes);
  none saved an ``input`` there, as such an input begins with the step prompt, not the run's;
- ``own`` and ``tail``: what the loop added: ``own = [agent, run_path, first]`` names the recorder
  of the agent's emitted messages and the index of the first one among its entries; ``tail`` lists
  the loop's messages in order, an int ``n`` standing for the next ``n`` of those entries and a
  message for one that was never emitted (a structured-output retry prompt, a held result);
- ``held_at`` (or ``held``, results that are not objects of the conversation): the held results'
  positions in the conversation without its system prompt (with it in earlier versions' ``head``
  and ``messages`` states, whose saved prompt ``_saved_prompt`` counts);
- ``schema_retried`` (only when true; ``ReActAgent`` adds it): the run already used its one retry
  for an answer off the output schema;
- ``exits`` (only when some): the call ids of held results whose tools asked to exit; they are
  emitted after the other held results, the last of them the agent's final output. (Older
  checkpoints lack it: their exit results were emitted before the pause, and the resume holds
  the exit tool's to come last again, ``exits_shown``.)

- ``done`` (only in a checkpoint a resume rewrote, ``adk.checkpoint._progress``): the calls of
  the paused round that a resume finished before it failed or was left, in the order they
  finished, each ``{"id", "tool", "message", "action"}`` (the call id, the tool's name for its
  event, its result message, the actions it asked for as ``action`` is saved). A later resume
  replays them, in that order, instead of running the calls again. The rest of the state is the
  pause's: the checkpoint's history and points are the pause's too.

Entries are named by recorder ``(agent, run_path)`` and index among that recorder's entries, not by
position: a position in a parallel branch's view shifts once the branches' lanes merge, while one
recorder writes to one lane, so its entries keep their order through merges and through the
checkpoint, and the history only grows. Every reference is checked against the history now,
message by message, so the rebuilt conversation equals the one the agent had; whatever does not
match is saved as a message. The state no longer grows with the conversation: a long one adds a few
integers, not its messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import adk
from adk import AgentAction, CheckpointError, Message, Role, RunContext, ToolCall
from adk.checkpoint._state import SavedState
from adk.history import rewrite_message

_SAVE_WHOLE_CONVERSATION = False
"""Save the whole conversation at a pause, as versions before the state referred to the history
did (tests write such checkpoints with it to check that they still resume, and as the reference)."""

_SAVE_SYSTEM_PROMPT = False
"""Save the system prompt at the start of ``head``, as versions before the resume rendered the
current instruction did (tests write such checkpoints with it to check that they still resume)."""

SavedHead = tuple[list[Message], dict[str, Any] | None]
"""How a pause saves the input: ``given`` and ``input`` of the state (see above).

Worked out at the first pause and then kept (a resumed agent keeps the one it was saved with): the
history only grows, so what derived the input once still does."""


class Restored(NamedTuple):
    """The conversation rebuilt on resume and what the agent keeps with it.

    ``messages[:head_size]`` is the conversation's start (the system prompt given to ``restore``,
    then the input); ``saved_head`` is how a later pause saves the input; ``held`` the held
    results (return-directly and exit), objects of ``messages``.
    """

    messages: list[Message]
    head_size: int
    saved_head: SavedHead
    held: list[Message]


def pause_state(
    ctx: RunContext,
    agent: str,
    *,
    iterations: int,
    open_ids: list[str],
    held: list[Message],
    exits: list[str] | None,
    action: AgentAction | None,
    messages: list[Message],
    head_size: int,
    system_size: int,
    saved_head: SavedHead | None,
    input_rewritten: bool,
) -> tuple[dict[str, Any], SavedHead | None]:
    """What agent ``agent`` saves when a tool interrupts it, and the saved head to keep.

    ``messages[:head_size]`` is the conversation's start, its first ``system_size`` the system
    prompt; ``input_rewritten`` says a ``history_rewriter`` made the input (so it is saved as it
    is). ``saved_head`` is the one kept from an earlier pause, if any.
    """
    state: dict[str, Any] = {
        "iterations": iterations,
        "open": open_ids,
        "action": _action_state(action),
    }
    if exits:
        state["exits"] = exits
    if _SAVE_WHOLE_CONVERSATION:
        state.update(messages=messages, held=held)
        return state, saved_head
    entries = ctx._lane.snapshot()
    if saved_head is None:
        given = messages[system_size:head_size]
        spec = None
        if not input_rewritten:
            spec = _input_spec(entries, ctx._lane.root, given, agent)
        saved_head = ([], spec) if spec is not None else (given, None)
    given, spec = saved_head
    own, tail = _tail_spec(entries, messages[head_size:])
    state.update(given=given, input=spec, own=own, tail=tail)
    start = system_size  # positions count from the input: the system prompt is not saved
    if _SAVE_SYSTEM_PROMPT:
        del state["given"]
        state["head"] = [*messages[:system_size], *given]
        start = 0
    positions = {id(m): i - start for i, m in enumerate(messages)}
    held_at = [positions.get(id(m)) for m in held]
    if None in held_at:  # not objects of the conversation: keep them as they are
        state["held"] = held
    else:
        state["held_at"] = held_at
    return state, saved_head


def restore(ctx: RunContext, agent: str, state: dict[str, Any], system: list[Message]) -> Restored:
    """Rebuild the conversation agent ``agent`` saved at the pause, with its held results.

    ``system`` is the system prompt to start it with, rendered now from the agent's current
    instruction: it replaces the one earlier versions saved. Reads the current state, the one
    that saved the system prompt in ``head``, and the one that held the whole conversation as
    ``messages`` (checkpoints written before the history stopped being repeated). A state of
    another shape or that does not fit the checkpoint's history is a ``CheckpointError``
    (``"incompatible"``).
    """
    try:
        held_base = 0  # where the conversation ``held_at`` counts from begins, past a saved prompt
        if "messages" in state:
            saved = _messages(state["messages"])
            held_base = _saved_prompt(saved, ctx._lane.root)
            rest = saved[held_base:]
            head_size = len(system) + len(rest)
            saved_head: SavedHead = (rest[:], None)  # a copy: the loop appends to messages
        else:
            entries = ctx._lane.snapshot()
            spec = state.get("input")
            if "given" in state:
                given = _messages(state["given"])
            else:  # ``head``: the saved system prompt, then the input if it was not derivable
                given = _messages(state["head"])
                # With an ``input`` spec, the head was the prompt alone.
                held_base = len(given) if spec is not None else _saved_prompt(given, ctx._lane.root)
                given = given[held_base:]
            saved_head = (given, spec)
            rest = list(given)
            if spec is not None:
                rest += _load_input(entries, ctx._lane.root, spec, agent)
            head_size = len(system) + len(rest)
            rest += _load_tail(entries, state.get("own"), state["tail"])
        messages = [*system, *rest]
        if "held_at" in state:
            held = [rest[_index(_index(i, None) - held_base, len(rest))] for i in state["held_at"]]
        else:
            held = [_in_conversation(messages, m) for m in _messages(state.get("held", []))]
        return Restored(messages, head_size, saved_head, held)
    except _BadState as exc:
        raise CheckpointError(
            f"agent '{agent}': cannot rebuild its conversation from the checkpoint: {exc}",
            reason="incompatible",
        ) from None
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(
            # Whole (its checksum matched): a state of another shape, not broken bytes.
            f"agent '{agent}': the checkpoint holds a ReAct state this pyadk's ReActAgent does "
            f"not read (another release's, or another agent's under its name): {exc!r}",
            reason="incompatible",
        ) from None


def saved_action(saved: SavedState) -> AgentAction | None:
    """The actions the paused round's finished calls had requested (exit, transfer, break)."""
    return _read_action(saved, saved.values.get("action"))


def _read_action(saved: SavedState, value: Any) -> AgentAction | None:
    if not value:
        return None
    if not (
        isinstance(value, dict)
        and set(value) <= {"exit", "transfer_to", "break_loop"}
        and type(value.get("exit", False)) is bool
        and type(value.get("break_loop", False)) is bool
        and isinstance(value.get("transfer_to"), str | None)
    ):
        raise saved.error(f"'action' is not a saved action: {value!r}")
    return AgentAction(**value)


def open_calls(saved: SavedState, messages: list[Message]) -> list[ToolCall]:
    """The tool calls the pause left open, from the rebuilt conversation's last tool-calling
    message: those the resume runs (again, or with the person's answer), or replays if an
    earlier resume recorded them (``recorded_calls``); ``check_tools`` checks the others'
    tools."""
    open_ids = set(saved.names("open"))
    assistant = next((m for m in reversed(messages) if m.tool_calls), None)
    calls = [c for c in assistant.tool_calls if c.id in open_ids] if assistant is not None else []
    if not open_ids or open_ids - {c.id for c in calls}:
        raise saved.error(
            f"the open tool calls {sorted(open_ids)} are not the calls its conversation ends with"
        )
    return calls


def check_tools(
    saved: SavedState,
    calls: Sequence[ToolCall],
    recorded: Sequence[Recorded],
    tools: Mapping[str, object] | None,
    ctx: RunContext,
) -> None:
    """Refuse a resume whose open ``calls`` that must still run need a tool not among
    ``tools``: one gone since the pause (a changed ``Toolset``, code deployed in between) would
    answer "unknown tool" and drop the person's answer, so that is a ``CheckpointError`` (the
    checkpoint is kept, to resume once the tool is back). A call an earlier resume ``recorded``
    is replayed from its record and needs no tool: a checkpoint whose every call was recorded
    resumes after its tools were removed. Nor does a call this resume denies
    (``adk._approval.denied_calls``): it never runs, and the executor answers it with the
    denial. ``tools`` None: not all known (``ReActAgent``'s check before a resume), not
    checked."""
    if tools is None:
        return
    missing = [c for c in calls if c.name not in tools]
    if not missing:  # the common case: nothing more to read
        return
    plan = ctx._run.plan
    finished = {done.call.id for done in recorded}
    denied = adk._approval.denied_calls(plan, ctx.address, missing)
    missing = [c for c in missing if c.id not in finished and (c.name, c.id) not in denied]
    if missing:
        names = sorted({c.name for c in missing})
        raise saved.error(
            f"the paused calls need tools it no longer has: {', '.join(names)} (removed or "
            "renamed since the pause, or a toolset's not offered now, as an optional MCP "
            "server's while it cannot be used: the checkpoint is kept, to resume once they "
            f"are back){adk._approval.deny_hint(plan, ctx.address, missing)}"
        )


class Recorded(NamedTuple):
    """A call of the paused round that an earlier resume finished (``done`` of the state)."""

    call: ToolCall
    message: Message
    action: AgentAction | None
    tool_name: str


def recorded_calls(saved: SavedState, calls: Sequence[ToolCall]) -> list[Recorded]:
    """The open ``calls`` an earlier resume of this checkpoint finished, with what they produced,
    in the order they finished (none unless a resume recorded some). Anything else than entries
    of open calls, each once, with a tool message answering its call, is a ``CheckpointError``."""
    entries = saved.values.get("done")
    if entries is None:
        return []
    by_id = {call.id: call for call in calls}
    if not isinstance(entries, list):
        raise saved.error(f"'done' is not a list of finished calls: {entries!r}")
    out: list[Recorded] = []
    for entry in entries:
        if not (
            isinstance(entry, dict)
            and entry.keys() == {"id", "tool", "message", "action"}
            and isinstance(entry["id"], str)
            and isinstance(entry["tool"], str)
            and isinstance(entry["message"], Message)
        ):
            raise saved.error(f"'done' holds no finished call: {entry!r}")
        call = by_id.pop(entry["id"], None)
        message = entry["message"]
        if call is None or message.role != Role.TOOL or message.tool_call_id != call.id:
            raise saved.error(
                f"'done' names call {entry['id']!r}, which is not an open call of the round (or "
                "is named twice), or its result does not answer it"
            )
        action = _read_action(saved, entry["action"])
        out.append(Recorded(call, message, action, entry["tool"]))
    return out


def record_entry(call_id: str, tool_name: str, message: Message, action: AgentAction | None) -> Any:
    """One entry of ``done``: a copy of the result (a held result's note is taken off later)."""
    return {
        "id": call_id,
        "tool": tool_name,
        "message": message.model_copy(deep=True),
        "action": _action_state(action),
    }


def saved_exits(saved: SavedState) -> list[str]:
    """The call ids of the held results whose tools asked to exit (none in older checkpoints)."""
    return saved.names("exits", default=[])


def exits_shown(
    exits: list[str], action: AgentAction | None, messages: list[Message], exit_tool: str | None
) -> list[Message] | None:
    """The results of the exit tool (named ``exit_tool``) that the paused round emitted before its
    pause, objects of ``messages``: those the saved ``exits`` do not name. None when there are
    none, as for every state saved by pyadk since 25 Nov (c109aff), which holds an exit result
    back and names it in ``exits``.

    A compatibility path for the states of an older pyadk, and for a later pause of such a round
    (saved as that pyadk saved it, the results of tools that asked to exit since in ``exits``):
    kept while checkpoint format version 1 is read (docs/interrupts.md, "Upgrading pyadk while
    runs are paused"), removable only with a bump of the version.

    Such a round's exit result was emitted as it came, so the resumed calls' results came after
    it and the last of them was taken for the agent's final output (and its ``output_key``), not
    the exit's ``final_result``. The resume holds these results to come last, as it holds an exit
    result saved now; they are in the history already and are not recorded again. Only the exit
    tool's are known: a tool of the user's calling ``ctx.exit()`` is not told apart by such a
    state, so its result stays where it was emitted."""
    if exit_tool is None or action is None or not action.exit:
        return None
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].tool_calls), None)
    if at is None:
        return None
    ids = {call.id for call in messages[at].tool_calls if call.name == exit_tool}
    ids.difference_update(exits)  # held back at the pause, restored as held results
    if not ids:
        return None
    shown = [
        m
        for m in messages[at + 1 :]
        if m.role == Role.TOOL and m.tool_call_id in ids and not m.metadata.get("is_error")
    ]
    return shown or None


_Recorder = tuple[str, tuple[str, ...]]
"""Who recorded a history entry: ``(agent_name, run_path)``."""


class _BadState(Exception):
    """The saved state does not fit the checkpoint's history."""


def _action_state(action: AgentAction | None) -> dict[str, Any] | None:
    if action is None:
        return None
    return {"exit": action.exit, "transfer_to": action.transfer_to, "break_loop": action.break_loop}


def _recorder(entry: Any) -> _Recorder:
    return entry.agent_name, tuple(entry.run_path)


def _view(entry: Any, reader: str) -> Message:
    """An entry as agent ``reader`` reads it in its input (as ``adk.history`` builds inputs)."""
    if entry.agent_name == reader:
        message: Message = entry.message
        return message
    return rewrite_message(entry.agent_name, entry.message)


def _same(a: Message, b: Message) -> bool:
    return a is b or a == b


def _input_spec(
    entries: Sequence[Any], root: Sequence[Message], given: Sequence[Message], reader: str
) -> dict[str, Any] | None:
    """How to derive ``given`` from the lane's root input and the history, or None if it is not
    that root followed by the first history entries as ``reader`` reads them."""
    n_root = len(root)
    seen = len(given) - n_root
    if seen < 0 or seen > len(entries):
        return None
    if not all(_same(a, b) for a, b in zip(given, root, strict=False)):
        return None
    counts: dict[_Recorder, int] = {}
    for entry, message in zip(entries, given[n_root:], strict=False):
        if not _same(message, _view(entry, reader)):
            return None
        key = _recorder(entry)
        counts[key] = counts.get(key, 0) + 1
    return {"root": n_root, "seen": [[name, list(path), n] for (name, path), n in counts.items()]}


def _load_input(
    entries: Sequence[Any], root: Sequence[Message], spec: Any, reader: str
) -> list[Message]:
    if spec["root"] != len(root):
        raise _BadState(f"the input began with {spec['root']} root input messages, not {len(root)}")
    left: dict[_Recorder, int] = {}
    for name, path, count in spec["seen"]:
        left[(str(name), tuple(path))] = _index(count, None)
    wanted = sum(left.values())
    given = list(root)
    for entry in entries:
        if len(given) - len(root) == wanted:
            break
        key = _recorder(entry)
        count = left.get(key)
        if count:
            left[key] = count - 1
            given.append(_view(entry, reader))
    if len(given) - len(root) != wanted:
        raise _BadState(f"the history lacks entries of the input: {left}")
    return given


def _tail_spec(
    entries: Sequence[Any], tail: Sequence[Message]
) -> tuple[list[Any] | None, list[Any]]:
    """``own`` and ``tail`` of the saved state for the messages the loop added."""
    where = {id(m): i for i, m in enumerate(tail)}
    earliest, key = len(tail), None
    for entry in entries:  # the recorder of the earliest added message the history holds
        i = where.get(id(entry.message))
        if i is not None and i < earliest:
            earliest, key = i, _recorder(entry)
    if key is None:
        return None, list(tail)
    own = [e.message for e in entries if _recorder(e) == key]
    first = next(i for i, m in enumerate(own) if m is tail[earliest])
    items: list[Any] = []
    cursor = first
    for message in tail:
        if cursor < len(own) and _same(own[cursor], message):
            cursor += 1
            if items and type(items[-1]) is int:
                items[-1] += 1
            else:
                items.append(1)
        else:
            items.append(message)
    return [key[0], list(key[1]), first], items


def _load_tail(entries: Sequence[Any], own_spec: Any, tail: Any) -> list[Message]:
    own: list[Message] = []
    cursor = 0
    name = "the agent"
    if own_spec is not None:
        name, path, first = own_spec
        key = (str(name), tuple(path))
        own = [e.message for e in entries if _recorder(e) == key]
        cursor = _index(first, None)
    messages: list[Message] = []
    for item in tail:
        if isinstance(item, Message):
            messages.append(item)
            continue
        count = _index(item, None)
        if cursor + count > len(own):
            raise _BadState(
                f"the history holds {len(own)} messages of {name!r}, the conversation "
                f"needs {cursor + count}"
            )
        messages.extend(own[cursor : cursor + count])
        cursor += count
    return messages


def _saved_prompt(start: list[Message], root: Sequence[Message]) -> int:
    """How many of the first messages of an earlier version's saved conversation (or ``head``,
    when its input was saved too) are the system prompt it saved: its leading system message,
    unless that is the input's own.

    Those states do not say where the prompt ended. The agent renders at most one system message
    and puts it first, before its input, which usually begins with its lane's ``root`` input (the
    run's, or a step prompt; a list of messages may well begin with a system message, for an
    agent without instruction):
    a leading system message that is the root input's first, not followed by it again, is the
    input's. Read wrongly only when an input that does not begin with the root input (a
    rewriter's, a custom parent's) begins with a system message of its own, given to an agent
    that had no prompt, or follows a prompt that is the root input's first message word for
    word."""
    if not start or start[0].role != Role.SYSTEM:
        return 0
    if root and start[0] == root[0] and (len(start) < 2 or start[1] != root[0]):
        return 0
    return 1


def _index(value: Any, size: int | None) -> int:
    """``value`` as a count or (with ``size``) an index below ``size``; anything else is refused."""
    if type(value) is not int or value < 0 or (size is not None and value >= size):
        raise _BadState(f"{value!r} is not a valid count or position")
    return value


def _messages(value: Any) -> list[Message]:
    if not isinstance(value, list) or not all(isinstance(m, Message) for m in value):
        raise _BadState("expected a list of messages")
    return list(value)


def _in_conversation(messages: list[Message], message: Message) -> Message:
    """The conversation's own object equal to ``message`` (held results of an old-format state
    are separate copies), so a later pause can save it by position."""
    for candidate in reversed(messages):
        if candidate == message:
            return candidate
    return message
