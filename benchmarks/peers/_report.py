"""The peers mode's report: JSON rows per SDK and scenario, the summary against the 20× target, and
the side-by-side tables (also pasted into docs/performance.md).

Kept apart from the run itself (``benchmarks.peers.run_peers``) so the figures' definitions live in
one place: "CPU vs pyadk" is the median of per-round paired ratios (``benchmarks._pairing``), the
pooled figures stay beside it, and "instr vs pyadk" divides callgrind counts (``benchmarks._callgrind``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .._harness import WorkerResult, format_table

__all__ = [
    "TARGET_FACTOR",
    "TITLES",
    "peers_tables",
    "round_figures",
    "row_label",
    "scenario_rows",
    "summarise",
]

TITLES = {
    "a": "(a) one turn, model answers 'done'",
    "b": "(b) add(a=1, b=2) tool, then 'sum=3'",
    "c_a": "(c) 1,000 concurrent (a), per run",
    "c_b": "(c) 1,000 concurrent (b), per run",
    "c_a.inflight": "(c) 1,000 (a) in flight (model awaits)",
    "c_b.inflight": "(c) 1,000 (b) in flight (model awaits)",
    "d": "(d) sequential workflow of 10 steps",
}
TARGET_FACTOR = 20.0  # pyadk needs at least this much less CPU per run than the fastest peer

Key = tuple[str, str]  # (sdk or row label, scenario)


def row_label(sdk: str, variant: str) -> str:
    """A row's SDK column: the SDK, plus the variant when it is not the main one."""
    return sdk if variant in ("run", "concurrent") else f"{sdk} [{variant}]"


def _measured(scenario: str, variant: str) -> str:
    """The variant whose CPU a row shows: in (c) the concurrent arm, else the variant itself."""
    return "concurrent" if scenario.startswith("c_") else variant


def _row_variants(scenario: str, result: WorkerResult) -> list[str]:
    return ["run"] if scenario.startswith("c_") else list(result.variants)


def round_figures(
    sdk: str, scenario: str, samples: Mapping[str, Mapping[str, float]]
) -> dict[str, float]:
    """One round's CPU µs per run for each of the SDK's rows, the input of the pairing."""
    if scenario.startswith("c_"):
        return {sdk: samples["concurrent"]["cpu"]} if "concurrent" in samples else {}
    return {row_label(sdk, variant): arm["cpu"] for variant, arm in samples.items()}


def _concurrency(row: dict[str, Any], result: WorkerResult) -> None:
    """(c) rows: concurrent over sequential per round, net of asyncio's gather, GC rates."""
    ratio, net = result.concurrency_ratios()
    row["sequential_cpu_us"] = round(result.cpu("sequential").median, 2)
    row["concurrent_over_sequential"] = round(ratio.median, 3)
    row["asyncio_gather_us"] = round(result.cpu("asyncio").median, 2)
    row["net_of_asyncio"] = round(net.median, 3)
    for arm in ("concurrent", "sequential"):
        rates = result.gc_per_1000(arm)
        if rates is not None:
            row[f"gc_per_1000_runs_{arm}"] = [round(x, 3) for x in rates]


def _ratios(row: dict[str, Any], pairs: Sequence[float], pooled: float | None) -> None:
    """``x_pyadk`` is the median of the paired ratios; the pooled one stays for reference."""
    if pairs:
        row["x_pyadk"] = round(statistics.median(pairs), 2)
        row["x_pyadk_min"] = round(min(pairs), 2)
        row["x_pyadk_max"] = round(max(pairs), 2)
        row["x_pyadk_pairs"] = [round(x, 2) for x in pairs]
    if pooled is not None:
        row["x_pyadk_pooled"] = round(pooled, 2)


def _instructions(
    row: dict[str, Any], counts: Mapping[Key, dict[str, Any]] | None, label: str, scenario: str
) -> None:
    if counts is None:
        return
    mine = counts.get((label, scenario))
    if mine is None:
        return
    row.update(mine)
    base = counts.get(("pyadk", scenario), {}).get("instructions_per_run")
    if "instructions_per_run" in mine and base:
        row["instructions_x_pyadk"] = round(mine["instructions_per_run"] / base, 2)


def scenario_rows(
    scenario: str,
    sdks: Sequence[str],
    results: Mapping[Key, WorkerResult],
    errors: Mapping[Key, str],
    ratios: Mapping[str, Sequence[float]],
    counts: Mapping[Key, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The JSON rows of one scenario: pooled figures per SDK and variant, the paired ratio to
    pyadk, (c)'s concurrency figures and, when counted, instructions per run."""
    base = results.get(("pyadk", scenario))
    base_cpu = None
    if base is not None and base.unsupported is None:
        base_cpu = base.cpu(_measured(scenario, "run")).median
    rows: list[dict[str, Any]] = []
    for sdk in sdks:
        result = results.get((sdk, scenario))
        if result is None:
            rows.append({"sdk": sdk, "scenario": scenario, "error": errors.get((sdk, scenario))})
            continue
        if result.unsupported is not None:
            rows.append({"sdk": sdk, "scenario": scenario, "unsupported": result.unsupported})
            continue
        for variant in _row_variants(scenario, result):
            label = row_label(sdk, variant)
            measured = _measured(scenario, variant)
            row: dict[str, Any] = {"benchmark": f"{sdk}.{scenario}", "sdk": label}
            row["scenario"] = scenario
            row.update(result.base_row(measured))
            if scenario.startswith("c_"):
                _concurrency(row, result)
            if sdk == "pyadk":
                row["x_pyadk"] = 1.0
            else:
                pooled = None if base_cpu is None else result.cpu(measured).median / base_cpu
                _ratios(row, ratios.get(label, []), pooled)
            _instructions(row, counts, label, scenario)
            rows.append(row)
    return rows


def summarise(rows: Sequence[dict[str, Any]], scenarios: Sequence[str]) -> list[dict[str, Any]]:
    """Per scenario, the fastest peer by paired CPU ratio and the verdict against the target;
    with instruction counts, the peer closest to pyadk in instructions too."""
    summary: list[dict[str, Any]] = []
    for scenario in scenarios:
        peers = [r for r in rows if r["scenario"] == scenario and r["sdk"] != "pyadk"]
        timed = [r for r in peers if "x_pyadk" in r]
        if not timed:
            continue
        fastest = min(timed, key=lambda r: r["x_pyadk"])
        entry: dict[str, Any] = {
            "scenario": scenario,
            "fastest_peer": fastest["sdk"],
            "x_pyadk": fastest["x_pyadk"],
            "x_pyadk_min": fastest.get("x_pyadk_min"),
            "x_pyadk_max": fastest.get("x_pyadk_max"),
            "x_pyadk_pooled": fastest.get("x_pyadk_pooled"),
            "target": TARGET_FACTOR,
            "ok": fastest["x_pyadk"] >= TARGET_FACTOR,
        }
        counted = [r for r in peers if "instructions_x_pyadk" in r]
        if counted:
            leanest = min(counted, key=lambda r: r["instructions_x_pyadk"])
            entry["fewest_instructions_peer"] = leanest["sdk"]
            entry["instructions_x_pyadk"] = leanest["instructions_x_pyadk"]
        summary.append(entry)
    return summary


# -- tables -------------------------------------------------------------------------------------------
def _fig(row: dict[str, Any], key: str, digits: int = 0) -> str:
    return f"{row[key]:.{digits}f} ({row[key + '_min']:.{digits}f}–{row[key + '_max']:.{digits}f})"


def _ratio_cell(row: dict[str, Any]) -> str:
    if "x_pyadk" not in row:
        return "–"
    if "x_pyadk_min" not in row:
        return f"{row['x_pyadk']:.1f}×"
    return f"{row['x_pyadk']:.1f}× ({row['x_pyadk_min']:.1f}–{row['x_pyadk_max']:.1f})"


def _instruction_cells(row: dict[str, Any], note: str | None) -> list[str]:
    if "instructions_per_run" in row:
        ratio = row.get("instructions_x_pyadk")
        return [
            f"{row['instructions_per_run'] / 1000:,.1f}",
            "–" if ratio is None else f"{ratio:.1f}×",
        ]
    if "instructions_error" in row:
        return [f"error: {row['instructions_error']}"[:60], ""]
    return [note or "–", ""]


def _concurrency_cell(row: dict[str, Any]) -> str:
    if "concurrent_over_sequential" not in row:
        return "–"
    text = f"{row['concurrent_over_sequential']:.2f}×"
    if "net_of_asyncio" in row:
        text += f" ({row['net_of_asyncio']:.2f}×)"
    return text


def _rows_table(document: dict[str, Any]) -> str:
    counted = "instructions" in document
    note = document.get("instructions", {}).get("note")
    headers = ["scenario", "SDK", "CPU µs/run", "wall µs/run", "peak RSS MiB", "CPU vs pyadk"]
    if counted:
        headers += ["k instr/run", "instr vs pyadk"]
    headers.append("concurrent / sequential (net of asyncio)")
    lines = []
    for row in document["rows"]:
        title = TITLES[row["scenario"]]
        if "unsupported" in row or "error" in row:
            text = row.get("unsupported") or f"error: {row.get('error')}"
            lines.append([title, row["sdk"], f"n/a: {text}"] + [""] * (len(headers) - 3))
            continue
        cells = [title, row["sdk"], _fig(row, "cpu_us"), _fig(row, "wall_us")]
        cells += [f"{row['peak_rss_mib']:.0f}", _ratio_cell(row)]
        if counted:
            cells += _instruction_cells(row, note)
        cells.append(_concurrency_cell(row))
        lines.append(cells)
    return format_table(headers, lines)


def _summary_table(document: dict[str, Any]) -> str:
    counted = "instructions" in document
    headers = ["scenario", "fastest peer", "its CPU / pyadk's (paired)", "pooled", "target", "ok"]
    if counted:
        headers.append("fewest instructions: peer / pyadk")
    lines = []
    for s in document["summary"]:
        low, high = s.get("x_pyadk_min"), s.get("x_pyadk_max")
        spread = "" if low is None else f" ({low:.1f}–{high:.1f})"
        pooled = s.get("x_pyadk_pooled")
        line = [TITLES[s["scenario"]], s["fastest_peer"], f"{s['x_pyadk']:.1f}×{spread}"]
        line += ["–" if pooled is None else f"{pooled:.1f}×", f"≥ {s['target']:g}×"]
        line.append("pass" if s["ok"] else "FAIL")
        if counted:
            ratio = s.get("instructions_x_pyadk")
            peer = s.get("fewest_instructions_peer")
            line.append("–" if ratio is None else f"{ratio:.1f}× ({peer})")
        lines.append(line)
    return format_table(headers, lines)


def _imports_table(document: dict[str, Any]) -> str:
    imports = [
        [
            r["sdk"],
            f"{r['import_ms']:.0f} ({r['import_ms_min']:.0f}–{r['import_ms_max']:.0f})",
            f"{r['rss_mib']:.1f}",
            str(r["modules"]),
        ]
        for r in document["imports"]
    ]
    return format_table(["SDK", "import ms", "RSS after import MiB", "modules"], imports)


def peers_tables(document: dict[str, Any]) -> str:
    """The side-by-side tables: every row, the summary, and (when timed) the imports."""
    out = [_rows_table(document)]
    if document["summary"]:
        out += ["", _summary_table(document)]
    if document["imports"]:
        out += ["", _imports_table(document)]
    return "\n".join(out)
