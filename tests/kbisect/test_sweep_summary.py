"""A sweep summed up in one line: "no change" only when every pair says "same"; a pair that
cannot tell is said, with the largest effect its boots do not rule out."""

import pytest

from kbisect.contract import PairWord, SweepPair, SweepResult
from kbisect.decide.sweep import verdicts_text
from kbisect.reports.sweep_report import summary_line


def _pair(verdict: PairWord, bound: float | None = None, k: int = 0) -> SweepPair:
    return SweepPair("t", "throughput", "MB/s", k, k + 1, verdict, bound=bound)


SAME, CHANGED = PairWord.SAME, PairWord.CHANGED
UNSURE = PairWord.CANNOT_TELL


@pytest.mark.parametrize(
    ("verdicts", "said"),
    [
        ([(SAME, 0.04), (SAME, 0.03)], "no change"),
        ([(SAME, 0.04), (CHANGED, None), (SAME, 0.02)], "1 of 3 pairs changed"),
        (
            [(SAME, 0.04), (CHANGED, None), (UNSURE, 0.48), (UNSURE, 0.364)],
            "1 of 4 pairs changed, 2 cannot tell (effects up to 36% and 48% not ruled out)",
        ),
        (
            [(UNSURE, 0.481), (UNSURE, 0.364), (UNSURE, None), (UNSURE, 0.457)],
            "0 of 4 pairs changed, 4 cannot tell (effects up to 36%, 46% and 48% not ruled out)",
        ),
        ([(UNSURE, 0.2)], "0 of 1 pairs changed, 1 cannot tell (effects up to 20% not ruled out)"),
    ],
)
def test_no_change_only_when_every_pair_is_the_same(
    verdicts: list[tuple[PairWord, float | None]], said: str
) -> None:
    pairs = [_pair(v, b, k) for k, (v, b) in enumerate(verdicts)]
    assert verdicts_text(pairs) == said


def test_the_summary_line_has_the_boots_and_the_budget() -> None:
    result = SweepResult(
        "/lab", ["a", "b"], ["a", "b"], ["a", "b"], [], [_pair(UNSURE, 0.3)], [], 12
    )
    assert summary_line(result) == (
        "0 of 1 pairs changed, 1 cannot tell (effects up to 30% not ruled out); "
        "0 boots of 2 kernels (at most 12 each)"
    )
