"""The benchmark harness's arithmetic: pairing peer rounds with pyadk rounds, and instruction counts.

These functions decide the figures the performance claims rest on (``docs/performance.md``), so
their edge cases are pinned here: a speed switch between two pyadk rounds, a failed round, the
difference of two callgrind processes, and the run counts sized from a native figure.
"""

from __future__ import annotations

import pytest

from benchmarks._callgrind import parse_collected, per_run, runs_for
from benchmarks._harness import WorkerResult
from benchmarks._pairing import interleaved, paired_ratios
from benchmarks.peers import select


def test_every_peer_round_sits_between_two_pyadk_rounds() -> None:
    order = interleaved("pyadk", ["p1", "p2"], rounds=2)
    assert order == ["pyadk", "p1", "pyadk", "p2", "pyadk", "p1", "pyadk", "p2", "pyadk"]
    assert interleaved("pyadk", [], rounds=3) == ["pyadk"]


def test_a_peer_round_is_divided_by_the_mean_of_its_pyadk_neighbours() -> None:
    timeline = [
        ("pyadk", {"pyadk": 10.0}),
        ("p1", {"p1": 220.0, "p1 [prebuilt]": 330.0}),
        ("pyadk", {"pyadk": 12.0}),
        ("p2", {"p2": 120.0}),
        ("pyadk", {"pyadk": 12.0}),
    ]
    ratios = paired_ratios(timeline)
    assert ratios == {"p1": [20.0], "p1 [prebuilt]": [30.0], "p2": [10.0]}


def test_a_round_straddling_a_speed_switch_is_left_out() -> None:
    timeline = [
        ("pyadk", {"pyadk": 10.0}),
        ("p1", {"p1": 200.0}),  # neighbours 10 and 10: kept (20x)
        ("pyadk", {"pyadk": 10.0}),
        ("p1", {"p1": 300.0}),  # neighbours 10 and 15 (1.5x apart): the speed switched
        ("pyadk", {"pyadk": 15.0}),
    ]
    assert paired_ratios(timeline) == {"p1": [20.0]}


def test_straddling_rounds_count_when_they_are_all_there_is() -> None:
    timeline = [("pyadk", {"pyadk": 10.0}), ("p1", {"p1": 300.0}), ("pyadk", {"pyadk": 20.0})]
    assert paired_ratios(timeline) == {"p1": [20.0]}


def test_a_round_next_to_a_failed_pyadk_round_uses_the_one_side_it_has() -> None:
    # pyadk's worker failed after its first round: later peer rounds pair with that round alone.
    timeline = [("pyadk", {"pyadk": 10.0}), ("p1", {"p1": 150.0}), ("p2", {"p2": 50.0})]
    assert paired_ratios(timeline) == {"p1": [15.0], "p2": [5.0]}
    assert paired_ratios([("p1", {"p1": 1.0})]) == {}


def test_callgrinds_total_is_read_from_its_stderr() -> None:
    stderr = (
        "==4242== Callgrind, a call-graph generating cache profiler\n"
        "==4242== Events    : Ir\n"
        "==4242== Collected : 1234567890\n"
        "==4242== \n==4242== I   refs:      1,234,567,890\n"
    )
    assert parse_collected(stderr) == 1_234_567_890
    with pytest.raises(ValueError, match=r"no 'Collected :' line.*valgrind: not found"):
        parse_collected("valgrind: not found\n")


def test_instructions_per_run_are_the_difference_of_two_processes() -> None:
    # Start-up, imports and warm-up (1,000,000 here) cancel out; 100 extra runs cost 9,000,000.
    assert per_run((1_000_000 + 50 * 90_000, 1_000_000 + 150 * 90_000), (50, 150)) == 90_000
    with pytest.raises(ValueError, match="more runs"):
        per_run((1, 2), (100, 100))


def test_run_counts_are_sized_from_the_native_cost() -> None:
    assert runs_for(8.0) == (2500, 7500)  # 40 ms / 8 us = 5,000 runs of difference
    assert runs_for(8.0, quick=True) == (500, 1500)  # 8 ms / 8 us = 1,000
    assert runs_for(45.0) == (250, 750)  # 888 wanted: rounded down to 500
    assert runs_for(100_000.0) == (5, 15)  # never fewer than 10 runs of difference
    first, second = runs_for(0.0)
    assert second - first == 5000  # the ladder's top, not a division by zero


def test_peers_mode_selects_scenarios_and_rejects_unknown_names() -> None:
    everything = ["a", "b", "c_a", "c_b", "c_a.inflight", "c_b.inflight", "d"]
    assert select(None) == (everything, True)
    assert select("d,c") == (everything[2:], False)
    assert select("import, a") == (["a"], True)
    with pytest.raises(ValueError, match="unknown peers benchmark 'e'"):
        select("a,e")


def test_concurrency_ratios_pair_the_arms_of_each_round() -> None:
    """Raw = concurrent / sequential and net = (concurrent - asyncio's share) / sequential, per
    round (the arms of a round ran back to back), then the median over rounds."""
    result = WorkerResult(
        variants={
            "sequential": {"cpu": [10.0, 20.0, 10.0], "wall": []},
            "concurrent": {"cpu": [15.0, 26.0, 13.0], "wall": []},
            "asyncio": {"cpu": [4.0, 4.0, 2.0], "wall": []},
        }
    )
    raw, net = result.concurrency_ratios()
    assert (raw.low, raw.median, raw.high) == (1.3, 1.3, 1.5)
    assert (net.low, net.median, net.high) == (1.1, 1.1, 1.1)
