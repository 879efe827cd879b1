"""The posterior over culprits: sums over ancestors, picks, marks, priors of zero."""

import itertools
import math
import random

import pytest

from kbisect.decide.posterior import NONE, Posterior
from kbisect.decide.strategy import Graph


def linear(n: int) -> Graph:
    return Graph(
        parents={f"c{i}": ((f"c{i - 1}",) if i > 1 else ()) for i in range(1, n + 1)},
        order=tuple(f"c{i}" for i in range(n, 0, -1)),
    )


def merged() -> Graph:
    """c1 - c2 - c3 ---- c6 (merge) - c7
    \\ c4 - c5 /"""
    parents = {
        "c1": (),
        "c2": ("c1",),
        "c3": ("c2",),
        "c4": ("c2",),
        "c5": ("c4",),
        "c6": ("c3", "c5"),
        "c7": ("c6",),
    }
    return Graph(parents=parents, order=("c7", "c6", "c5", "c4", "c3", "c2", "c1"))


def brute_p_new(post: Posterior, commit: str) -> float:
    anc = post.graph.ancestry[commit]
    return sum(p for i, p in enumerate(post.p) if anc >> i & 1)


def test_p_new_is_the_mass_of_the_commit_s_ancestors_on_a_dag() -> None:
    rng = random.Random(3)
    post = Posterior(merged(), none_prior=0.2)
    post.update({c: rng.uniform(-3, 3) for c in ("c3", "c5", "c6")})
    for commit in post.graph.order:
        assert post.p_new(commit) == pytest.approx(brute_p_new(post, commit), abs=1e-9)
    assert sum(post.p) + post.p_none == pytest.approx(1.0)


def test_before_any_evidence_the_prior_is_flat_and_none_holds_its_share() -> None:
    post = Posterior(linear(8), none_prior=0.5)
    assert post.p_none == pytest.approx(0.5)
    assert all(p == pytest.approx(0.5 / 8) for p in post.p)
    assert post.p_new("c4") == pytest.approx(0.25)
    assert post.p_new("c8") == pytest.approx(0.5)  # the new endpoint: new unless none


def test_old_looking_boots_move_the_culprit_above_them() -> None:
    post = Posterior(linear(8), none_prior=0.0)
    post.update({"c4": -math.log(1000)})  # c4 behaves like the old endpoint
    assert post.p_new("c4") < 0.01
    assert brute_p_new(post, "c4") == pytest.approx(post.p_new("c4"), abs=1e-9)
    assert post.top().commit in {"c5", "c6", "c7", "c8"}


def test_the_new_endpoint_s_boots_are_the_evidence_against_no_culprit() -> None:
    post = Posterior(linear(8), none_prior=0.5)
    post.update({"c8": math.log(1000)})
    assert post.p_none == pytest.approx(1 / 1001, rel=1e-6)
    post.update({"c8": -math.log(1000)})
    assert post.top().commit == NONE


def test_a_commit_that_makes_its_parent_s_kernel_is_never_the_culprit() -> None:
    post = Posterior(linear(8), none_prior=0.0, impossible=["c5"])
    post.update({"c4": -20.0, "c6": 20.0})
    assert post.p[post.graph.index["c5"]] == 0.0
    assert post.top().commit == "c6"
    assert post.top().p == pytest.approx(1.0)


def test_marks_rule_out_the_hypotheses_they_contradict() -> None:
    post = Posterior(linear(8), none_prior=0.5)
    post.mark("c6", new=True)
    post.mark("c3", new=False)
    post.update({})
    assert post.p_none == 0.0
    assert {c for c, p in zip(post.graph.order, post.p, strict=True) if p > 0} == {
        "c4",
        "c5",
        "c6",
    }


def test_hypotheses_between_the_same_observed_commits_split_them_alike_on_a_dag() -> None:
    post = Posterior(merged(), none_prior=0.2)
    observed = ["c3", "c5", "c6", "outside"]
    splits, which = post.splits(observed)
    for commit, i in post.graph.index.items():
        # hypothesis `commit` makes new-like the observed commits it is an ancestor of
        below = [
            p
            for p, c in enumerate(observed)
            if c in post.graph.index and post.graph.ancestry[c] >> i & 1
        ]
        assert list(splits[which[i]]) == below, commit
    assert list(splits[which[post.graph.index["c4"]]]) == [1, 2]  # c5 and the merge c6
    assert which[post.graph.index["c1"]] == which[post.graph.index["c2"]]  # both: all three
    assert len(splits) == len(set(splits)) == 5


def test_each_hypothesis_s_own_likelihood_weighs_as_its_commits_ratios_do() -> None:
    # update() is weigh() on the sums of the ratios: a likelihood given per hypothesis
    # (workflows.split_likelihood) takes the same priors, marks and impossible commits.
    llr = {"c3": 1.5, "c5": -2.0, "c6": 0.7}
    ratios = Posterior(merged(), none_prior=0.3, impossible=["c4"])
    ratios.mark("c7", new=True)
    ratios.update(llr)
    own = Posterior(merged(), none_prior=0.3, impossible=["c4"])
    own.mark("c7", new=True)
    logp = [sum(v for c, v in llr.items() if own.graph.ancestry[c] >> i & 1) for i in range(7)]
    own.weigh([v - 5.0 for v in logp], none_loglik=-5.0)  # one scale, any offset
    assert own.p == pytest.approx(ratios.p) and own.p_none == ratios.p_none == 0.0
    assert own.p[own.graph.index["c4"]] == 0.0


def test_rival_models_average_the_posterior_by_their_weights() -> None:
    # The same boots under two models of the host's level: weighed with the second at
    # 0.25, each hypothesis holds 0.75 of its first posterior and 0.25 of its second.
    first, second = [0.0, 1.0, 3.0, 0.5, 0.0, -1.0, 2.0], [2.0, 0.0, -1.0, 0.5, 1.0, 0.0, 0.0]
    alone, other, both = (Posterior(merged(), none_prior=0.3) for _ in range(3))
    alone.weigh(first, 0.5)
    other.weigh(second, -0.5)
    both.weigh(first, 0.5)
    both.average([(0.25, second, -0.5)])
    mixed = [0.75 * a + 0.25 * b for a, b in zip(alone.p, other.p, strict=True)]
    assert both.p == pytest.approx(mixed)
    assert both.p_none == pytest.approx(0.75 * alone.p_none + 0.25 * other.p_none)
    assert both.top().p < alone.top().p


@pytest.mark.parametrize("k", [1, 2, 3])
def test_k_picks_are_the_k_quantiles(k: int) -> None:
    post = Posterior(linear(63), none_prior=0.0)
    picks = post.quantiles(k, post.graph.order)
    targets = [j / (k + 1) for j in range(1, k + 1)]
    assert [round(post.p_new(c) * (k + 1)) for c in picks] == [round(t * (k + 1)) for t in targets]
    for c, t in zip(picks, targets, strict=True):
        assert abs(post.p_new(c) - t) <= 1 / 63


def test_a_built_commit_is_kept_while_it_is_near_enough_the_median() -> None:
    post = Posterior(linear(63), none_prior=0.0)
    assert post.quantiles(1, post.graph.order, built=["c40"]) == ["c40"]  # P = 0.63
    assert post.quantiles(1, post.graph.order, built=["c60"]) == ["c32"]  # P = 0.95: build


def test_the_credible_set_holds_the_level_with_the_fewest_hypotheses() -> None:
    post = Posterior(linear(4), none_prior=0.0)
    post.update({"c2": -10.0, "c3": 1.0, "c4": 10.0})  # c3: e / (1 + e) of the mass
    assert post.credible(0.5) == ["c3"]
    assert post.credible(0.99) == ["c3", "c4"]


def test_sixteen_thousand_commits_stay_fast_enough_for_a_workflow_task() -> None:
    graph = linear(16384)
    post = Posterior(graph, none_prior=0.5)
    post.update({c: 0.7 for c in itertools.islice(graph.order, 0, 16384, 1000)})
    picks = post.quantiles(1, graph.order[::64])  # not timed: it must merely finish
    assert picks and 0.3 < post.p_new(picks[0]) < 0.7
