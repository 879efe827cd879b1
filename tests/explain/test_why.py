"""The Why lines read as a kernel engineer would write them."""

from kbisect.explain.compare import compare
from kbisect.explain.why import why_lines
from kbisect.model import Stats


def side(size: float, merges: float, await_ms: float, share: float) -> list[Stats]:
    return [
        {
            ("diskstats", "nvme0n1 rareq-sz sectors"): size,
            ("diskstats", "nvme0n1 rrqm/s"): merges,
            ("diskstats", "nvme0n1 r_await ms"): await_ms * (1 + d),
            ("profile", "nvme_pace_read (self)"): share + 10 * d,
            ("vmstat", "pgfault"): 1000.0 + 10 * i,
        }
        for i, d in enumerate((0.01, -0.02, 0.01, 0.0, 0.015))
    ]


def test_the_seeds_story_in_the_words_of_its_engineer() -> None:
    result = compare(side(512, 64638, 2.3, 0.0), side(8, 0, 15.9, 18.0))
    lines = why_lines(result)
    # merges stopped, the requests 64 times smaller, the await 7 times longer: by factor
    assert lines[0] == "nvme0n1 read merges/s: 64,638 -> 0 (-100%, 95% CI -100% to -100%)"
    assert lines[1] == "nvme0n1 read request size (sectors): 512 -> 8 (-98%, 95% CI -98% to -98%)"
    assert lines[2].startswith("nvme0n1 read await (ms): 2.31 -> 15.9 (+591%, 95% CI")
    share = next(x for x in lines if x.startswith("self time in nvme_pace_read"))
    assert share.startswith("self time in nvme_pace_read: 0.0% -> 18.0% of samples (+18.0 points")
    assert lines[-1] == "4 of 5 statistics changed beyond their noise (5 read)"


def test_the_profile_has_its_own_lines_however_large_the_counts_changes() -> None:
    parent = [
        {**{("vmstat", f"s{i}"): 100.0 + d for i in range(12)}, ("profile", "delay_tsc (self)"): d}
        for d in (0.0, 0.1, 0.2)
    ]
    culprit = [
        {
            **{("vmstat", f"s{i}"): 300.0 + d for i in range(12)},
            ("profile", "delay_tsc (self)"): 11 + d,
        }
        for d in (0.0, 0.1, 0.2)
    ]
    lines = why_lines(compare(parent, culprit), top=4)
    assert [x.split(":")[0] for x in lines[:4]] == ["vmstat s0", "vmstat s1", "vmstat s10",
                                                     "self time in delay_tsc"]  # fmt: skip
    assert lines[4] == "... and 9 more (in the job's JSON)"


def test_a_long_list_is_cut_with_a_pointer_to_the_rest() -> None:
    parent = [{("vmstat", f"s{i}"): 100.0 + d for i in range(12)} for d in (0, 1, 2)]
    culprit = [{("vmstat", f"s{i}"): 200.0 + d for i in range(12)} for d in (0, 1, 2)]
    lines = why_lines(compare(parent, culprit), top=3)
    assert len(lines) == 5 and lines[3] == "... and 9 more (in the job's JSON)"
    assert lines[0].startswith("vmstat s0: 101 -> 201 (+99%")


def test_a_traced_boots_request_counts_leave_room_for_the_request_size() -> None:
    # CI's explain run: reads 64 times more, requests 64 times smaller, blktrace's total
    # the same as its reads (nothing written), and three profile lines. In percent the
    # counts' +6300% ranked every -98% out of the five lines left
    parent: list[Stats] = []
    culprit: list[Stats] = []
    for d in (0.0, 1.0, 2.0):
        for sides, reads, size, share in ((parent, 4104, 512, 14), (culprit, 262656, 8, 24)):
            sides.append(
                {
                    ("blktrace", "nvme0n1 read requests"): reads / 4 + d,
                    ("blktrace", "nvme0n1 requests"): reads / 4 + d,
                    ("diskstats", "nvme0n1 reads"): reads + d,
                    ("diskstats", "nvme0n1 r/s"): reads / 13 + d,
                    ("vmstat", "pgpgin"): reads / 64 * (50 if sides is culprit else 64) + d,
                    ("diskstats", "nvme0n1 rareq-sz sectors"): size + d / 100,
                    **{("profile", f"f{i} (total)"): share + i + d / 10 for i in range(3)},
                }
            )
    lines = why_lines(compare(parent, culprit), top=8)
    assert any(x.startswith("blktrace nvme0n1 read requests: 1,027 -> 65,665") for x in lines)
    assert not any(x.startswith("blktrace nvme0n1 requests") for x in lines)
    assert any(x.startswith("nvme0n1 read request size (sectors): 512 -> 8") for x in lines)
    assert sum(x.startswith("time in f") for x in lines) == 3


def test_a_read_and_a_write_line_that_agree_are_both_kept() -> None:
    def side(size: float) -> list[Stats]:
        return [
            {
                ("blktrace", "sda read request size (sectors)"): size + d,
                ("blktrace", "sda write request size (sectors)"): size + d,
            }
            for d in (0.0, 0.01, 0.02)
        ]

    lines = why_lines(compare(side(256), side(8)))
    assert sum("request size (sectors): 256 -> 8" in x for x in lines) == 2, lines
