"""Resumes that travel with a Flink job's records (``apply(agent, resumes=stream)``), as the job's
elements carry them.

A paused record's memory is its key's, and on Flink a key's memory lives in the job (the operator's
memory, or Flink's keyed state with ``durable_memory``): a ``Runner`` outside the job cannot reach
it. So a resume enters the job as an element of its key, keyed like the records, and the operator
runs it as a record of its key. What a resume carries, and why one cannot run, is ``_resumes``'s,
shared with ``LocalExecutionEnvironment``'s ``apply(agent, resumes=...)``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_json
from pyflink.common import Row

from ._resumes import parsed

RESUME_MARK = "\x1e"
"""What starts a resume's text in ``from_list``'s keyed rows, where a record's text is JSON (which
never starts with this character), so the operator tells the two apart by one character."""


def keyed_row(value: Any) -> Row:
    """A resume as ``from_list``'s keyed records travel: its key's JSON text (what ``key_by``
    partitions on, written as the records' keys are), the marked resume text, and -1 for the
    position in the list a record has and a resume has not."""
    text = value.decode() if isinstance(value, bytes | bytearray) else value
    if not isinstance(text, str):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = json.dumps(repr(value))  # refused in the operator: not a paused output
    return Row(to_json(parsed(text).key).decode(), RESUME_MARK + text, -1)
