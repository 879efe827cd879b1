"""Code layout: when the alignment check is suggested, and what its boots say."""

import pytest

from kbisect.contract import EXPLAIN_TOP_FUNCTIONS
from kbisect.explain.compare import change_of
from kbisect.explain.layout import alignment_check, suggestion, top_functions
from kbisect.workflows.explain_types import AlignmentWord


def test_top_functions_count_a_sample_once_and_read_gcc_clones_as_their_function() -> None:
    stacks = {
        "dd;vfs_read;filemap_read;copy_page.isra.0": 50,
        "dd;vfs_read;vfs_read;nvme_setup_cmd": 30,  # recursion: one sample, once
        "swapper;do_idle": 40,
    }
    assert top_functions(stacks) == ["vfs_read", "copy_page", "filemap_read", "do_idle",
                                     "nvme_setup_cmd"]  # fmt: skip
    many = {f"cmd;f{i}": 1000 - i for i in range(80)}
    assert len(top_functions(many)) == EXPLAIN_TOP_FUNCTIONS


def test_suggested_only_when_the_diff_touches_none_of_the_sampled_functions() -> None:
    stacks = {"dd;vfs_read;nvme_setup_cmd.constprop.0": 10}
    line = suggestion(["nvme_pace_read"], stacks, "job-1")
    assert "touches none of its 2 most sampled functions" in line
    assert "kbisect explain job-1 --alignment" in line
    assert suggestion(["nvme_pace_read", "nvme_setup_cmd"], stacks, "job-1") == ""
    assert suggestion(["x"], {}, "job-1") == ""  # no profile: nothing to say


EFFECT = change_of("metric", "throughput", [100.0, 101.0, 99.0, 100.0], [75.0, 74.0, 76.0, 75.5])


@pytest.mark.parametrize(
    ("culprit", "verdict", "start"),
    [
        (
            [70.0, 71.0, 69.5, 70.5],
            AlignmentWord.REMAINS,
            "remains: -29.8% (95% CI -30.8% to -28.7%)",
        ),
        ([99.0, 101.5, 100.5, 99.5], AlignmentWord.VANISHES, "vanishes: +0.1% (95% CI"),
        ([60.0, 140.0, 80.0, 90.0], AlignmentWord.CANNOT_TELL, "cannot tell: -7.5% (95% CI"),
        ([130.0, 131.0, 129.5, 130.5], AlignmentWord.CANNOT_TELL, "cannot tell: +30.2% (95% CI"),
    ],
)
def test_the_change_remains_vanishes_or_cannot_be_told_by_its_interval(
    culprit: list[float], verdict: AlignmentWord, start: str
) -> None:
    parent = [100.0, 101.0, 99.0, 100.0]
    check = alignment_check(change_of("metric", "throughput", parent, culprit), EFFECT, 4)
    assert check.verdict == verdict and check.line.startswith(start), check.line
    assert check.boots == 4 and check.effect["low"] is not None
    assert ("code-layout artifact" in check.line) == (verdict == AlignmentWord.VANISHES)
    assert "(built -O2)" in check.line  # gcc aligns no function optimized for size


def test_a_wide_interval_that_holds_the_effect_is_more_boots_not_a_verdict() -> None:
    wide = change_of("metric", "throughput", [100.0, 60.0, 140.0], [70.0, 120.0, 95.0])
    check = alignment_check(wide, EFFECT, 3)
    assert check.verdict == AlignmentWord.CANNOT_TELL and check.line.endswith("(more --boots)")
    turned = change_of("metric", "throughput", [100.0, 101.0, 99.0], [130.0, 131.0, 129.0])
    assert alignment_check(turned, EFFECT, 3).line.endswith("(it changes the other way)")
