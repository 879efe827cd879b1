"""Scores across commits as a picture: what people would rather look at than read."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt

from kbisect.contract import BisectResult

COLOURS = {"good": "tab:green", "bad": "tab:red", "skip": "tab:gray"}


def plot_scores(result: BisectResult, out: Path) -> Path:
    """One point per tested commit, in history order (oldest left); the culprit marked."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for n, step in enumerate(result.steps):
        if step.value is None:
            continue
        x = step.index
        ax.scatter(
            x,
            step.value,
            color=COLOURS.get(step.verdict, "black"),
            s=40,
            zorder=3,
            label=step.verdict,
        )
        ax.annotate(
            step.commit[:7],
            (x, step.value),
            textcoords="offset points",
            xytext=(0, 6 if n % 2 else -12),  # alternate: neighbours do not collide
            ha="center",
            fontsize=7,
        )
    culprit_x = next((s.index for s in result.steps if s.commit == result.culprit), None)
    if result.culprit and culprit_x is not None:
        ax.axvline(
            culprit_x,
            color="tab:red",
            linestyle="--",
            linewidth=1,
            label=f"culprit {result.culprit[:12]}",
        )
    v = result.verification
    if v is not None and v.value is not None:
        # Beside the endpoint it was made from: the new one with the culprit reverted
        # (right), or the old one with the fix applied (left).
        xs = [s.index for s in result.steps] or [0]
        revert = v.kind == "revert"
        ax.scatter(
            max(xs) + 1 if revert else min(xs) - 1,
            v.value,
            marker="*",
            s=160,
            color="tab:blue",
            zorder=4,
            label=f"{'culprit reverted on new' if revert else 'fix applied to old'}: {v.status}",
        )
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    ax.legend(unique.values(), unique.keys(), loc="best", fontsize=8)
    ax.set_xlabel("commit (history order, oldest left)")
    ax.set_ylabel(f"{result.metric} ({result.unit})" if result.unit else result.metric)
    ax.set_title(f"{result.testcase}: {result.status} ({result.mode} mode)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
