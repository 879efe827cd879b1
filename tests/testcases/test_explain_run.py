"""What an explain boot builds, and how the host reads what its guest left."""

from pathlib import Path

import pytest

from kbisect.builders import kconfig
from kbisect.contract import EXPLAIN_NAME_CHARS
from kbisect.errors import TestcaseFailedError
from kbisect.testcases import manifest
from kbisect.testcases.explain_run import explain_manifest, explain_spec, read_stacks, read_stats

DATA = Path(__file__).parent / "explain_data"
PERF_STAT = """# started on Sat Nov 28 22:10:01 2026

41230,,context-switches,2004008123,100.00,,
17,,cpu-migrations,2004008123,100.00,,
<not counted>,,page-faults,0,0.00,,
2004.01,msec,task-clock,2004008123,100.00,1.999,CPUs utilized
"""


def test_an_initramfs_testcase_explains_on_the_host_userland_with_the_diagnostics_last() -> None:
    seed = manifest.load("nvme-snapshot-read")
    assert seed.userland == "initramfs"
    assert explain_manifest(seed).userland == "host"
    spec = explain_spec(seed)
    assert spec.fragments[0] == kconfig.host_userland_config()
    assert spec.fragments[-1] == kconfig.diagnostics_config()
    assert "CONFIG_SCHEDSTATS=y" in spec.fragments[-1]


def guest_folder(root: Path, after_vmstat: str) -> Path:
    for side, uptime in (("before", "10.00"), ("after", "14.00")):
        (root / side).mkdir(parents=True)
        for f in DATA.glob("host-*.txt"):
            (root / side / f.name[5:-4]).write_text(f.read_text())
        (root / side / "uptime").write_text(uptime + "\n")
    (root / "after" / "vmstat").write_text(after_vmstat)
    (root / "before" / "vmstat").write_text("pgfault 100\npgmajfault 2\n")
    (root / "perf-stat.csv").write_text(PERF_STAT)
    return root


def test_the_host_reads_the_deltas_and_perf_stats_counters(tmp_path: Path) -> None:
    stats = read_stats(guest_folder(tmp_path / "explain", "pgfault 160\npgmajfault 2\n"), [])
    assert stats[("vmstat", "pgfault")] == 60 and stats[("vmstat", "pgmajfault")] == 0
    assert stats[("stat", "ctxt")] == 0  # the same file both times: no change
    assert stats[("perf-stat", "context-switches")] == 41230
    assert stats[("perf-stat", "task-clock")] == pytest.approx(2004.01)
    assert ("perf-stat", "page-faults") not in stats  # not counted is not 0
    assert read_stacks(tmp_path / "explain", []) == {}  # no perf in the guest: no samples


def test_the_names_a_guest_left_are_printable_and_capped(tmp_path: Path) -> None:
    """A counter's or a function's name reaches the Why lines, and notes: one line, capped."""
    folder = guest_folder(tmp_path / "explain", "pgfault 160\npgmajfault 2\n")
    (folder / "perf-stat.csv").write_text("5,,ctx\x1b[2J" + "x" * 5000 + ",1,100.00,,\n")
    (folder / "perf.script").write_text(
        "fio\x1b[2J 1\n\tffff queue_rq\x1b[31m" + "y" * 900 + "\n\n"
    )
    names = [name for _, name in read_stats(folder, [])]
    frames = [f for stack in read_stacks(folder, []) for f in stack.split(";")]
    ctx = "ctx [2J" + "x" * (EXPLAIN_NAME_CHARS - 8) + "\u2026"
    assert ctx in names and frames[0] == "fio [2J"
    assert all(n.isprintable() and len(n) <= EXPLAIN_NAME_CHARS for n in names + frames)


def test_a_guest_that_left_no_statistics_is_a_failed_testcase(tmp_path: Path) -> None:
    (tmp_path / "explain").mkdir()
    with pytest.raises(TestcaseFailedError, match="no statistics"):
        read_stats(tmp_path / "explain", [])


def test_an_uptime_that_does_not_read_leaves_out_the_rates_and_the_rest_counts(
    tmp_path: Path,
) -> None:
    folder = guest_folder(tmp_path / "explain", "pgfault 160\npgmajfault 2\n")
    for side, reads in (("before", 0), ("after", 100)):
        (folder / side / "diskstats").write_text(f" 253 0 vda {reads} 0 800 50{' 0' * 7}\n")
    assert ("diskstats", "vda r/s") in read_stats(folder, [])
    (folder / "after" / "uptime").write_text("garbage\n")
    said: list[str] = []
    stats = read_stats(folder, said)
    assert said == ["uptime: cannot read it: 'garbage' is not a number: no per-second figures"]
    assert stats[("vmstat", "pgfault")] == 60 and ("diskstats", "vda rareq-sz sectors") in stats
    assert not any(name.endswith("/s") for _, name in stats)
