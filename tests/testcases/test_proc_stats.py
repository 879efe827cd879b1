"""A guest's /proc statistics as one table, their deltas and iostat's figures."""

from pathlib import Path

import pytest

from kbisect.contract import EXPLAIN_NAME_CHARS, EXPLAIN_SOURCE_STATS
from kbisect.testcases import proc_stats

DATA = Path(__file__).parent / "explain_data"
# /proc/schedstat, version 15, of a guest of two CPUs (this host's kernel has none)
SCHEDSTAT = """version 15
timestamp 4295023456
cpu0 0 0 1200 300 900 400 5000000 2000000 880
domain0 00000003 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu1 2 0 800 100 600 200 3000000 1000000 700
"""


def host_files() -> dict[str, str]:
    return {p.name[len("host-") : -len(".txt")]: p.read_text() for p in DATA.glob("host-*.txt")}


def test_a_real_hosts_proc_files_read_as_hundreds_of_statistics() -> None:
    stats = proc_stats.parse(host_files())
    by_source: dict[str, int] = {}
    for source, _ in stats:
        by_source[source] = by_source.get(source, 0) + 1
    assert by_source["vmstat"] > 100 and by_source["meminfo"] > 40
    assert {"softirqs", "interrupts", "stat", "diskstats"} <= set(by_source)
    # counters over the CPUs: NET_RX is one statistic, not one a CPU
    assert ("softirqs", "NET_RX") in stats
    assert ("stat", "user") in stats and ("stat", "ctxt") in stats
    assert not any(name.startswith(("loop", "ram")) for src, name in stats if src == "diskstats")
    # a numbered interrupt is named by its device: IRQ numbers move between kernels
    assert not any(name.split()[0].isdigit() for src, name in stats if src == "interrupts")


def test_schedstat_sums_the_cpus_and_skips_the_domains() -> None:
    stats = proc_stats.parse({"schedstat": SCHEDSTAT})
    assert stats[("schedstat", "sched_count")] == 2000
    assert stats[("schedstat", "run_delay_ns")] == 3000000
    assert stats[("schedstat", "yld_count")] == 2
    assert len(stats) == 8  # the legacy field is not a statistic


def disk(name: str, *fields: int) -> str:
    return f" 259 0 {name} " + " ".join(str(f) for f in fields) + "\n"


def test_iostat_figures_of_a_merging_read_and_of_one_that_no_longer_merges() -> None:
    before = proc_stats.parse({"diskstats": disk("nvme0n1", *[0] * 11)})
    # 1,000 reads of 512 sectors that merged 63,000 requests, 2.3 ms each, 2 s busy in 4 s
    merged = proc_stats.parse(
        {"diskstats": disk("nvme0n1", 1000, 63000, 512000, 2300, 0, 0, 0, 0, 0, 2000, 2300)}
    )
    d = proc_stats.delta(before, merged, seconds=4.0)
    assert d[("diskstats", "nvme0n1 r/s")] == 250
    assert d[("diskstats", "nvme0n1 rareq-sz sectors")] == 512
    assert d[("diskstats", "nvme0n1 rrqm/s")] == 63000 / 4
    assert d[("diskstats", "nvme0n1 r_await ms")] == pytest.approx(2.3)
    assert d[("diskstats", "nvme0n1 rkB/s")] == 512000 * 512 / 1024 / 4
    assert d[("diskstats", "nvme0n1 %util")] == 50
    assert ("diskstats", "nvme0n1 w/s") not in d  # it wrote nothing
    # the same bytes as 64,000 requests of 8 sectors, none merged
    unmerged = proc_stats.parse(
        {"diskstats": disk("nvme0n1", 64000, 0, 512000, 1017600, 0, 0, 0, 0, 0, 4000, 9000)}
    )
    d = proc_stats.delta(before, unmerged, seconds=4.0)
    assert d[("diskstats", "nvme0n1 rareq-sz sectors")] == 8
    assert d[("diskstats", "nvme0n1 rrqm %")] == 0
    assert d[("diskstats", "nvme0n1 r_await ms")] == pytest.approx(15.9)


def test_a_delta_is_after_less_before_and_a_file_missing_on_one_side_reads_nothing() -> None:
    before = proc_stats.parse({"vmstat": "pgfault 100\npgmajfault 3\n"})
    after = proc_stats.parse({"vmstat": "pgfault 250\npgmajfault 3\n", "schedstat": SCHEDSTAT})
    d = proc_stats.delta(before, after, seconds=1.0)
    assert d == {("vmstat", "pgfault"): 150, ("vmstat", "pgmajfault"): 0}


def test_nan_inf_and_garbage_make_a_file_unreadable_and_the_other_files_count() -> None:
    """A kernel under test that prints NaN, an infinity, a figure past a counter's range
    or a word where a figure goes: that file is one "cannot read" line, not a statistic
    (nor a bare ValueError that Temporal retries)."""
    said: list[str] = []
    stats = proc_stats.parse(
        {
            "vmstat": "pgfault 100\npgmajfault nan\n",
            "meminfo": "MemFree: inf kB\n",
            "schedstat": SCHEDSTAT.replace("1200", "1e30"),
            "stat": "cpu 1 2 3 garbage\nctxt 5\n",
            "softirqs": "CPU0\nNET_RX: 7\n",
        },
        said,
    )
    assert stats == {("softirqs", "NET_RX"): 7}
    assert said == [
        "vmstat: cannot read it: 'nan' is not a counter's value",
        "meminfo: cannot read it: 'inf' is not a counter's value",
        "schedstat: cannot read it: '1e30' is not a counter's value",
        "stat: cannot read it: 'garbage' is not a number",
    ]
    with pytest.raises(proc_stats.Unreadable, match="'-inf' is not a counter's value"):
        proc_stats.perf_stat("-inf,,context-switches,2004008123,100.00,,\n")


def test_a_source_keeps_its_first_statistics_and_no_figure_out_of_range() -> None:
    said: list[str] = []
    many = "".join(f"name{i}{'n' * 200} {i}\n" for i in range(EXPLAIN_SOURCE_STATS + 5))
    stats = proc_stats.parse({"vmstat": many}, said)
    assert len(stats) == EXPLAIN_SOURCE_STATS
    assert all(len(name) <= EXPLAIN_NAME_CHARS for _, name in stats)
    assert said == [f"vmstat: statistics past its first {EXPLAIN_SOURCE_STATS:,}: 5 left out"]
    # a delta over a tiny time: a rate past any counter's, left out, said
    before = proc_stats.parse({"diskstats": disk("vda", *[0] * 11)})
    after = proc_stats.parse({"diskstats": disk("vda", 10**19, *[0] * 10)})
    rates = proc_stats.bounded(proc_stats.delta(before, after, seconds=1e-300), said)
    assert ("diskstats", "vda r/s") not in rates and rates[("diskstats", "vda reads")] == 1e19
    assert said[-1] == "diskstats: figures out of range: 1 left out"
