import pytest

from kbisect.infra.lab_plan import Kind, PlanError, Span, make_plan


def test_regression_state_flips_at_the_culprit() -> None:
    plan = make_plan(16, culprit_at=5, seed=1)
    buggy = [c.pos for c in plan.commits if c.buggy]
    assert buggy == list(range(5, 17))
    assert plan.commits[4].kind is Kind.CULPRIT
    assert not plan.old_buggy


def test_fix_mode_old_is_buggy_until_the_fix() -> None:
    plan = make_plan(16, mode="fix", culprit_at=9, seed=1)
    assert plan.old_buggy
    assert [c.pos for c in plan.commits if c.buggy] == list(range(1, 9))


def test_random_culprit_depends_on_seed_only() -> None:
    a = make_plan(64, seed=42).culprit
    assert a == make_plan(64, seed=42).culprit
    assert len({make_plan(64, seed=s).culprit for s in range(20)}) > 5


@pytest.mark.parametrize(
    ("spans", "broken"),
    [
        ([Span(3)], [3]),
        ([Span(3, 2)], [3, 4]),
        ([Span(+1, relative=True)], [11]),  # culprit at 10
        ([Span(-3, 2, relative=True)], [7, 8]),
    ],
)
def test_broken_build_spans(spans: list[Span], broken: list[int]) -> None:
    plan = make_plan(20, culprit_at=10, broken_build=spans, seed=0)
    assert plan.positions("build_broken") == broken
    assert plan.positions("boot_broken") == []


def test_a_span_can_cover_the_culprit() -> None:
    plan = make_plan(20, culprit_at=10, broken_boot=[Span(-1, 2, relative=True)], seed=0)
    assert plan.positions("boot_broken") == [9, 10]
    assert plan.commits[9].kind is Kind.CULPRIT


def test_merges_make_a_dag_and_state_flows_through_them() -> None:
    plan = make_plan(40, merges=2, culprit_at=None, seed=3)
    merges = [c for c in plan.commits if c.kind is Kind.MERGE]
    assert len(merges) == 2
    for m in merges:
        assert len(m.parents) == 2
        side = plan.commits[m.parents[1] - 1]
        assert side.branch.startswith("side")
    assert plan.commits[-1].buggy
    culprit = plan.commits[plan.culprit - 1]
    assert culprit.kind is Kind.CULPRIT and culprit.buggy


def test_culprit_on_a_side_branch_reaches_the_tip_through_the_merge() -> None:
    plan = make_plan(20, merges=1, seed=5, culprit_at=None)
    side = [c.pos for c in plan.commits if c.branch != "main"]
    plan = make_plan(20, merges=1, seed=5, culprit_at=side[0])
    merge = next(c for c in plan.commits if c.kind is Kind.MERGE)
    first_parent = plan.commits[merge.parents[0] - 1]
    assert not first_parent.buggy and merge.buggy and plan.commits[-1].buggy


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 1}, "2 or more"),
        ({"n": 10, "culprit_at": 10}, "not a plain commit"),
        ({"n": 10, "culprit_at": 0}, "not a plain commit"),
        ({"n": 10, "mode": "sideways"}, "unknown mode"),
        ({"n": 10, "culprit_at": 5, "broken_build": [Span(5)]}, "both"),
        ({"n": 10, "culprit_at": 5, "broken_build": [Span(9, 3)]}, "does not fit"),
        ({"n": 6, "merges": 3}, "too few"),
    ],
)
def test_bad_plans_say_why(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        make_plan(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "span"),
    [("7", Span(7)), ("7:3", Span(7, 3)), ("+1", Span(1, 1, True)), ("-2:2", Span(-2, 2, True))],
)
def test_span_parse(text: str, span: Span) -> None:
    assert Span.parse(text) == span


@pytest.mark.parametrize("text", ["x", "3:0", "3:y", ""])
def test_span_parse_rejects(text: str) -> None:
    with pytest.raises(PlanError):
        Span.parse(text)
