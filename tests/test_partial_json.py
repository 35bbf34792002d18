"""``prebuilt._partial_json.PartialJSON``, which ``stream_output`` reads a streamed answer with:
after each piece, the text it completes parses to what pydantic's partial parsing makes of the
whole text so far (``from_json(text, allow_partial="trailing-strings")``, which ``stream_output``
ran on the whole answer after every chunk), for every prefix, however the text is cut, malformed
text included."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from pydantic_core import from_json, to_json

from prebuilt._partial_json import PartialJSON

SAMPLES = [
    '{"a": 1, "b": [1, 2.5, -3e2, 1E+5, 0, -0, true, false, null], "c": {"d": "x\\"y\\\\z"}}',
    '{"e": "\\u00e9 \\ud83d\\ude00 \\n\\t\\/ caf\u00e9 \U0001f600", "f": [], "g": {}}',
    '[{"name": "Ada", "age": 36}, {"name": "Bob", "tags": ["x", "y"]}]',
    '"a root string \\u0041"',
    "12.5e-3",
    "true",
    ' \n\t{"a":\r1 , "b" : [ ] }  ',
    '{"a": -Infinity, "b": NaN, "c": Infinity, "d": -0.0e-0}',
    # A closing fence, and other text after the root value, are left out.
    '{"a": "x"}\n```\n',
    '{"k": [{}, [], "v"]} trailing words',
    # Malformed: what pydantic fails on, and where it stops and keeps what came before.
    '{"a":1 2, "b": "c"}',
    '{"a": truex, "b": 1}',
    '{"a": 1.5.3}',
    '{"a": 00}',
    '{"a": [1,]}',
    '{"a": 1, }',
    '{"a": "\\ud800x"}',
    '{"a": "\\udc00"}',
    '{"a": "\\u00zz"}',
    '{"a": "\\x"}',
    '{"a" "b"}',
    "{x}",
    '{"a": "line\nbreak"}',
    # A container ended by another's bracket: the one it closes goes on.
    '{"x": [{"a": 1], "y": 2}',
    '{"x": [[1}, "y": 2}',
    '[{"a": [1}, 2]',
    '{"x": {"a": [1, 2}, "y": 3}',
]


def _reference(text: str) -> bytes | None:
    try:
        return to_json(from_json(text, allow_partial="trailing-strings"))
    except ValueError:
        return None


def _read(completed: str | None) -> bytes | None:
    # The completed text is whole JSON: parsed without allow_partial. Compared as JSON bytes,
    # since NaN is not equal to itself.
    return None if completed is None else to_json(from_json(completed))


@pytest.mark.parametrize("text", SAMPLES)
def test_every_prefix_completes_as_pydantics_partial_parsing(text: str) -> None:
    for end in range(len(text) + 1):
        assert _read(PartialJSON().feed(text[:end])) == _reference(text[:end]), text[:end]


@pytest.mark.parametrize("text", SAMPLES)
def test_fed_in_pieces_it_completes_each_prefix_as_fed_whole(text: str) -> None:
    rng = random.Random(text)
    for _ in range(20):
        parser, end, pieces = PartialJSON(), 0, 0
        while end < len(text):
            size = rng.randint(1, 6)
            completed = parser.feed(text[end : end + size])
            end, pieces = end + size, pieces + 1
            assert _read(completed) == _reference(text[:end]), text[:end]
        # Each character read once, but for a token cut by a piece's end, read again (at most
        # the dozen characters of an escaped surrogate pair; the samples' numbers are shorter).
        assert parser.scanned <= len(text) + 12 * pieces


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 7 if depth < 3 else 4)
    if kind == 0:
        return {rng.choice('abc\u00e9"\\'): _random_json(rng, depth + 1) for _ in range(3)}
    if kind == 1:
        return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == 2:
        return "".join(rng.choice('xy "\\\n\u00e9\U0001f600\x01/') for _ in range(6))
    if kind == 3:
        return rng.choice([0, -0.0, 1.5, -12, 1e300, 10**20, 1.5e-7])
    return rng.choice([True, False, None])


def test_random_documents_cut_anywhere_and_damaged_complete_alike() -> None:
    rng = random.Random(20261127)
    damage = 'ab "\\\n\t{}[],:-0123456789.eE+tfnruNaIy\u00e9\U0001f600/'
    for _ in range(400):
        text = json.dumps(_random_json(rng), ensure_ascii=rng.random() < 0.5)
        for _ in range(rng.randint(0, 2)):
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(damage) + text[at + 1 :]
        parser, end = PartialJSON(), 0
        while end < len(text):
            size = rng.randint(1, 5)
            completed = parser.feed(text[end : end + size])
            end += size
            assert _read(completed) == _reference(text[:end]), text[:end]
