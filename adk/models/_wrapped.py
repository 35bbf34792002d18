"""A strict schema whose root is not an object, sent to OpenAI inside one, and the answer taken out.

OpenAI's strict structured outputs take only an object at the root of a schema (``anyOf`` is
allowed below it, not at it), so a ``RootModel[list[X]]``, a union ``A | B`` or a scalar cannot go
strict as it is: sent without ``strict`` the model may answer anything. The OpenAI Agents SDK and
pydantic-ai both ask for such a type wrapped in an object, ``{"response": <the type>}``, and take
the value out of the answer. The adapter does the same on the wire only: what it is given
(``ModelOptions.response_format``) and what it returns (the message, the streamed chunks) are the
unwrapped schema and value, so history, outputs, retries and checkpoints never see the wrapper,
and models that are not OpenAI's keep the schema as given.

The answer is unwrapped as text, the same way whether it streamed or not (``AnswerUnwrapper``): a
reply beginning ``{"response":`` loses that head and its last ``}`` (one cut at the token limit,
which may lack it, is kept up to where its value's JSON ends); a reply beginning otherwise
(a server that ignored the format, a model answering the unwrapped value) passes as it came, since
the caller validates it against the unwrapped schema anyway.

No SDK import here (``import adk`` stays light).
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from ..messages import MessageChunk

WRAPPER_KEY = "response"
_ROOT_DEFS = ("$defs", "definitions")
_WHITESPACE = " \t\n\r"
_TAIL = _WHITESPACE + "}"  # what may follow the value: whitespace and the wrapper's brace
_KEY = f'"{WRAPPER_KEY}"'
# keywords holding values rather than schemas, and maps of names to schemas
_VALUES = frozenset({"enum", "const", "default", "examples"})
_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})
_SCHEMAS_KEPT = 16  # schemas a model keeps the wrapping of (``WrappedSchemas``), oldest out first
_EDITS_COPIED = 2  # a kept schema found edited this often is walked every call, copied no more


def needs_wrapper(schema: dict[str, Any]) -> bool:
    """Whether strict mode refuses ``schema`` at the root: not an object, or a union there."""
    return schema.get("type") != "object" or "anyOf" in schema


def wraps(spec: dict[str, Any] | None) -> bool:
    """Whether a response format's spec (``json_schema_of``'s form) goes wrapped: a ``strict``
    one whose root strict mode refuses. One without ``strict`` goes as it is: the caller asked
    for no guarantee, and a server refusing ``strict`` (the fallback's step down) gets the schema
    it would take."""
    return spec is not None and spec.get("strict") is True and needs_wrapper(spec["schema"])


def wrapped_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as the one required property of a closed object. Definitions move to the new
    root, where ``#/$defs/...`` references find them, and a reference to the old root (``#``, as
    strict mode's own recursive examples write it) or below it is moved under the property."""
    return _wrapped(schema)[0]


def _wrapped(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``wrapped_schema(schema)``, and whether no reference needed moving: the wrapper then
    holds ``schema``'s own nodes, all but its root (``_shallow`` builds the same)."""
    inner = {key: value for key, value in schema.items() if key not in _ROOT_DEFS}
    moved = _moved_refs(inner)
    wrapper = _wrapper(moved)
    shared = moved is inner
    for key in _ROOT_DEFS:
        definitions = schema.get(key)
        if isinstance(definitions, dict):
            wrapper[key] = new = _moved_refs(definitions, schema=False)
            shared = shared and new is definitions
    return wrapper, shared


def _wrapper(inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {WRAPPER_KEY: inner},
        "required": [WRAPPER_KEY],
        "additionalProperties": False,
    }


def _shallow(schema: dict[str, Any]) -> dict[str, Any]:
    """``wrapped_schema(schema)`` for a schema known to need no reference moved, without walking
    it: its root copied, every other node its own."""
    wrapper = _wrapper({key: value for key, value in schema.items() if key not in _ROOT_DEFS})
    for key in _ROOT_DEFS:
        definitions = schema.get(key)
        if isinstance(definitions, dict):
            wrapper[key] = definitions
    return wrapper


class WrappedSchemas:
    """``wrapped_schema`` for one model's calls, without walking a schema it has already checked.

    Finding the references to move walks the whole schema (~10 µs for a small one, ~0.2 ms for
    300 properties), per call. A schema is kept by identity, which a caller's ``ModelOptions``
    (and ``ReActAgent``'s, made once per output schema) keeps from call to call; the second time
    it comes, a copy of it is kept too, and from then on a call that finds it still equal to the
    copy (``==``, in C: ~0.4 µs, ~12 µs for 300 properties) knows that no reference needs moving
    without the walk, and wraps it as it is now (``_shallow``): an edit made in place between
    calls (a property added, a description changed, keys reordered, anywhere in it) goes out as
    edited, as without this. A schema seen once (one made per call) costs only its entry, one
    found edited twice since its first copy is walked every call without more copies, and one
    with references to move (``#``, which pydantic does not write) is walked every call."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        # id(schema) -> (the schema, a copy of it once it came twice, the edits found since its
        # first copy); holding the schema keeps its id from being taken by another dict
        self._kept: dict[int, tuple[dict[str, Any], dict[str, Any] | None, int]] = {}

    def of(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``wrapped_schema(schema)``."""
        kept = self._kept.get(id(schema))
        if kept is not None and kept[0] is not schema:
            kept = None
        if kept is not None and kept[1] is not None and schema == kept[1]:
            return _shallow(schema)  # equal to a schema that needed no reference moved
        wrapped, shared = _wrapped(schema)
        if shared:
            edits = 0 if kept is None else kept[2] + (kept[1] is not None)
            # asked for again (or edited since its copy): worth a copy to compare with, unless
            # it is edited before call after call, when copying would cost more than the walk
            self._keep(schema, kept is not None and edits < _EDITS_COPIED, edits)
        return wrapped

    def _keep(self, schema: dict[str, Any], copied: bool, edits: int) -> None:
        kept = self._kept
        kept.pop(id(schema), None)
        if len(kept) >= _SCHEMAS_KEPT:
            kept.pop(next(iter(kept), 0), None)  # schemas made per call: bounded
        copy_of = None
        if copied:
            try:
                copy_of = copy.deepcopy(schema)
            except Exception:  # a value that cannot be copied: the schema is walked every call
                return
        kept[id(schema)] = (schema, copy_of, edits)


def _moved_refs(node: Any, *, schema: bool = True) -> Any:
    """``node`` with references into the old root (other than its definitions) moved under the
    wrapper's property; nodes without such a reference are shared, not copied. ``schema``: node
    is a schema, not a map of them (``properties``), whose keys are names, not keywords."""
    if isinstance(node, list):
        moved = [_moved_refs(item) for item in node]
        return moved if any(new is not old for new, old in zip(moved, node, strict=True)) else node
    if not isinstance(node, dict):
        return node
    changed: dict[str, Any] = {}
    for key, value in node.items():
        if not schema:
            new = _moved_refs(value)
        elif key == "$ref" and isinstance(value, str):
            new = _moved_ref(value)
        elif key in _VALUES:
            continue  # values, not schemas: a "$ref" key in them is data
        else:
            new = _moved_refs(value, schema=key not in _MAPS)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


def _moved_ref(ref: str) -> str:
    if ref == "#":
        return f"#/properties/{WRAPPER_KEY}"
    if ref.startswith("#/") and not ref.startswith(("#/$defs/", "#/definitions/")):
        return f"#/properties/{WRAPPER_KEY}{ref[1:]}"
    return ref


class AnswerUnwrapper:
    """Takes the value out of a wrapped answer (``{"response": <value>}``) as its text arrives.

    ``feed`` returns what of the value can be passed on now: nothing while the head is still
    arriving, and never a run of ``}`` and whitespace at the end, which may be the wrapper's close
    (held until more text shows it is not). ``finish`` returns what is held but the wrapper's own
    ``}``. A reply whose head is not the wrapper's passes through whole."""

    __slots__ = ("_head", "_held", "_passed", "_state")

    def __init__(self) -> None:
        self._head = ""  # the reply's start, until it is known whether it is the wrapper's
        self._held = ""  # the end of the value so far that may be the wrapper's close
        self._passed: list[str] = []  # the value passed on: read only if the reply was cut
        self._state = "head"  # "head" -> "value" (wrapped) or "plain" (passed as it came)

    def feed(self, text: str) -> str:
        if not text:
            return ""
        if self._state == "plain":
            return text
        if self._state == "head":
            self._head += text
            rest = _after_head(self._head)
            if rest is None:  # not the wrapper's head: the reply passes as it came
                self._state = "plain"
                return self._head
            if not rest:
                return ""  # the head may still be the wrapper's: wait for more
            self._state = "value"
            self._head = ""
            text = rest
        text = self._held + text
        end = len(text.rstrip(_TAIL))
        self._held = text[end:]
        passed = text[:end]
        if passed:
            self._passed.append(passed)
        return passed

    def finish(self, cut: bool = False) -> str:
        """What is left of the value once the reply has ended; ``cut``: it ended at the token
        limit (finish reason ``length``), so the wrapper's close may never have come."""
        if self._state == "head":  # a reply that ended inside (or as) a head: not a wrapped value
            self._state = "plain"
            head, self._head = self._head, ""
            return head
        held, self._held = self._held, ""
        if cut:
            # The wrapper's close may not have come: the value ends where its JSON ends, or,
            # cut itself, runs to the end (``{"response": {"a": {"b": 1}}`` lost the value's
            # last brace when the last one was taken for the wrapper's).
            passed = sum(map(len, self._passed))
            end = _value_end("".join(self._passed) + held)
            return held if end is None else held[: max(end - passed, 0)]
        close = held.rfind("}")
        return held[:close].rstrip(_WHITESPACE) if close >= 0 else held.rstrip(_WHITESPACE)


def _value_end(text: str) -> int | None:
    """Where the JSON value at the start of ``text`` ends; None if it runs to the end of the
    text (cut). Reads only what tells containers and strings apart: the value was made under a
    strict schema, or is passed on as it came anyway."""
    depth = 0
    in_string = escaped = False
    for at in range(_skip(text, 0), len(text)):
        char = text[at]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if not depth:
                    return at + 1
        elif char == '"':
            in_string = True
        elif char == "{" or char == "[":
            depth += 1
        elif char == "}" or char == "]":
            depth -= 1
            if depth <= 0:  # the root container closed, or (below 0) a scalar ended at the brace
                return at + 1 if depth == 0 else at
        elif not depth and char in _WHITESPACE:
            return at  # a number or a literal ended
    return None


def _after_head(text: str) -> str | None:
    """What follows the wrapper's head (``{"response":`` and whitespace) in ``text``: the value's
    start, "" while ``text`` may still become the head, None once it cannot."""
    at = _skip(text, 0)
    if at == len(text):
        return ""
    if text[at] != "{":
        return None
    at = _skip(text, at + 1)
    key = text[at : at + len(_KEY)]
    if not _KEY.startswith(key):
        return None
    if len(key) < len(_KEY):
        return ""
    at = _skip(text, at + len(_KEY))
    if at == len(text):
        return ""
    if text[at] != ":":
        return None
    at = _skip(text, at + 1)
    return text[at:]  # "" while the value has not begun


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def unwrap_text(text: str, cut: bool = False) -> str:
    """The value of a whole wrapped answer, as ``AnswerUnwrapper`` reads it streamed (``cut``:
    see ``AnswerUnwrapper.finish``)."""
    unwrapper = AnswerUnwrapper()
    return unwrapper.feed(text) + unwrapper.finish(cut)


class _Decoder(Protocol):
    finished: bool

    def feed(self, event: Any) -> MessageChunk | None: ...

    def end(self) -> MessageChunk | None: ...


class UnwrappingDecoder:
    """A stream decoder (``ChatStreamDecoder``, ``ResponsesStreamDecoder``) whose chunks carry the
    value of a wrapped answer: the text is unwrapped as it arrives, the rest of the value passed
    on with the finishing chunk. A chunk left with nothing to carry (its text all head or held) is
    None, as the decoders' own empty chunks are, so "nothing reached the caller yet" (what lets a
    stream be retried) stays true for as long as it really is."""

    __slots__ = ("_decoder", "_unwrapper")

    def __init__(self, decoder: _Decoder) -> None:
        self._decoder = decoder
        self._unwrapper = AnswerUnwrapper()

    @property
    def finished(self) -> bool:
        return self._decoder.finished

    def feed(self, event: Any) -> MessageChunk | None:
        chunk = self._decoder.feed(event)
        if chunk is None:
            return None
        content = self._unwrapper.feed(chunk.content)
        if chunk.finish_reason is not None:
            content += self._unwrapper.finish(chunk.finish_reason == "length")
        chunk.content = content
        if content or chunk.reasoning or chunk.tool_calls or chunk.usage is not None:
            return chunk
        return chunk if chunk.finish_reason is not None or chunk.metadata else None

    def end(self) -> MessageChunk | None:
        """The decoder's finishing chunk of a stream the server ended without a finish reason
        (``ChatStreamDecoder.end``), with the rest of the wrapped value."""
        chunk = self._decoder.end()
        if chunk is not None:
            chunk.content = self._unwrapper.feed(chunk.content) + self._unwrapper.finish(False)
        return chunk
