"""A sweep's changes become bisections between the two kernels' source revisions."""

from kbisect.workflows.bisect_types import BisectRequest
from kbisect.workflows.investigation_types import SweepBisect
from kbisect.workflows.sweep_types import (
    PairWord,
    SweepPair,
    SweepRequest,
    SweepResult,
    SweepTestcase,
)

TC = SweepTestcase("nvme-snapshot-read", "throughput", "MB/s", "higher", "fast", 3, 60.0)
TEMPLATE = BisectRequest(repo="/src", good=["r0"], bad="r4", testcase=TC.name, min_effect=0.05)


def _result(pairs: list[SweepPair], kernels: int) -> SweepResult:
    ks = [f"k{i}" for i in range(kernels)]
    return SweepResult("repo", ks, ks, ks, [TC], pairs, [], 12)


def _pair(old: int, verdict: str, direction: str = "") -> SweepPair:
    return SweepPair(TC.name, "throughput", "MB/s", old, old + 1, verdict, direction)


def _asked(revs: list[str]) -> SweepBisect:
    return SweepBisect(SweepRequest("repo", [], [TC.name]), revs, {TC.name: TEMPLATE})


def test_a_slower_kernel_is_bisected_as_a_regression_and_a_faster_one_as_a_fix() -> None:
    result = _result(
        [
            _pair(0, PairWord.SAME),
            _pair(1, PairWord.CHANGED, "worse"),
            _pair(2, PairWord.CANNOT_TELL),
            _pair(3, PairWord.CHANGED, "better"),
        ],
        5,
    )
    jobs = _asked(["r0", "r1", "r2", "r3", "r4"]).bisections_of(result)
    assert [(p.old, o.mode, o.good, o.bad) for p, o in jobs] == [
        (1, "regression", ["r1"], "r2"),
        (3, "fix", ["r4"], "r3"),  # fix mode: good is the newer, fixed revision
    ]
    assert all(o.repo == "/src" and o.metric == "throughput" for _, o in jobs)
    assert all(o.min_effect == 0.05 for _, o in jobs)


def test_the_same_revision_twice_has_nothing_to_bisect() -> None:
    result = _result([_pair(0, PairWord.CHANGED, "worse")], 2)
    assert _asked(["r0", "r0"]).bisections_of(result) == []
