"""A JSON text arriving in pieces, completed after each piece as pydantic's partial parsing
completes it, reading each character once (``stream_output``).

``stream_output`` once parsed the whole text so far after every chunk
(``pydantic_core.from_json(text, allow_partial="trailing-strings")``), serialised the result and
validated that: three passes over the answer per chunk, so the work grew with the square of the
answer's length. ``PartialJSON`` scans only the new characters, keeping where it is (which
containers are open, whether it is in a string, where the last complete value ends), and gives
the text that pydantic's partial parsing would have made of the prefix, as JSON text: the part
it keeps with the open string and containers closed. ``stream_output`` validates that text once
per chunk, when it changed; validating each instance it yields is the one whole-answer pass left,
and it cannot go: every instance is whole.

What is kept, as ``from_json(text, allow_partial="trailing-strings")`` keeps it
(``tests/test_stream_output.py`` checks the two agree on every prefix of its samples):

- an open container, with its complete members; an open string value as far as it came, less an
  escape still arriving (a high surrogate waits for its low one);
- a number at the end of the text when it is a whole number as it stands (``12``, ``1.5``, not
  ``1.`` or ``1e``); a literal (``true``, ``NaN``) only when whole;
- not a key still arriving, nor a key without its value, nor a dangling comma.

Malformed text fails where ``from_json`` fails (no instance from then on) and goes on where it
goes on: after a complete value, a character that is neither a comma nor the container's closing
bracket ends the container there, and the one around it reads that character (its own bracket
closes it and the parse goes on, ``{"x": [{"a": 1], "y": 2}``; anything else ends it too, so
``{"a": 1 2`` is ``{"a": 1}``). Whatever follows the root value is left out (a closing code
fence).
"""

from __future__ import annotations

import re

__all__ = ["PartialJSON"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
# A string's characters up to a quote, a backslash, a control character (invalid in JSON) or
# the end: the bulk of a streamed answer, consumed at C speed.
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]*')
_DIGITS = re.compile(r"[0-9]*")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = frozenset('"\\/bfnrt')
_LITERALS = {"t": "true", "f": "false", "n": "null", "N": "NaN", "I": "Infinity"}
_CLOSERS = {"{": "}", "[": "]"}

# What the scanner expects next.
_VALUE = 0  # a value (or, just after "[", the "]")
_KEY = 1  # a key (or, just after "{", the "}")
_COLON = 2
_AFTER = 3  # a comma or the open container's closing bracket, after a value
_STRING = 4  # the rest of a string (a key or a value)
_ENDED = 5  # nothing more is read: the root value ended, or the parse stopped after a value
_BROKEN = 6  # not JSON: nothing is kept

_INCOMPLETE = -1  # the token runs on past the text so far
_INVALID = -2


class PartialJSON:
    """Feed it the pieces of a JSON text; ``feed`` gives the completed text so far (None while
    nothing would parse: no value yet, a root scalar still arriving, or text that is not JSON).
    ``scanned`` counts the characters it has read, those read again included: a number, a
    literal or an escape cut by the end of a piece is read again with the next one."""

    __slots__ = (
        "_base",
        "_good",
        "_in_key",
        "_just_opened",
        "_number_whole",
        "_pos",
        "_spliced",
        "_stack",
        "_state",
        "_text",
        "scanned",
    )

    def __init__(self) -> None:
        self._text = ""
        self._pos = 0  # the next character to read; a token cut by the end starts here
        # The kept text is ``_spliced + _text[_base:...]``: ``_spliced`` holds what came before a
        # container that ended without its bracket (malformed text only; empty otherwise).
        self._spliced = ""
        self._base = 0
        self._state = _VALUE
        self._stack: list[str] = []  # the open containers' opening brackets
        self._good = -1  # where the kept text ends (after the last complete value or opening)
        self._just_opened = False  # the innermost container has nothing in it yet
        self._in_key = False  # the string being read is a key
        self._number_whole = False  # the token cut by the end is a number, whole as it stands
        self.scanned = 0

    def feed(self, piece: str) -> str | None:
        """Add ``piece``; the completed text of everything fed so far."""
        if self._state < _ENDED:
            self._text += piece
            self._scan()
        return self._completed()

    @property
    def broken(self) -> bool:
        """Whether the text fed is not JSON (nothing will be kept, whatever comes next)."""
        return self._state == _BROKEN

    @property
    def text(self) -> str:
        """Everything fed so far (up to the end of the root value, once it ended)."""
        return self._text

    def _completed(self) -> str | None:
        state = self._state
        if state == _BROKEN:
            return None
        text = self._text
        if state == _STRING and not self._in_key:
            kept = text[self._base : self._pos] + '"'
        elif self._number_whole and state == _VALUE:
            kept = text[self._base :]
        elif self._good < 0:
            return None
        else:
            kept = text[self._base : self._good]
        if self._spliced:
            kept = self._spliced + kept
        stack = self._stack
        if not stack:
            return kept
        return kept + "".join(_CLOSERS[opening] for opening in reversed(stack))

    def _scan(self) -> None:
        text = self._text
        end = len(text)
        pos = self._pos
        self.scanned += end - pos
        state = self._state
        stack = self._stack
        self._number_whole = False
        while pos < end and state < _ENDED:
            if state == _STRING:
                pos = _past(_STRING_RUN, text, pos)
                if pos == end:
                    break
                char = text[pos]
                if char == '"':
                    pos += 1
                    if self._in_key:
                        state = _COLON
                    else:
                        self._good = pos
                        state = _AFTER if stack else _ENDED
                elif char == "\\":
                    after = _escape_end(text, pos)
                    if after == _INCOMPLETE:
                        break
                    if after == _INVALID:
                        state = _BROKEN
                        break
                    pos = after
                else:  # a control character
                    state = _BROKEN
                    break
                continue
            pos = _past(_WHITESPACE, text, pos)
            if pos == end:
                break
            char = text[pos]
            if state == _VALUE:
                if char == "{" or char == "[":
                    stack.append(char)
                    pos += 1
                    self._good = pos
                    self._just_opened = True
                    state = _KEY if char == "{" else _VALUE
                    continue
                if char == "]" and self._just_opened and stack and stack[-1] == "[":
                    pos, state = self._close(pos)
                    continue
                self._just_opened = False
                if char == '"':
                    pos += 1
                    self._in_key = False
                    state = _STRING
                    continue
                if char == "-" or "0" <= char <= "9":
                    after, whole = _number_end(text, pos)
                else:
                    after, whole = _literal_end(text, pos), False
                if after == _INCOMPLETE:
                    self._number_whole = whole
                    break
                if after == _INVALID:
                    state = _BROKEN
                    break
                pos = self._good = after
                state = _AFTER if stack else _ENDED
            elif state == _KEY:
                if char == '"':
                    pos += 1
                    self._in_key = True
                    state = _STRING
                elif char == "}" and self._just_opened:
                    pos, state = self._close(pos)
                else:
                    state = _BROKEN
                self._just_opened = False
            elif state == _COLON:
                if char != ":":
                    state = _BROKEN
                    break
                pos += 1
                state = _VALUE
            else:  # _AFTER
                if char == ",":
                    pos += 1
                    state = _KEY if stack[-1] == "{" else _VALUE
                elif char == _CLOSERS[stack[-1]]:
                    pos, state = self._close(pos)
                else:
                    # pydantic's partial parsing ends the container here, without its bracket,
                    # and hands the character to the one around it, which may be closed by it
                    # and go on (``[{"a": 1], 2]``); past the root, the parse is over.
                    state = self._end_unclosed(pos)
        self._pos = pos
        self._state = state

    def _end_unclosed(self, pos: int) -> int:
        """End the innermost container without its bracket at ``pos``: the kept text so far,
        with the bracket it lacked, becomes ``_spliced``; the text read goes on from ``pos``."""
        self._spliced += self._text[self._base : self._good] + _CLOSERS[self._stack.pop()]
        self._base = self._good = pos
        return _AFTER if self._stack else _ENDED

    def _close(self, pos: int) -> tuple[int, int]:
        self._stack.pop()
        self._good = pos + 1
        self._just_opened = False
        return pos + 1, _AFTER if self._stack else _ENDED


def _past(run: re.Pattern[str], text: str, pos: int) -> int:
    """The end of ``run`` (a pattern that matches the empty string too) at ``pos``."""
    match = run.match(text, pos)
    assert match is not None
    return match.end()


def _escape_end(text: str, pos: int) -> int:
    """Where the escape at ``pos`` (a backslash) ends; ``_INCOMPLETE`` or ``_INVALID``."""
    end = len(text)
    if pos + 1 >= end:
        return _INCOMPLETE
    kind = text[pos + 1]
    if kind in _SIMPLE_ESCAPES:
        return pos + 2
    if kind != "u":
        return _INVALID
    code = _hex4(text, pos + 2)
    if code < 0:
        return code
    if 0xDC00 <= code <= 0xDFFF:  # a low surrogate with no high one before it
        return _INVALID
    if not 0xD800 <= code <= 0xDBFF:
        return pos + 6
    # A high surrogate: its low one must follow, and the pair is kept whole or not at all.
    for offset, wanted in ((6, "\\"), (7, "u")):
        if pos + offset >= end:
            return _INCOMPLETE
        if text[pos + offset] != wanted:
            return _INVALID
    low = _hex4(text, pos + 8)
    if low < 0:
        return low
    return pos + 12 if 0xDC00 <= low <= 0xDFFF else _INVALID


def _hex4(text: str, pos: int) -> int:
    """The code of the four hex digits at ``pos``. Fewer than four bytes (UTF-8) are incomplete,
    whatever they are, as pydantic's partial parsing takes them."""
    digits = text[pos : pos + 4]
    if len(digits) < 4 and len(digits.encode("utf-8", "surrogatepass")) < 4:
        return _INCOMPLETE
    for digit in digits:
        if digit not in _HEX:
            return _INVALID
    return int(digits, 16)


def _number_end(text: str, pos: int) -> tuple[int, bool]:
    """Where the number at ``pos`` ends, or ``_INVALID``; ``(_INCOMPLETE, whole)`` when it runs
    to the end of the text, ``whole`` telling whether it is a number as it stands."""
    end = len(text)
    if text[pos] == "-":
        pos += 1
        if pos == end:
            return _INCOMPLETE, False
        if text[pos] == "I":
            return _literal_end(text, pos, "-Infinity", 1), False
    if text[pos] == "0":
        pos += 1
        if pos < end and "0" <= text[pos] <= "9":
            return _INVALID, False
    elif "1" <= text[pos] <= "9":
        pos = _past(_DIGITS, text, pos)
    else:
        return _INVALID, False
    if pos == end:
        return _INCOMPLETE, True
    if text[pos] == ".":
        pos = _digits_after(text, pos + 1)
        if pos < 0:
            return pos, False
        if pos == end:
            return _INCOMPLETE, True
    if text[pos] in "eE":
        pos += 1
        if pos < end and text[pos] in "+-":
            pos += 1
        pos = _digits_after(text, pos)
        if pos < 0:
            return pos, False
        if pos == end:
            return _INCOMPLETE, True
    return pos, False


def _digits_after(text: str, pos: int) -> int:
    """The end of the digits at ``pos``, of which there must be one; ``_INCOMPLETE`` at the end
    of the text, ``_INVALID`` before any other character."""
    if pos == len(text):
        return _INCOMPLETE
    after = _past(_DIGITS, text, pos)
    return after if after > pos else _INVALID


def _literal_end(text: str, pos: int, word: str | None = None, offset: int = 0) -> int:
    """Where the literal at ``pos`` (``word``, or the one its first letter starts, of which
    ``offset`` letters are behind ``pos``) ends; ``_INCOMPLETE`` or ``_INVALID``."""
    if word is None:
        word = _LITERALS.get(text[pos])
        if word is None:
            return _INVALID
    start = pos - offset
    came = text[start : start + len(word)]
    if not word.startswith(came):
        return _INVALID
    return start + len(word) if len(came) == len(word) else _INCOMPLETE
