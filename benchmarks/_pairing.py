"""Paired ratios: each peer's CPU per run over pyadk's, measured next to each other in time.

Why: this machine alternates between two speeds (±1.5×) on a timescale of seconds. Dividing a
peer's median, pooled over a whole peers run, by pyadk's pooled median compares figures that may
come from different speed phases: the same code gave 15.8× and 29.6× an hour apart. So the peers
mode keeps one worker per SDK alive and alternates their rounds (:func:`interleaved`: pyadk, peer,
pyadk, other peer, pyadk, ...), and each peer round is divided by the mean of the pyadk rounds just
before and after it (:func:`paired_ratios`), a fraction of a second away: the two sides of a pair
run at the same speed, except around a switch, which the two pyadk rounds disagreeing shows (such
pairs are left out). The reported figure is the median of the pairs, with their min–max.

Pure functions (no I/O), unit-tested in ``tests/test_benchmark_figures.py``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

__all__ = ["STRADDLE", "Sample", "interleaved", "paired_ratios"]

# Two pyadk rounds this far apart (the machine's two speeds differ by ~1.4×; a round's own noise
# is a few %) mean the speed switched between them.
STRADDLE = 1.25

# One measured round, in run order: its SDK and the CPU µs per run of each of its rows (a peer may
# measure several variants, e.g. "langgraph" and "langgraph [prebuilt]"; pyadk's row is "pyadk").
Sample = tuple[str, Mapping[str, float]]


def interleaved(base: str, others: Sequence[str], rounds: int = 1) -> list[str]:
    """The order of rounds: ``base`` first, then every other SDK followed by ``base``, ``rounds``
    times over, so each round of another SDK sits between two rounds of ``base``.

    >>> interleaved("pyadk", ["p1", "p2"], rounds=2)
    ['pyadk', 'p1', 'pyadk', 'p2', 'pyadk', 'p1', 'pyadk', 'p2', 'pyadk']
    """
    order = [base]
    for _ in range(rounds):
        for other in others:
            order += [other, base]
    return order


def _nearest(timeline: Sequence[Sample], start: int, step: int, base: str) -> float | None:
    """The figure of the closest ``base`` round from ``start`` towards ``step`` (±1)."""
    i = start + step
    while 0 <= i < len(timeline):
        sdk, figures = timeline[i]
        if sdk == base and base in figures:
            return figures[base]
        i += step
    return None


def paired_ratios(
    timeline: Sequence[Sample], base: str = "pyadk", max_spread: float = STRADDLE
) -> dict[str, list[float]]:
    """For every row of every non-``base`` round, its figure over the mean of the nearest ``base``
    figures before and after it (one side alone when the other is missing, e.g. after a failure;
    no ratio when both are). ``timeline`` is one scenario's rounds, in run order.

    A round whose two ``base`` neighbours differ by more than ``max_spread`` straddles a switch of
    the machine's speed: the round itself ran at one speed or the other, unknowably, so its ratio
    is left out, unless no round of that row is left, then they all count."""
    kept: dict[str, list[float]] = {}
    straddling: dict[str, list[float]] = {}
    for i, (sdk, figures) in enumerate(timeline):
        if sdk == base:
            continue
        sides = [
            x for x in (_nearest(timeline, i, step, base) for step in (-1, 1)) if x is not None
        ]
        if not sides:
            continue
        reference = statistics.fmean(sides)
        into = straddling if max(sides) > max_spread * min(sides) else kept
        for label, value in figures.items():
            into.setdefault(label, []).append(value / reference)
    for label, values in straddling.items():
        kept.setdefault(label, values)
    return kept
