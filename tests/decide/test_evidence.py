"""A boot's score from its repetitions (workflows.evidence)."""

import math
import random
import statistics

from kbisect.decide.evidence import CLIP_SPREADS, Boot, mean_score, score, within_spread


def _boots(n: int, seed: int, sd: float = 0.1) -> list[Boot]:
    """Boots of one level whose three repetitions vary only within the boot."""
    rng = random.Random(seed)
    return [Boot([100 * math.exp(rng.gauss(0, sd)) for _ in range(3)]) for _ in range(n)]


def test_the_within_boot_spread_is_one_repetition_s_noise() -> None:
    spread = within_spread(_boots(2000, seed=1), log=True)
    assert 0.08 < spread < 0.12  # the repetitions' sd is 0.1 on the log scale
    assert within_spread([Boot([5.0]), Boot([7.0])], log=False) == 0.0  # one repetition


def test_a_boot_s_mean_is_a_closer_estimate_than_its_median() -> None:
    boots = _boots(4000, seed=2)
    spread = within_spread(boots, log=True)
    means = [mean_score(b, True, spread) for b in boots]
    medians = [score(b, True) for b in boots]
    # normal noise: the mean of three has 0.74 of the median of three's variance
    ratio = statistics.variance(means) / statistics.variance(medians)
    assert 0.65 < ratio < 0.82, ratio
    assert mean_score(Boot([100.0, 110.0, 90.0]), False, 10.0) == 100.0


def test_one_wild_repetition_moves_the_score_no_further_than_the_clip() -> None:
    spread = within_spread(_boots(500, seed=3), log=True)
    wild = Boot([100.0, 101.0, 10_000.0])  # one repetition 100 times too fast
    middle = math.log(101.0)
    assert mean_score(wild, True, spread) - middle <= CLIP_SPREADS * spread / 3 + 1e-12
    # unclipped, the mean would sit far off: the clip is what holds it
    assert statistics.fmean(math.log(v) for v in wild.samples) - middle > 1.0
