"""A sweep's answer in words: one line (or table row, or JSON entry) per neighbouring pair
and metric, and each kernel's level with its interval."""

import math
import statistics
from dataclasses import dataclass
from typing import Any

from kbisect.decide.stats import robust_mean, t_quantile, trimmed, winsorized_ss
from kbisect.decide.sweep import boots_to_rule_out, boots_to_settle, verdicts_text
from kbisect.reports.lines import md_text
from kbisect.testcases.blocktrace import compare, traces_of
from kbisect.workflows.series_types import SeriesAlert
from kbisect.workflows.sweep_types import (
    PairWord,
    SweepBoot,
    SweepPair,
    SweepResult,
    is_cannot_test,
)


@dataclass(frozen=True)
class Level:
    """One kernel's value under one testcase: the boots' 20% trimmed mean and its 95%
    interval (NaN-wide with fewer than 2 boots)."""

    mean: float
    low: float
    high: float
    boots: int


def level(values: list[float]) -> Level:
    if not values:
        return Level(math.nan, math.nan, math.nan, 0)
    mean = robust_mean(values)
    h = len(trimmed(values))
    if h < 2:
        return Level(mean, math.nan, math.nan, len(values))
    half = t_quantile(0.975, h - 1) * math.sqrt(winsorized_ss(values) / (h * (h - 1)))
    return Level(mean, mean - half, mean + half, len(values))


def values_by_kernel(result: SweepResult, testcase: str) -> list[list[float]]:
    """Each kernel's boot values under `testcase`, in series order."""
    by_kernel: list[list[float]] = [[] for _ in result.kernels]
    for b in result.boots:
        if b.testcase == testcase and b.value is not None:
            by_kernel[b.kernel].append(b.value)
    return by_kernel


def levels(result: SweepResult, testcase: str) -> list[Level]:
    """Each kernel's level under `testcase`, in series order."""
    return [level(v) for v in values_by_kernel(result, testcase)]


def boot_word(b: SweepBoot) -> str:
    """A boot's value, or why it gave none (a cell that cannot test says so as it is)."""
    if b.value is not None:
        return f"{b.value:.6g}"
    return b.error if is_cannot_test(b.error) else f"failed: {b.error}"


def entry_name(names: list[str], k: int) -> str:
    """The series' k-th kernel by its name, numbered (#k, from 1) when the same name
    comes more than once (an A/A series)."""
    return f"{names[k]} #{k + 1}" if names.count(names[k]) > 1 else names[k]


def label(result: SweepResult, k: int) -> str:
    """A kernel as the user named it (its subject when it was given as a hash)."""
    names = [
        n or (result.subjects[i] if i < len(result.subjects) else "") or result.kernels[i][:12]
        for i, n in enumerate(result.names or [""] * len(result.kernels))
    ]
    return entry_name(names, k)


def effect_text(pair: SweepPair) -> str:
    if pair.effect is None:
        return "-"
    if pair.low is None or pair.high is None:
        return f"{pair.effect:+.1%}"
    return f"{pair.effect:+.1%} ({pair.low:+.1%} to {pair.high:+.1%})"


def verdict_text(pair: SweepPair) -> str:
    if pair.verdict == PairWord.CHANGED:
        return f"changed ({pair.direction})"
    if pair.bound is not None and pair.verdict == PairWord.CANNOT_TELL:
        return f"cannot tell (no change above {pair.bound:.0%})"
    return pair.verdict


def pair_line(result: SweepResult, pair: SweepPair) -> str:
    """One pair as one plain line (piped output and chat)."""
    return pair_text(pair, label(result, pair.old), label(result, pair.new))


def alert_line(alert: SeriesAlert) -> str:
    """A series watch's alert: the pair's line, and the sweep that found it."""
    return f"{alert.watch}: {pair_text(alert.pair, alert.old, alert.new)} (sweep {alert.sweep})"


def alert_lines(alert: SeriesAlert, result: SweepResult) -> list[str]:
    """An alert as the doors post it: its line, the pair's traces, the report command."""
    traced = [f"trace {line}" for line in trace_lines(result, alert.pair)]
    if alert.pair.verdict == PairWord.CANNOT_TELL:
        head = [f"kbisect could not decide: {alert_line(alert)}", *noise_lines(result)]
    else:
        head = [f"kbisect alert: {alert_line(alert)}"]
    return [*head, *traced, f"kbisect report {alert.sweep}"]


def pair_text(pair: SweepPair, old: str, new: str) -> str:
    return (
        f"{pair.testcase} {pair.metric}: {old} -> {new}: "
        f"{verdict_text(pair)}, {effect_text(pair)}, "
        f"{pair.boots_old}+{pair.boots_new} boots"
        + (f"; {pair.message}" if pair.verdict == PairWord.CANNOT_TELL and pair.message else "")
    )


def trace_lines(result: SweepResult, pair: SweepPair) -> list[str]:
    """A changed pair's two traced boots side by side, a line a disk (--trace)."""
    found = {(t.testcase, t.kernel): t.diagnostics for t in result.traces}
    old, new = found.get((pair.testcase, pair.old)), found.get((pair.testcase, pair.new))
    if old is None or new is None:
        return []
    if "error" in old or "error" in new:
        return [f"no comparison: {old.get('error') or new.get('error')}"]
    ta, tb = traces_of(old), traces_of(new)
    return [compare(ta[disk], tb[disk]) for disk in ta if disk in tb]


def cap_of(result: SweepResult) -> int:
    """The most boots a kernel could get (a sweep before --max-boots: its budget)."""
    return max(result.budget, result.max_boots)


def kernel_cvs(result: SweepResult, testcase: str) -> list[float | None]:
    """Each kernel's boot-to-boot noise under `testcase`: its boots' coefficient of
    variation (None under 2 boots)."""
    return [
        statistics.stdev(v) / abs(statistics.fmean(v))
        if len(v) > 1 and statistics.fmean(v)
        else None
        for v in values_by_kernel(result, testcase)
    ]


def noise_lines(result: SweepResult) -> list[str]:
    """For a testcase with a pair the noise left undecided: what the host's noise costs,
    when it is more than the sweep could boot."""
    lines = []
    cap = cap_of(result)
    for tc in result.testcases:
        noisy = [
            p for p in result.pairs
            if p.testcase == tc.name and p.verdict == PairWord.CANNOT_TELL
            and p.boots_old and p.boots_new
        ]  # fmt: skip
        cvs = [c for c in kernel_cvs(result, tc.name) if c is not None]
        if not noisy or not cvs:
            continue
        cv = statistics.median(cvs)
        settle = [
            boots_to_settle(p.low, p.high, min(p.boots_old, p.boots_new), result.min_effect)
            for p in noisy
            if p.low is not None and p.high is not None
        ]
        from_pairs = [n for n in settle if n is not None]
        need = max(
            boots_to_rule_out(cv, result.min_effect),
            round(statistics.median(from_pairs)) if from_pairs else 0,
        )
        if need > cap:
            lines.append(
                f"this host's noise (CV {cv:.0%}, {tc.name}) needs about {need} boots a "
                f"kernel to rule out {result.min_effect:.0%}: quiet the host or raise "
                f"--max-boots ({cap})"
            )
    return lines


def summary_line(result: SweepResult) -> str:
    ran = sum(b.value is not None for b in result.boots)
    return (
        f"{verdicts_text(result.pairs)}; {ran} boots of {len(result.kernels)} kernels "
        f"(at most {cap_of(result)} each)"
    )


def rows(result: SweepResult) -> list[list[str]]:
    """The table: pair, metric, effect with its 95% interval, verdict, boots. A pair that
    cannot tell without boots to bound it says why (a kernel that cannot test, or does
    not build)."""
    return [
        [
            f"{label(result, p.old)} -> {label(result, p.new)}",
            f"{p.testcase} {p.metric}",
            effect_text(p),
            verdict_text(p) + (f": {p.message}" if _unbounded(p) else ""),
            f"{p.boots_old}+{p.boots_new}",
        ]
        for p in result.pairs
    ]


def _unbounded(p: SweepPair) -> bool:
    return p.verdict == PairWord.CANNOT_TELL and p.bound is None and bool(p.message)


HEADERS = ["pair", "testcase metric", "effect (95% CI)", "verdict", "boots"]


def markdown(result: SweepResult) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(md_text(cell) for cell in r) + " |" for r in rows(result)]
    traced = [(p, trace_lines(result, p)) for p in result.pairs]
    if any(t for _, t in traced):
        lines += ["", "Block-layer traces (one traced boot each):", ""]
        for pair, found in traced:
            old, new = label(result, pair.old), label(result, pair.new)
            what = md_text(f"{pair.testcase}, {old} -> {new}")
            lines += [f"- {what}: {md_text(line)}" for line in found]
    noise = [
        part for line in noise_lines(result) for part in ("", md_text(line))
    ]  # a paragraph each
    return "\n".join([*lines, "", summary_line(result), *noise])


def _kernel(result: SweepResult, k: int) -> dict[str, Any]:
    name = result.names[k] if k < len(result.names) else ""
    return {
        "position": k,  # in the series, from 0
        "name": name or result.subjects[k],
        "commit": result.kernels[k],
        "subject": result.subjects[k],
    }


def _traces(result: SweepResult, pair: SweepPair) -> dict[str, Any]:
    found = {(t.testcase, t.kernel): t.diagnostics for t in result.traces}
    old, new = found.get((pair.testcase, pair.old)), found.get((pair.testcase, pair.new))
    return {"traces": {"old": old, "new": new}} if old is not None and new is not None else {}


def userlands(result: SweepResult, testcase: str) -> list[str]:
    """How each kernel's guests reached the host userland for the testcase: 9p, squashfs,
    or "" (an initramfs testcase, or no boot ran)."""
    ways = [""] * len(result.kernels)
    for b in result.boots:
        if b.testcase == testcase and b.userland:
            ways[b.kernel] = b.userland
    return ways


def to_json(result: SweepResult, job_id: str = "") -> dict[str, Any]:
    """One entry per neighbouring pair and metric, holding both kernels."""
    pairs = []
    for p in result.pairs:
        pairs.append(
            {
                "old": _kernel(result, p.old),
                "new": _kernel(result, p.new),
                "testcase": p.testcase,
                "metric": p.metric,
                "unit": p.unit,
                "effect": p.effect,
                "low": p.low,
                "high": p.high,
                "verdict": p.verdict,
                "direction": p.direction,
                "bound": p.bound,
                "boots": [p.boots_old, p.boots_new],
                "message": p.message,
                **_traces(result, p),
            }
        )
    return {
        "id": job_id,
        "kernels": [_kernel(result, k) for k in range(len(result.kernels))],
        "pairs": pairs,
        "boots": sum(b.value is not None for b in result.boots),
        "failed_boots": sum(b.value is None for b in result.boots),
        "budget": result.budget,
        "max_boots": cap_of(result),
        "summary": summary_line(result),
        "noise": {tc.name: kernel_cvs(result, tc.name) for tc in result.testcases},
        "noise_lines": noise_lines(result),
        "userland": {tc.name: userlands(result, tc.name) for tc in result.testcases},
    }
