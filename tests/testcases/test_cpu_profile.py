"""A perf script's samples folded into stacks, and each function's share of them."""

from collections import Counter
from pathlib import Path

import pytest

from kbisect.testcases import cpu_profile as profile

DATA = Path(__file__).parent / "explain_data"
SCRIPT = """fio
\tffffffff81b7bb24 nvme_pace_read
\tffffffff81b7bc13 blk_mq_submit_bio
\tffffffff81d35204 submit_bio
\t7f55f7143b00 [unknown]
\t7f55f8056240 [unknown]

fio
\tffffffff81b7bc13 blk_mq_submit_bio
\tffffffff81d35204 submit_bio

swapper
\tffffffff81000001 default_idle

fio
\tffffffff81b7bb24 nvme_pace_read
\tffffffff81b7bc13 blk_mq_submit_bio
\tffffffff81d35204 submit_bio
\t7f55f7143b00 [unknown]
"""


def test_samples_fold_into_stacks_root_first_with_runs_of_unknown_frames_as_one() -> None:
    stacks = profile.fold(SCRIPT.splitlines())
    assert stacks == Counter(
        {
            "fio;[unknown];submit_bio;blk_mq_submit_bio;nvme_pace_read": 2,
            "fio;submit_bio;blk_mq_submit_bio": 1,
            "swapper;default_idle": 1,
        }
    )
    assert profile.folded_text(stacks).splitlines()[0].endswith("nvme_pace_read 2")
    assert profile.read_folded(profile.folded_text(stacks).splitlines()) == stacks


def test_a_function_has_a_self_and_a_total_share_of_the_samples() -> None:
    s = profile.shares(profile.fold(SCRIPT.splitlines()))
    assert s[("profile", "nvme_pace_read (self)")] == 50
    assert s[("profile", "blk_mq_submit_bio (self)")] == 25
    assert s[("profile", "blk_mq_submit_bio (total)")] == 75
    assert ("profile", "submit_bio (self)") not in s  # never a leaf
    assert not any("unknown" in name for _, name in s)


def test_a_real_perf_script_of_this_host_folds_with_every_sample_counted() -> None:
    text = (DATA / "host-perf.script").read_text()
    samples = sum(1 for line in text.splitlines() if line and not line[0].isspace())
    stacks = profile.fold(text.splitlines())
    assert sum(stacks.values()) == samples > 100
    s = profile.shares(stacks)
    leaves = sum(v for (_, name), v in s.items() if name.endswith("(self)"))
    unknown_leaves = sum(n for st, n in stacks.items() if st.endswith(profile.UNKNOWN))
    assert leaves + 100 * unknown_leaves / samples == pytest.approx(100)
    # dd read /dev/urandom: the kernel's random number generator is in its stacks
    assert s[("profile", "get_random_bytes_user (total)")] > 0
