"""A perf script's samples folded into stacks, and each function's share of them."""

from collections import Counter
from pathlib import Path

import pytest

from kbisect.contract import (
    EXPLAIN_NAME_CHARS,
    EXPLAIN_SOURCE_STATS,
    EXPLAIN_STACKS,
    EXPLAIN_STACKS_CHARS,
)
from kbisect.model import LEFT_OUT
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


def test_only_the_most_sampled_stacks_are_kept_and_the_others_samples_as_one() -> None:
    """A script of unique stacks (a hostile guest's) keeps EXPLAIN_STACKS of them, held
    bounded while folding; the samples of the others stay counted, as LEFT_OUT."""
    hot = "fio\n\tffff hot_function\n\n" * 50
    unique = "".join(f"fio\n\tffff cold_{i}\n\n" for i in range(3 * profile.HELD))
    said: list[str] = []
    stacks = profile.fold((hot + unique).splitlines(), said)
    assert len(stacks) == EXPLAIN_STACKS + 1 and stacks["fio;hot_function"] == 50
    assert stacks[LEFT_OUT] == 3 * profile.HELD - (EXPLAIN_STACKS - 1)
    assert sum(stacks.values()) == 50 + 3 * profile.HELD  # shares stay of all the samples
    assert said == [
        f"profile: {stacks[LEFT_OUT]:,} of {sum(stacks.values()):,} samples left out, in "
        f"stacks past the {EXPLAIN_STACKS:,} most sampled (or their "
        f"{EXPLAIN_STACKS_CHARS:,} characters)"
    ]
    assert profile.shares(stacks)[("profile", "hot_function (self)")] == pytest.approx(
        100 * 50 / sum(stacks.values())
    )
    # read back from the folded file (a guest may leave one of its own): as bounded
    assert profile.read_folded(profile.folded_text(stacks).splitlines()) == stacks


def test_a_script_is_read_to_its_cap_each_line_cut_and_each_name_too(tmp_path: Path) -> None:
    script = tmp_path / "perf.script"
    long_line = "y" * (10 * profile.LINE_BYTES)  # no sample's, and never read whole
    script.write_text(f"{long_line}\n" + f"fio\n\tffff {'z' * 500}\n\n" * 1000)
    said: list[str] = []
    lines = list(profile.script_lines(script, said, limit=4 << 10))
    assert max(len(line) for line in lines) <= profile.LINE_BYTES
    assert sum(len(line) for line in lines) < (4 << 10) + profile.LINE_BYTES
    [read] = said
    assert read.startswith("perf.script: its first 4,") and read.endswith(
        f" bytes read, of {script.stat().st_size:,} bytes"
    )
    stacks = profile.fold(lines, said)
    assert all(len(f) <= EXPLAIN_NAME_CHARS for s in stacks for f in s.split(";"))
    assert (
        said[-1]
        == f"profile: {len(lines) // 3 + 1:,} symbols cut to {EXPLAIN_NAME_CHARS} characters"
    )


def test_the_shares_are_the_most_sampled_functions_up_to_a_sources_cap() -> None:
    stacks = Counter({f"fio;caller;f{i}": 1000 - i for i in range(EXPLAIN_SOURCE_STATS)})
    said: list[str] = []
    s = profile.shares(stacks, said)
    assert len(s) <= EXPLAIN_SOURCE_STATS and ("profile", "caller (total)") in s
    assert ("profile", "f0 (self)") in s and (
        "profile",
        f"f{EXPLAIN_SOURCE_STATS - 1} (self)",
    ) not in s
    kept = EXPLAIN_SOURCE_STATS // 2  # caller's total, then each function's total and self
    assert said == [
        f"profile: the shares of {EXPLAIN_SOURCE_STATS + 1 - kept:,} functions past the "
        f"{kept:,} most sampled left out"
    ]
