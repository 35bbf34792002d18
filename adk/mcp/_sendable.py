"""What no MCP transport can carry, found before it is sent: one place for the checks of a
call's arguments (a model's, a person's edit of them, a sampled reply's proposed call), a
prompt's arguments, a resource's URI and a sampling or elicitation answer.

A lone surrogate (``"\\ud800"``, which a model may write escaped in its JSON) has no UTF-8 form:
the transport's writer failing on it ended the session, every call in flight on it cut. NaN and
infinities are no JSON numbers (pydantic writes them as null, the value lost without a word),
and nesting past pydantic's limit (255 levels) fails the writer too."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pydantic_core

from .._nonfinite import nonfinite_at

LONE_SURROGATE = "a lone surrogate, which is not Unicode text"
"""How an error says what a lone surrogate is."""

NOT_FINITE = "not a finite number, which JSON cannot carry"
"""How an error says what NaN or an infinity is."""


def lone_surrogate(text: str) -> str | None:
    """The first run of lone surrogates in ``text``, or None when it has a UTF-8 form."""
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return str(exc.object[exc.start : exc.end])
    return None


def printable(words: str) -> str:
    """pydantic's ``words`` for what it could not write, for an error or a log line: at most 300
    characters, any surrogate they quote escaped (it would fail the log's writer in turn)."""
    return words[:300].encode("utf-8", "backslashreplace").decode()


def check_sendable(text: str, what: str) -> None:
    """Refuse (``ValueError``) ``text`` holding a lone surrogate, which cannot be encoded as
    UTF-8: sent, it ended the session (every call in flight on it) rather than failing alone."""
    bad = lone_surrogate(text)
    if bad is not None:
        raise ValueError(f"{what} holds {bad!r}, {LONE_SURROGATE}")


def not_finite_at(value: Any) -> tuple[float, str] | None:
    """The first NaN or infinity in ``value`` (a model's python dump: dicts, lists, tuples and
    sets, ``adk._nonfinite.nonfinite_at``) and where it is, for an error, or None: pydantic
    writes one as null (as the key "None"), the value lost without a word. Only for what is sent
    once per request (an answer), not per event."""
    found = nonfinite_at(value)
    if found is None:
        return None
    where = ""
    for step in found.path:
        where = (
            f"{where}[{step}]" if isinstance(step, int) else f"{where}.{step}" if where else step
        )
    where = where or "its top"
    return found.number, f"{where} (as a key)" if found.key else where


def _not_finite(word: str) -> float:
    raise ValueError(f"{word} is {NOT_FINITE}")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        _not_finite(text)
    return number


def parse_arguments(text: str) -> dict[str, Any]:
    """A call's arguments as the server will be sent them, or ``ValueError`` saying why they
    cannot be: json.loads takes what no MCP transport carries (NaN and 1e400, sent as null; a
    lone surrogate, ``"\\ud800"``, which cannot be encoded and, over stdio, ended the session
    for every call in flight on it)."""
    if not text or not text.strip():
        return {}  # some models send "" for tools without parameters
    try:
        value = json.loads(text, parse_constant=_not_finite, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{NOT_JSON} ({exc.msg} at position {exc.pos})") from None
    except RecursionError:
        raise ValueError("arguments are nested too deeply to be read") from None
    except ValueError as exc:  # NaN, 1e400 (``_not_finite``), or an integer past Python's limit
        digits = _LONG_INT.search(str(exc))
        if digits is None:
            raise
        raise ValueError(
            f"arguments hold an integer of {digits[1]} digits, more than can be read"
        ) from None
    if not isinstance(value, dict):
        raise ValueError(f"{NOT_AN_OBJECT}, got {type(value).__name__}")
    # Written as the transport will write them, where that can fail: a surrogate can only be
    # escaped or in the text itself, and nesting past the writer's limit (pydantic's, 255
    # levels, within json.loads' ~1000) needs that many brackets. Failing there, the call read
    # 'failed: ValueError: Circular reference detected (depth exceeded)'.
    if (
        "\\u" in text
        or (not text.isascii() and lone_surrogate(text) is not None)
        or text.count("[") + text.count("{") > _DEEP
    ):
        try:
            pydantic_core.to_json(value)
        except ValueError as exc:  # PydanticSerializationError
            raise ValueError(_unsendable(value, str(exc))) from None
    return value


NOT_JSON = "arguments are not valid JSON"
"""How ``parse_arguments`` begins its error for text that is not JSON."""
NOT_AN_OBJECT = "arguments must be a JSON object"
"""How ``parse_arguments`` begins its error for JSON that is not an object."""
_LONG_INT = re.compile(r"integer string conversion: value has (\d+) digits")
"""Python's words for an integer longer than ``sys.get_int_max_str_digits()`` (4300), which
told the model to 'use sys.set_int_max_str_digits() to increase the limit'."""

_DEEP = 200  # brackets in a call's arguments past which their nesting is checked (see above)


def _unsendable(value: dict[str, Any], words: str) -> str:
    """Why the transport cannot write ``value`` (pydantic's ``words``), said for the model."""
    if "depth exceeded" in words:
        return "arguments are nested too deeply to be sent"
    try:
        bad = lone_surrogate(json.dumps(value, ensure_ascii=False))  # the run, in one piece
    except (ValueError, RecursionError):
        bad = None
    if bad is not None:
        return f"arguments hold {bad!r}, {LONE_SURROGATE}"
    return "arguments cannot be sent: " + printable(words)
