"""Scores across commits as a picture: what people would rather look at than read."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

from kbisect.reports.answer import answer_word
from kbisect.reports.lines import pass_fail_counts
from kbisect.workflows.bisect_types import BisectResult

COLOURS = {"good": "tab:green", "bad": "tab:red", "skip": "tab:gray"}
VERIFY_COLOUR = "tab:blue"
TITLE_SUBJECT = 48  # characters of the culprit's subject in the title


@dataclass(frozen=True)
class Point:
    x: int  # place in history, oldest first (-1: the old endpoint, len: the verify commit)
    y: float
    colour: str
    label: str
    text: str = ""


@dataclass(frozen=True)
class PlotData:
    points: list[Point]
    culprit_x: int | None
    star: Point | None  # the verification, beside the endpoint it was made from
    boots: list[Point] = field(default_factory=list)  # each boot, where a commit had several
    # the spread of each such commit's boots: (x, lowest, highest, colour)
    spreads: list[tuple[int, float, float, str]] = field(default_factory=list)


def plot_data(result: BisectResult) -> PlotData:
    """What the picture shows, as data: one point per measured commit, the culprit's place
    and the verification commit's score."""
    points = [
        Point(s.index, s.value, COLOURS.get(s.verdict, "black"), s.verdict, s.commit[:7])
        for s in result.steps
        if s.value is not None
    ]
    culprit_x = next((s.index for s in result.steps if s.commit == result.culprit), None)
    star = None
    v = result.verification
    if v is not None and v.value is not None:
        xs = [s.index for s in result.steps] or [0]
        revert = v.kind == "revert"
        change = v.change[:12]
        where = f"{change} reverted on new" if revert else f"{change} applied to old"
        # Right of the new endpoint for a revert, left of the old one for a backport.
        x = max(xs) + 1 if revert else min(xs) - 1
        tick = f"revert {v.change[:7]}" if revert else f"+{v.change[:7]}"
        star = Point(x, v.value, VERIFY_COLOUR, f"{where}: {v.status}", tick)
    boots = [
        Point(s.index, y, COLOURS.get(s.verdict, "black"), "one boot")
        for s in result.steps
        if len(s.scores) > 1
        for y in s.scores
    ]
    spreads = [
        (s.index, min(s.scores), max(s.scores), COLOURS.get(s.verdict, "black"))
        for s in result.steps
        if len(s.scores) > 1
    ]
    return PlotData(points, culprit_x if result.culprit else None, star, boots, spreads)


@dataclass(frozen=True)
class Bar:
    x: int  # place in history, oldest first (-1: the old endpoint)
    passed: int
    failed: int
    text: str


def pass_fail_bars(result: BisectResult) -> list[Bar]:
    """A pass/fail job's boots: per tested commit, how many passed and how many failed."""
    return [
        Bar(
            s.index,
            *pass_fail_counts(s),
            s.commit[:7],
        )
        for s in result.steps
        if s.scores
    ]


def _pass_fail_axes(result: BisectResult, ax: Any) -> None:
    bars = pass_fail_bars(result)
    xs = [b.x for b in bars]
    passed = [b.passed for b in bars]
    failed = [b.failed for b in bars]
    if any(passed):  # (a legend entry of no bar would show its colour all the same)
        ax.bar(xs, passed, color=COLOURS["good"], label="passed")
    if any(failed):
        ax.bar(xs, failed, bottom=passed, color=COLOURS["bad"], label="failed")
    _hash_ticks(ax, {b.x: b.text for b in bars})
    ax.set_ylabel("boots")
    ax.yaxis.get_major_locator().set_params(integer=True)


def plot_scores(result: BisectResult, out: Path) -> Path:
    """One point per tested commit, in history order (oldest left); the culprit marked. A
    pass/fail job's: its passed and failed boots, stacked, per commit."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    if result.pass_fail:
        _pass_fail_axes(result, ax)
        return _finish(result, fig, ax, out)
    data = plot_data(result)
    for x, low, high, colour in data.spreads:  # each commit's boots from lowest to highest
        ax.vlines(x, low, high, color=colour, linewidth=1.5, alpha=0.45, zorder=1)
    for b in data.boots:  # the boots behind each verdict: small, faint, under the medians
        ax.scatter(b.x, b.y, color=b.colour, s=8, alpha=0.35, zorder=2)
    for p in data.points:
        ax.scatter(p.x, p.y, color=p.colour, s=40, zorder=3, label=p.label)
    ticks = {p.x: p.text for p in data.points}
    if data.star is not None:
        star = data.star
        ax.scatter(star.x, star.y, marker="*", s=160, color=star.colour, zorder=4, label=star.label)
        ticks[star.x] = star.text
    _hash_ticks(ax, ticks)
    metric = f"{result.metric} ({result.unit})" if result.unit else result.metric
    ax.set_ylabel(metric, parse_math=False)  # a testcase's words: a $ in them is text
    return _finish(result, fig, ax, out)


def _hash_ticks(ax: Any, ticks: dict[int, str]) -> None:
    """The x axis names each commit plotted by its short hash, upright: neighbours in
    history (the culprit and its parent) never write over each other."""
    xs = sorted(ticks)
    ax.set_xticks(xs, [ticks[x] for x in xs], rotation=90, fontsize=7, family="monospace")


def _finish(result: BisectResult, fig: Any, ax: Any, out: Path) -> Path:
    """The culprit's line, legend, labels; the file written."""
    culprit_x = next((s.index for s in result.steps if s.commit == result.culprit), None)
    if culprit_x is not None and result.culprit:
        ax.axvline(
            culprit_x,
            color="tab:red",
            linestyle="--",
            linewidth=1,
            label=f"culprit {result.culprit[:12]}",
        )
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    ax.legend(unique.values(), unique.keys(), loc="best", fontsize=8)
    ax.set_xlabel("commits tested, in history order (oldest left)")
    ax.set_title(_title(result), fontsize=10, parse_math=False)  # a subject's $ is text
    ax.grid(alpha=0.3)
    return save(fig, out)


def _title(result: BisectResult) -> str:
    """The answer itself: the commit named, with its subject; else the job's status."""
    if not result.culprit:
        return f"{result.testcase}: {result.status} ({result.mode} mode)"
    word = answer_word(result.mode)
    subject = result.subjects.get(result.culprit, "")
    if len(subject) > TITLE_SUBJECT:  # the title fits the figure's width
        subject = subject[: TITLE_SUBJECT - 1].rstrip() + "…"
    return f"{result.testcase}: {word} {result.culprit[:12]} {subject}".rstrip()


def save(fig: Any, out: Path) -> Path:
    """The figure laid out, written (PNG or SVG, by out's suffix) and closed."""
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
