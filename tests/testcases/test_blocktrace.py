"""Block-trace summaries: btt's table, its per-I/O latency files, blkparse's events."""

from pathlib import Path

from kbisect.testcases import blocktrace
from kbisect.testcases.blocktrace import DiskTrace, Latency

BTT = """
==================== All Devices ====================

            ALL           MIN           AVG           MAX           N
--------------- ------------- ------------- ------------- -----------

Q2Q               0.000001308   0.001237651   0.057245587        1025
Q2G               0.000000523   0.000001136   0.000039181        1026
G2I               0.000000401   0.000000812   0.000010115        1026
I2D               0.000000605   0.000002010   0.000025119        1026
D2C               0.000221000   0.000320658   0.001912000        1026
Q2C               0.000224000   0.000325948   0.001950000        1026

==================== Device Overhead ====================
"""


def _folder(tmp_path: Path, events: str) -> Path:
    (tmp_path / "disks").write_text("origin nvme0n1\ncow nvme1n1\n")
    (tmp_path / "nvme0n1.btt").write_text(BTT)
    q2c = "".join(f"0.{i:03d} 0.000{300 + i}\n" for i in range(100))
    (tmp_path / "nvme0n1_259,0_q2c.dat").write_text(q2c)
    (tmp_path / "nvme0n1.events").write_text(events)
    return tmp_path


def test_btt_averages_in_milliseconds() -> None:
    found = blocktrace.btt_averages(BTT)
    assert round(found["q2c"].avg_ms, 6) == 0.325948 and found["q2c"].n == 1026
    assert round(found["d2c"].avg_ms, 6) == 0.320658
    assert "q2g" in found and "i2d" in found


def test_summary_per_disk_with_p99_merges_and_request_sizes(tmp_path: Path) -> None:
    events = "Q R 512\nM R 8\nF R 8\nD R 512\nD R 512\nD R 8\nC R 512\nD N 0\nbad\n"
    origin, cow = blocktrace.summarize(_folder(tmp_path, events))
    assert (origin.disk, origin.device, cow.disk) == ("origin", "nvme0n1", "cow")
    assert origin.requests == 3 and origin.merges == 2 and origin.sectors == {8: 1, 512: 2}
    assert round(origin.avg_request_sectors, 1) == 344.0
    assert origin.latencies["q2c"].p99_ms is not None
    assert round(origin.latencies["q2c"].p99_ms, 3) == 0.398  # the 99th of 100 values
    assert origin.latencies["d2c"].p99_ms is None  # no d2c file
    assert cow.requests == 0 and cow.latencies == {}


def test_compare_says_what_changed_in_words() -> None:
    good = DiskTrace("origin", "nvme0n1", {"d2c": Latency(0.32), "q2c": Latency(0.5, 0.9)})
    good.requests, good.sectors = 1026, {512: 1026}
    bad = DiskTrace("origin", "nvme0n1", {"d2c": Latency(0.33), "q2c": Latency(12.8, 40.0)})
    bad.requests, bad.sectors = 65664, {8: 65664}
    text = blocktrace.compare(good, bad)
    assert text.startswith("origin: D2C unchanged (0.32 ms), Q2C +12.3 ms (0.5 -> 12.8 ms)")
    assert "Q2C p99 0.9 -> 40 ms" in text
    assert "requests 512 -> 8 sectors (1026 -> 65664 issued" in text
