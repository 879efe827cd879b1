"""A sweep as a picture: each testcase's metric across the series, each kernel's level
with its 95% interval over its boots, and the pairs that changed marked."""

import math
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

from kbisect.reports.plot import COLOURS, save
from kbisect.reports.sweep_report import label, levels
from kbisect.workflows.sweep_types import PairWord, SweepResult


def plot_sweep(result: SweepResult, out: Path) -> Path:
    """One panel per testcase; kernels left to right in series order."""
    panels = len(result.testcases)
    fig, axes = plt.subplots(panels, 1, figsize=(9, 3.6 * panels), squeeze=False)
    xs = list(range(len(result.kernels)))
    for ax, tc in zip((row[0] for row in axes), result.testcases, strict=True):
        for b in result.boots:  # each boot, faint, behind the levels
            if b.testcase == tc.name and b.value is not None:
                ax.scatter(b.kernel, b.value, color="tab:gray", s=8, alpha=0.4, zorder=2)
        lv = levels(result, tc.name)
        for x, v in zip(xs, lv, strict=True):
            if math.isnan(v.mean):
                continue
            if not math.isnan(v.low):
                ax.errorbar(x, v.mean, yerr=[[v.mean - v.low], [v.high - v.mean]], color="k")
            ax.scatter(x, v.mean, color="k", s=30, zorder=3)
        for p in result.pairs:
            if p.testcase != tc.name or p.verdict != PairWord.CHANGED:
                continue
            a, z = lv[p.old], lv[p.new]
            colour = COLOURS["bad"] if p.direction == "worse" else COLOURS["good"]
            ax.plot([p.old, p.new], [a.mean, z.mean], color=colour, linewidth=2, zorder=4)
            ax.annotate(
                f"{p.direction} {p.effect or 0:+.0%}",
                ((p.old + p.new) / 2, (a.mean + z.mean) / 2),
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
                fontsize=8,
                color=colour,
            )
        if all(math.isnan(v.mean) for v in lv):  # no boot gave a value: say why, not blank
            why = next((p.message for p in result.pairs if p.testcase == tc.name), "")
            ax.text(0.5, 0.5, textwrap.fill(why or "no boot gave a value", 90),
                    transform=ax.transAxes, ha="center", va="center", fontsize=8,
                    color=COLOURS["skip"], parse_math=False)  # fmt: skip
            ax.set_yticks([])
        # a kernel's name is its subject, where a $ is text, not maths
        ax.set_xticks(xs, [label(result, k) for k in xs], rotation=20, ha="right", fontsize=7,
                      parse_math=False)  # fmt: skip
        ax.set_ylabel(f"{tc.metric} ({tc.unit})" if tc.unit else tc.metric, parse_math=False)
        ax.set_title(f"{tc.name} ({tc.better} is better)", fontsize=9, parse_math=False)
        ax.grid(alpha=0.3)
    return save(fig, out)
