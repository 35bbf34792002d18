"""Paired ratios: each peer's CPU per run over pyadk's, measured in adjacent processes.

Why: this machine alternates between two speeds (±1.5×) on a timescale of seconds. Dividing a
peer's median, pooled over a whole peers run, by pyadk's pooled median compares figures that may
come from different speed phases: the same code gave 15.8× and 29.6× an hour apart. Instead every
peer process runs between two pyadk processes of the same scenario (:func:`bracketed`), and the
peer's figure is divided by the mean of those two (:func:`paired_ratios`): a phase change during the
triple moves both sides alike, and one that falls between repeats lands on every SDK's pairs
alike. The reported figure is the median of the pairs, with their min–max.

Pure functions (no I/O), unit-tested in ``tests/test_benchmarks_smoke.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

__all__ = ["Process", "bracketed", "paired_ratios"]

# One measured process in run order: its SDK and the median CPU µs per run of each of its rows
# (a peer may measure several variants, e.g. "langgraph" and "langgraph [prebuilt]").
Process = tuple[str, Mapping[str, float]]


def bracketed(base: str, others: Sequence[str]) -> list[str]:
    """The order of one round of processes: ``base`` before, between and after the others.

    >>> bracketed("pyadk", ["p1", "p2"])
    ['pyadk', 'p1', 'pyadk', 'p2', 'pyadk']
    """
    order = [base]
    for other in others:
        order += [other, base]
    return order


def _nearest(timeline: Sequence[Process], start: int, step: int, base: str) -> float | None:
    """The figure of the closest ``base`` process from ``start`` towards ``step`` (±1)."""
    i = start + step
    while 0 <= i < len(timeline):
        sdk, figures = timeline[i]
        if sdk == base and base in figures:
            return figures[base]
        i += step
    return None


def paired_ratios(timeline: Sequence[Process], base: str = "pyadk") -> dict[str, list[float]]:
    """For every row of every non-``base`` process, its figure over the mean of the nearest
    ``base`` figures before and after it (one side alone when the other is missing, e.g. a failed
    process; no ratio when both are). ``timeline`` is one round of one scenario, in run order."""
    ratios: dict[str, list[float]] = {}
    for i, (sdk, figures) in enumerate(timeline):
        if sdk == base:
            continue
        sides = [_nearest(timeline, i, step, base) for step in (-1, 1)]
        known = [x for x in sides if x is not None]
        if not known:
            continue
        reference = statistics.fmean(known)
        for label, value in figures.items():
            ratios.setdefault(label, []).append(value / reference)
    return ratios
