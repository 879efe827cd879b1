"""An explain job's answer from its boots: does the pair still show the job's change on the
diagnostics kernels, which statistics moved, and the Why lines. Pure (ExplainWorkflow
calls it on the boots' results)."""

import statistics
from collections import Counter
from dataclasses import dataclass

from kbisect.contract import EXPLAIN_NOTES, EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS, TestStatus
from kbisect.explain.compare import Change, Comparison, change_of, compare
from kbisect.explain.why import why_lines
from kbisect.model import LEFT_OUT, stats_of, top_stacks
from kbisect.workflows.explain_types import ExplainBootResult

EXPLAINED, UNEXPLAINED, NO_EFFECT = "explained", "unexplained", "no-effect"
NAMED = 4  # boots a note names; past them, how many more said it


@dataclass(frozen=True)
class Summary:
    status: str  # EXPLAINED, UNEXPLAINED or NO_EFFECT
    effect: Change  # the job's metric, parent -> culprit, on the explain kernels
    comparison: Comparison
    why: list[str]
    stacks: dict[str, dict[str, int]]  # "parent", "culprit": their boots' stacks summed
    message: str
    notes: list[str]  # what of the boots' was left out, EXPLAIN_NOTES lines at most


def ran(boots: list[ExplainBootResult]) -> list[ExplainBootResult]:
    """The boots that ran and scored."""
    return [b for b in boots if b.status == TestStatus.OK and b.samples]


def score(boot: ExplainBootResult) -> float:
    """A boot's value, as a test's is: the median of its repetitions."""
    return statistics.median(boot.samples)


def summarise(
    parent: list[ExplainBootResult], culprit: list[ExplainBootResult], metric: str
) -> Summary:
    """ValueError: fewer than two boots ran on a side (the caller says which failed), or
    the metric's figures do not compare."""
    p, c = ran(parent), ran(culprit)
    if len(p) < 2 or len(c) < 2:
        raise ValueError(
            f"{len(p)} of the parent's and {len(c)} of the culprit's explain boots ran: "
            "two a side are the least a comparison takes"
        )
    effect = change_of("metric", metric, [score(b) for b in p], [score(b) for b in c])
    comparison = compare([stats_of(b.stats) for b in p], [stats_of(b.stats) for b in c])
    shown = (
        effect.low is not None and effect.high is not None and not effect.low <= 0 <= effect.high
    )
    if not shown:
        status = NO_EFFECT
        message = (
            f"the explain kernels do not show the change in {metric} ({_pct(effect)}): the "
            "diagnostics options or the profiler may hide it; what moved is listed anyway"
        )
    elif comparison.changes:
        status = EXPLAINED
        message = f"{metric} {_pct(effect)}; {comparison.listed} statistics moved with it"
    else:
        status = UNEXPLAINED
        message = (
            f"{metric} {_pct(effect)}, and no statistic moved beyond its noise: more boots "
            "(--boots) or a testcase that reads what changed"
        )
    said: list[str] = []
    stacks = {"parent": _summed("parent", p, said), "culprit": _summed("culprit", c, said)}
    said += _said({"parent": p, "culprit": c})
    return Summary(
        status, effect, comparison, why_lines(comparison), stacks, message, _capped(said)
    )


def _pct(c: Change) -> str:
    """'8 → 512: +6300.0% (95% CI ...)': the sides' means first (a counter's change reads
    as its levels), then the change."""
    sides = f"{c.parent:.6g} → {c.culprit:.6g}"
    if c.change is None or c.low is None or c.high is None:
        return f"{sides} (from none)"
    return f"{sides}: {c.change:+.1f}% (95% CI {c.low:+.1f}% to {c.high:+.1f}%)"


def _summed(side: str, boots: list[ExplainBootResult], said: list[str]) -> dict[str, int]:
    """The side's stacks summed over its boots, as many as a boot keeps (the others'
    samples under LEFT_OUT, said in `said`)."""
    total: Counter[str] = Counter()
    for b in boots:
        total.update(b.stacks)
    kept = top_stacks(total, EXPLAIN_STACKS, EXPLAIN_STACKS_CHARS)
    if kept[LEFT_OUT] > total[LEFT_OUT]:
        said.append(
            f"flame graph: {kept[LEFT_OUT] - total[LEFT_OUT]:,} of the {side}'s samples left "
            f"out, in stacks past its {EXPLAIN_STACKS:,} most sampled over its boots"
        )
    return dict(kept)


def _said(sides: dict[str, list[ExplainBootResult]]) -> list[str]:
    """The boots' notes, each once with the boots that said it (a few named)."""
    said: dict[str, list[str]] = {}
    for side, boots in sides.items():
        for i, b in enumerate(boots, 1):
            for note in b.notes:
                said.setdefault(note, []).append(f"{side} {i}")
    every = sum(len(boots) for boots in sides.values())
    return [f"{note} ({_boots(who, every)})" for note, who in said.items()]


def _boots(who: list[str], every: int) -> str:
    if len(who) == every:
        return "every boot"
    more = f" and {len(who) - NAMED} more" if len(who) > NAMED else ""
    return f"boots {', '.join(who[:NAMED])}{more}"


def _capped(notes: list[str]) -> list[str]:
    if len(notes) <= EXPLAIN_NOTES:
        return notes
    return [*notes[: EXPLAIN_NOTES - 1], f"... and {len(notes) - EXPLAIN_NOTES + 1} more"]
