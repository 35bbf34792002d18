"""Standard JSON text for data that may hold NaN or infinities, each written as a string.

``json.dumps`` writes them as ``NaN``/``Infinity``, which no other JSON reader takes (a backend's
``JSON.parse``, ``jq``), so output meant for others (``pyadk checkpoint`` lines, a span's
``gen_ai.tool.definitions``) writes each as text instead. Data holds one rarely: the value is
dumped once as it is, and walked only when that dump met one.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any


def dumps_finite(value: Any, text: Callable[[float], str], **options: Any) -> str:
    """``json.dumps(value, allow_nan=False, **options)``, with each NaN or infinity inside
    ``value`` (in a dict's values, a list or a tuple) written as the string ``text(number)``."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # a NaN or an infinity somewhere (or what the walk cannot mend: raised)
        return json.dumps(_as_text(value, text), allow_nan=False, **options)


def _as_text(value: Any, text: Callable[[float], str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return text(value)
    if isinstance(value, dict):
        return {key: _as_text(item, text) for key, item in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple: a `|` union is built per value walked
        return [_as_text(item, text) for item in value]
    return value
