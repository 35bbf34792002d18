"""Reading a checkpoint body's pending points, and the error for a malformed body.

Apart from ``_snapshot`` (which rebuilds a whole run and imports the run state) so that a listing
of paused runs (``_pending``, loaded with ``adk.checkpoint``) can read the points without it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..interrupts import InterruptPoint
from .codec import CheckpointError, from_json_value

__all__ = ["parse_points", "still_waiting"]


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckpointError(f"is malformed: {what}", reason="corrupt")


def parse_points(
    body: dict[str, Any], checkpoint_id: str, *, rebuild: bool = True
) -> list[InterruptPoint]:
    """Only the pending points of a verified body (what a listing shows), checked as
    ``parse_body`` checks them; anything malformed is a ``CheckpointError``. ``rebuild=False``
    keeps each ``info`` as its stored JSON (registered types as their tagged data)."""
    try:
        return _read_points(body, rebuild)
    except _MALFORMED as exc:
        raise _malformed(exc, checkpoint_id) from exc


def _read_points(body: dict[str, Any], rebuild: bool = True) -> list[InterruptPoint]:
    raw_points = body["points"]
    _expect(isinstance(raw_points, list), "points is not a list")
    _expect(bool(raw_points), "it has no pending points")
    read = from_json_value if rebuild else _as_stored
    return [
        InterruptPoint(id=p["id"], address=p["address"], info=read(p.get("info")))
        for p in raw_points
    ]


def still_waiting(points: list[Any], settled: Any) -> list[Any]:
    """The ``points`` (``InterruptPoint``s, or their stored dicts) that still wait for an
    answer: those not ``settled``, the ids of the points of calls that a resume ran and recorded
    in the checkpoint (``_progress``; a later resume replays them and ignores their answers).
    All of them when none is left: the checkpoint still waits for a resume, which any answer to
    those points starts. ``settled`` that is not a list of ids (none recorded) settles nothing."""
    if not settled or not isinstance(settled, list):
        return points
    done = {point_id for point_id in settled if isinstance(point_id, str)}
    left = [
        p for p in points if (p.id if isinstance(p, InterruptPoint) else p.get("id")) not in done
    ]
    return left or points


def _as_stored(value: Any) -> Any:
    return value


_MALFORMED = (CheckpointError, RecursionError, KeyError, TypeError, ValueError, ValidationError)


def _malformed(exc: BaseException, checkpoint_id: str) -> CheckpointError:
    """The error for a body that ``exc`` (one of ``_MALFORMED``) showed to be malformed: a
    ``CheckpointError`` named with the checkpoint, its ``reason`` kept (an unregistered type is
    ``"incompatible"``, not corrupt), anything else ``"corrupt"``."""
    if isinstance(exc, CheckpointError):
        return CheckpointError(f"checkpoint {checkpoint_id!r} {exc}", reason=exc.reason)
    if isinstance(exc, RecursionError):
        return CheckpointError(
            f"checkpoint {checkpoint_id!r} is malformed: nested too deeply", reason="corrupt"
        )
    return CheckpointError(f"checkpoint {checkpoint_id!r} is malformed: {exc!r}", reason="corrupt")
