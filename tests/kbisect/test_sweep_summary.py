"""A sweep summed up in one line: "no change" only when every pair says "same"; a pair that
cannot tell is said, with the largest effect its boots do not rule out."""

import pytest

from kbisect.decide.sweep import verdicts_text
from kbisect.reports.sweep_report import summary_line
from kbisect.workflows.sweep_types import PairWord, SweepPair, SweepResult


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


def _noisy(cv: float) -> SweepResult:
    """Two kernels of 12 boots each whose values spread by about cv, and a pair that
    cannot tell."""
    from kbisect.workflows.sweep_types import SweepBoot, SweepTestcase

    spread = [1 + cv * z for z in (-1.6, -1.0, -0.6, -0.3, -0.1, 0, 0, 0.1, 0.3, 0.6, 1.0, 1.6)]
    boots = [SweepBoot("t", k, 100 * f, [100 * f]) for k in (0, 1) for f in spread]
    pair = SweepPair("t", "throughput", "MB/s", 0, 1, UNSURE, bound=0.4, boots_old=12, boots_new=12)
    tc = SweepTestcase("t", "throughput", "MB/s", "higher", "fast", 3, 60.0)
    return SweepResult("/lab", ["a", "b"], ["a", "b"], ["a", "b"], [tc], [pair], boots, 12,
                       max_boots=48, min_effect=0.05)  # fmt: skip


def test_a_host_too_noisy_for_the_floor_is_said_in_one_line() -> None:
    from kbisect.reports.sweep_report import kernel_cvs, markdown, noise_lines

    noisy = _noisy(0.3)
    cvs = kernel_cvs(noisy, "t")
    assert all(c is not None and 0.25 < c < 0.3 for c in cvs), cvs
    (line,) = noise_lines(noisy)
    assert line.startswith("this host's noise (CV 26%, t) needs about 143 boots")
    assert line.endswith("boots a kernel to rule out 5%: quiet the host or raise --max-boots (48)")
    assert markdown(noisy).endswith(line)
    assert noise_lines(_noisy(0.04)) == []  # a quiet host's noise rules 5% out in time


def test_the_noise_line_reads_the_pairs_own_intervals_too() -> None:
    """A quiet host's real sweep (CV 13%): the kernels' CV alone says 37 boots rule 5%
    out, under the cap of 48; the pairs' intervals (the engine's, wider: references
    against drift) say 53, and the futility rule had stopped them at 24: the line says so."""
    from kbisect.decide.sweep import boots_to_settle
    from kbisect.reports.sweep_report import noise_lines

    assert boots_to_settle(-0.0886, 0.0901, 24, 0.05) == 54
    assert boots_to_settle(-0.05, float("inf"), 24, 0.05) is None
    quiet = _noisy(0.13)
    quiet.pairs[0].low, quiet.pairs[0].high = -0.0886, 0.0901
    quiet.pairs[0].boots_old = quiet.pairs[0].boots_new = 24
    (line,) = noise_lines(quiet)
    assert "needs about 54 boots a kernel to rule out 5%" in line, line
    quiet.pairs[0].low, quiet.pairs[0].high = -0.03, 0.03  # narrow: no line
    assert noise_lines(quiet) == []


def test_the_json_says_how_each_kernel_reached_the_host_userland() -> None:
    """A 9p kernel beside one without 9p (the squashfs image): the sweep's JSON says which
    each used, from its boots; a kernel not booted says nothing."""
    from kbisect.reports.sweep_report import to_json
    from kbisect.workflows.sweep_types import SweepBoot

    result = _noisy(0.05)
    result.kernels = result.names = result.subjects = ["a", "b", "c"]
    result.boots = [
        SweepBoot("t", 0, 1.0, [1.0], userland="9p"),
        SweepBoot("t", 1, 1.0, [1.0], userland="squashfs"),
    ]
    assert to_json(result)["userland"] == {"t": ["9p", "squashfs", ""]}


def test_the_report_says_why_a_pair_without_boots_cannot_tell() -> None:
    """A kernel that cannot test (or does not build) leaves its pair no interval: the
    report's table gives the reason in the verdict's cell, its pipes escaped."""
    from kbisect.reports.sweep_report import markdown

    why = "kernel 2 cannot test: kernel k has module 9p|x neither built in nor in its modules"
    result = _noisy(0.05)
    result.pairs = [SweepPair("t", "throughput", "MB/s", 0, 1, UNSURE, message=why)]
    row = markdown(result).splitlines()[2]
    assert row.endswith(f"| cannot tell: {why.replace('|', chr(92) + '|')} | 0+0 |"), row
