"""Resumes that travel with a Flink job's records (``apply(agent, resumes=stream)``).

A paused record's memory is its key's, and on Flink a key's memory lives in the job (the operator's
memory, or Flink's keyed state with ``durable_memory``): a ``Runner`` outside the job cannot reach
it. So a resume enters the job as an element of its key, keyed like the records, and the operator
runs it as ``LocalExecutionEnvironment``'s ``outputs.resume`` does: after the key's earlier
records, on the key's session as they left it, its writes kept for the key's next records.

What the ``resumes`` stream carries is a paused output as the job gave it (its JSON text, or that
text parsed to a dict) with the resume's data added under ``"resume"``: ``key`` and
``checkpoint_id`` say what to resume, ``run_id`` carries over to the outputs. One that says
neither becomes a failed output of its own (``on_error``), not a failed job.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json
from pyflink.common import Row

RESUME_MARK = "\x1e"
"""What starts a resume's text in ``from_list``'s keyed rows, where a record's text is JSON (which
never starts with this character), so the operator tells the two apart by one character."""


@dataclass(frozen=True, slots=True)
class Resume:
    """One resume as the operator runs it; ``problem`` says why it cannot run."""

    key: Hashable
    checkpoint_id: str | None
    run_id: str | None
    data: Any
    problem: str | None = None


def parsed(value: Any) -> Resume:
    """The resume that ``value`` (a paused output's JSON text or dict, with ``"resume"``) asks for."""
    if isinstance(value, bytes | bytearray):
        value = value.decode()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            return _refused(f"is not JSON ({exc})")
    if not isinstance(value, Mapping):
        return _refused(
            f"is a {type(value).__name__}, not a paused output (a JSON object with key and "
            "checkpoint_id) with the resume's data under 'resume'"
        )
    key = tupled(value.get("key"))
    try:
        hash(key)
    except TypeError:
        return _refused(f"has a key that is not a str, a number, a bool, None or an array: {key!r}")
    checkpoint_id, run_id = value.get("checkpoint_id"), value.get("run_id")
    if "key" not in value:
        return _refused("has no key: give the paused output as it is, with 'resume' added", key)
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        return _refused(f"has no checkpoint_id (a non-empty str), got {checkpoint_id!r}", key)
    if run_id is not None and not isinstance(run_id, str):
        return _refused(f"has a run_id that is not a str: {run_id!r}", key)
    return Resume(key, checkpoint_id, run_id, value.get("resume"))


def _refused(problem: str, key: Hashable = None) -> Resume:
    return Resume(key, None, None, None, problem)


def keyed_row(value: Any) -> Row:
    """A resume as ``from_list``'s keyed records travel: its key's JSON text (what ``key_by``
    partitions on, written as the records' keys are) and the marked resume text."""
    text = value.decode() if isinstance(value, bytes | bytearray) else value
    if not isinstance(text, str):
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = json.dumps(repr(value))  # refused in the operator: not a paused output
    return Row(to_json(parsed(text).key).decode(), RESUME_MARK + text)


def tupled(value: Any) -> Any:
    """JSON's arrays back as tuples, as a key that was a tuple left as an array."""
    return tuple(tupled(item) for item in value) if type(value) is list else value
