"""The endpoint gate as a table: different, same, measure more, cannot decide, wrong way."""

import math
import random

import pytest

from kbisect.contract import BuildResult, TestResult, TestStatus, Verdict
from kbisect.decide.endpoints import (
    Gate,
    compare_scores,
    endpoint_problem,
    level_of,
    noise_free,
)
from kbisect.decide.evidence import Boot, score
from kbisect.model import Artifact


def boots(value: float, n: int, cv: float = 0.0, seed: int = 1, reps: int = 3) -> list[Boot]:
    rng = random.Random(seed)
    sigma = math.sqrt(math.log1p(cv * cv))
    out = []
    for _ in range(n):
        b = value * math.exp(rng.gauss(0, sigma))
        out.append(Boot([b * math.exp(rng.gauss(0, sigma / 3)) for _ in range(reps)]))
    return out if cv else [Boot([value] * reps) for _ in range(n)]


def gate(old: list[Boot], new: list[Boot], **kw: object) -> tuple[Gate, str, int]:
    args: dict[str, object] = {
        "log": True,
        "worse_is_lower": True,
        "regression": True,
        "min_effect": 0.05,
        "max_boots": 48,
    }
    args.update(kw)
    log = bool(args["log"])
    exact = noise_free(old) and noise_free(new)
    olds, news = [score(b, log) for b in old], [score(b, log) for b in new]
    v = compare_scores(olds, news, exact=exact, **args)  # type: ignore[arg-type]
    return v.gate, v.message, v.want


@pytest.mark.parametrize(
    ("old", "new", "kw", "expected"),
    [
        # a counter: one boot each decides
        (boots(512, 1), boots(8, 1), {}, Gate.DIFFERENT),
        (boots(512, 1), boots(512, 1), {}, Gate.SAME),
        (boots(512, 1), boots(500, 1), {}, Gate.SAME),  # 2.3%: under the minimum
        # a timing: three boots each are not enough to say anything
        (boots(170, 3, 0.05), boots(158, 3, 0.05, seed=2), {}, Gate.MORE),
        (boots(170, 12, 0.05), boots(110, 12, 0.05, seed=2), {}, Gate.DIFFERENT),
        (boots(170, 24, 0.03), boots(170, 24, 0.03, seed=2), {}, Gate.SAME),
        # an improvement is not a regression, and is what fix mode looks for
        (boots(110, 12, 0.05), boots(170, 12, 0.05, seed=2), {}, Gate.WRONG_WAY),
        (boots(110, 12, 0.05), boots(170, 12, 0.05, seed=2), {"regression": False}, Gate.DIFFERENT),
        # latency: lower is better, so higher is the regression
        (
            boots(2.0, 12, 0.05),
            boots(3.0, 12, 0.05, seed=2),
            {"worse_is_lower": False},
            Gate.DIFFERENT,
        ),
        # at the cap with a small effect in heavy noise: no guess
        (boots(100, 12, 0.25), boots(97, 12, 0.25, seed=2), {"max_boots": 12}, Gate.UNDECIDED),
    ],
)
def test_gate(old: list[Boot], new: list[Boot], kw: dict[str, object], expected: Gate) -> None:
    assert gate(old, new, **kw)[0] == expected


def test_more_asks_for_the_next_look() -> None:
    g, _, want = gate(boots(170, 3, 0.05), boots(158, 3, 0.05, seed=2))
    assert (g, want) == (Gate.MORE, 6)


def test_cannot_decide_states_the_bound() -> None:
    g, message, _ = gate(boots(100, 12, 0.25), boots(97, 12, 0.25, seed=2), max_boots=12)
    assert g == Gate.UNDECIDED
    assert message.startswith("cannot decide after 24 boots: the effect is under ")
    assert "at 95%" in message


def test_one_wild_boot_does_not_hide_a_regression() -> None:
    old = boots(170, 12, 0.04)
    new = [*boots(120, 11, 0.04, seed=2), Boot([900.0, 910.0, 905.0])]
    assert gate(old, new)[0] == Gate.DIFFERENT


def test_a_repetition_per_boot_is_not_taken_for_a_counter() -> None:
    # one sample per boot shows no spread, but says nothing about the noise
    assert gate(boots(170, 1, reps=1), boots(150, 1, reps=1))[0] == Gate.MORE


def test_endpoint_problems_name_the_endpoint_and_what_to_do() -> None:
    art = Artifact(commit="c", tree="t", config_hash="h", kernel="/k", config="/c", build_log="/l")
    built = BuildResult(commit="c", ok=True, artifact=art, seconds=12.0)
    broken = BuildResult(commit="c", ok=False, error="kernel does not build: x.c", seconds=3.0)
    ok = TestResult("c", TestStatus.OK, {"sectors": 512.0}, [512.0], seconds=5.0)
    assert endpoint_problem(Verdict.GOOD, "a" * 40, built, ok) == ""
    problem = endpoint_problem(Verdict.GOOD, "a" * 40, broken, None)
    assert problem.startswith("the good endpoint aaaaaaaaaaaa does not build")
    assert problem.endswith("pass a good revision that builds")
    boot = TestResult("c", TestStatus.BOOT_FAILED, error="panic: y", console="/con")
    problem = endpoint_problem(Verdict.BAD, "b" * 40, built, boot)
    assert "failed: panic: y (console: /con)" in problem


def test_max_boots_above_the_last_look_is_honoured() -> None:
    # --max-boots 200: at 96 boots each an undecided gate boots more, up to 200, never
    # stops at 96 (the looks go on doubling, then the cap).
    old, new = boots(100, 96, 0.25), boots(97, 96, 0.25, seed=2)
    g, _, want = gate(old, new, max_boots=200)
    assert (g, want) == (Gate.MORE, 192)
    old, new = boots(100, 192, 0.25), boots(97, 192, 0.25, seed=2)
    g, _, want = gate(old, new, max_boots=200)
    assert (g, want) == (Gate.MORE, 200)
    old, new = boots(100, 200, 0.25), boots(97, 200, 0.25, seed=2)
    assert gate(old, new, max_boots=200)[0] == Gate.UNDECIDED


def test_a_kernel_s_level_has_its_interval_and_spread() -> None:
    lv = level_of([57.0, 60.0, 62.0, 64.0, 71.0])
    assert lv is not None and lv.boots == 5 and (lv.lowest, lv.highest) == (57.0, 71.0)
    assert lv.low is not None and lv.high is not None and lv.low < lv.centre < lv.high
    wider = level_of([50.0, 60.0, 62.0, 64.0, 80.0, 40.0, 90.0])
    assert wider is not None and wider.low is not None and wider.high is not None
    assert wider.high - wider.low > lv.high - lv.low
    exact = level_of([512.0, 512.0, 512.0])
    assert exact is not None and exact.low == exact.high == 512.0
    one = level_of([58.0])
    assert one is not None and one.low is None and one.high is None
    assert level_of([]) is None
