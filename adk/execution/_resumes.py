"""Resumes that travel with the records (``apply(agent, resumes=...)``), as both environments
take them: what one asks for, and why one cannot run.

A paused record's memory is its key's, which the environment holds (the local ``sessions`` or
``SessionStore``, a Flink job's operator or keyed state), so a resume runs as a record of its key:
after the key's earlier records, on the key's session as they left it, its writes kept for the
key's next records. What a resume carries is a paused output as the job gave it (its JSON text,
or that text parsed to a dict) with the resume's data added under ``"resume"``: ``key`` and
``checkpoint_id`` say what to resume, ``run_id`` carries over to the outputs. One that says
neither becomes a failed output of its own (``on_error``), not a failed job. Parsed here, once for
both environments, so a resume that one takes the other takes as well.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from .._record_keys import ambiguous, tupled

NEEDS_A_KEY = (
    "resumes run as records of their key, and these records have none (no key: each keeps no "
    "memory); resume such a paused record with a Runner over the checkpoint store, which runs "
    "it as it would run here"
)
"""Why ``apply`` refuses resumes for records without a key, in either environment."""


@dataclass(frozen=True, slots=True)
class Resume:
    """One resume as the environment runs it; ``problem`` says why it cannot run."""

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
        return _refused(f"has a key that is not a str, an int, None or an array: {key!r}")
    if type(key) is not str:
        problem = ambiguous(key)
        if problem is not None:  # no record has such a key: refused as the records' keys are
            return _refused(f"has a key that is refused: {problem}", key)
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
