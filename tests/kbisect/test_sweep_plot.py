"""The sweep's picture: a testcase no boot gave a value for says why in its panel (a cell
that cannot test), instead of an empty frame."""

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from kbisect.reports import sweep_plot
from kbisect.workflows.sweep_types import PairWord, SweepBoot, SweepPair, SweepResult, SweepTestcase


def test_a_testcase_that_could_not_test_says_why_in_its_panel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    why = "kernel 2 cannot test: kernel k has module 9pnet_virtio neither built in nor in 6.12's"
    tcs = [SweepTestcase(n, "usecs_per_op", "us", "lower", "fast", 5, 600.0) for n in "ab"]
    pairs = [
        SweepPair("a", "usecs_per_op", "us", 0, 1, PairWord.SAME, boots_old=1, boots_new=1),
        SweepPair("b", "usecs_per_op", "us", 0, 1, PairWord.CANNOT_TELL, message=why),
    ]
    boots = [SweepBoot("a", k, 100.0, [100.0]) for k in (0, 1)]
    result = SweepResult("", ["x", "y"], ["x", "y"], ["x", "y"], tcs, pairs, boots, 12)
    drawn: list[Figure] = []
    monkeypatch.setattr(sweep_plot, "save", lambda fig, out: drawn.append(fig) or out)
    sweep_plot.plot_sweep(result, tmp_path / "s.png")
    first, second = drawn[0].axes
    assert not first.texts  # a panel with values has no note
    assert [t.get_text().replace("\n", " ") for t in second.texts] == [why]


def test_a_subject_with_dollars_is_text_on_the_axis(tmp_path: Path) -> None:
    """matplotlib reads $...$ as maths: a kernel named by a subject such as "$x^$" made
    the whole plot fail (the results pages' plot, `sweep --plot`, a chat alert's)."""
    tcs = [SweepTestcase("a", "usecs_per_op", "us", "lower", "fast", 5, 600.0)]
    pairs = [SweepPair("a", "usecs_per_op", "us", 0, 1, PairWord.SAME, boots_old=1, boots_new=1)]
    boots = [SweepBoot("a", k, 100.0, [100.0]) for k in (0, 1)]
    subjects = ["$x^$", "tools: $$ and $x^^b$"]
    result = SweepResult("", ["a" * 40, "b" * 40], ["", ""], subjects, tcs, pairs, boots, 12)
    svg = sweep_plot.plot_sweep(result, tmp_path / "s.svg").read_text()
    assert svg.startswith("<?xml") and "x^" in svg
