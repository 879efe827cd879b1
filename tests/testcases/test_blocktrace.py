"""Block-trace summaries: btt's table, its per-I/O latency files, blkparse's events."""

import json
import tracemalloc
from pathlib import Path

import pytest

from kbisect.testcases import blocktrace
from kbisect.testcases.blocktrace import LINE_CHARS, MAX_SIZES, Direction, DiskTrace, Latency
from kbisect.testcases.manifest import MAX_DISKS

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
    found = blocktrace.btt_averages(BTT.splitlines())
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


def test_a_disk_name_the_guest_wrote_is_printable(tmp_path: Path) -> None:
    (tmp_path / "disks").write_text("orig\x1b]0;x\x07in nvme0n1\n")
    (trace,) = blocktrace.summarize(tmp_path)
    assert trace.disk == "orig ]0;x in"


def test_a_device_name_that_is_a_path_reads_no_file_outside(tmp_path: Path) -> None:
    trace_dir, outside = tmp_path / "trace", tmp_path / "secret.btt"
    trace_dir.mkdir()
    outside.write_text(BTT)  # what "../secret" would read of the host
    (trace_dir / "disks").write_text("origin ../secret\ncow nvme1n1\n")
    assert [t.device for t in blocktrace.summarize(trace_dir)] == ["nvme1n1"]


def test_a_guests_trace_is_read_bounded(tmp_path: Path) -> None:
    rows = "".join(f"d{i} vd{i}\n" for i in range(MAX_DISKS + 5))
    (tmp_path / "disks").write_text(rows)
    sizes = "".join(f"D R {n}\n" for n in range(1, MAX_SIZES + 100))
    (tmp_path / "vd0.events").write_text(sizes + "D R 8\n" + "x" * (LINE_CHARS * 50))
    traces = blocktrace.summarize(tmp_path)
    assert len(traces) == MAX_DISKS
    first = traces[0]
    assert first.requests == MAX_SIZES + 99 + 1 and len(first.sectors) == MAX_SIZES
    assert first.avg_request_sectors == (sum(range(1, MAX_SIZES + 1)) + 8) / (MAX_SIZES + 1)


def test_compare_says_what_changed_in_words() -> None:
    good = DiskTrace("origin", "nvme0n1", {"d2c": Latency(0.32), "q2c": Latency(0.5, 0.9)})
    good.requests, good.sectors = 1026, {512: 1026}
    bad = DiskTrace("origin", "nvme0n1", {"d2c": Latency(0.33), "q2c": Latency(12.8, 40.0)})
    bad.requests, bad.sectors = 65664, {8: 65664}
    text = blocktrace.compare(good, bad)
    assert text.startswith("origin: D2C unchanged (0.32 ms), Q2C +12.3 ms (0.5 -> 12.8 ms)")
    assert "Q2C p99 0.9 -> 40 ms" in text
    assert "requests 512 -> 8 sectors (1026 -> 65664 issued" in text


def test_each_direction_gets_its_own_requests_and_latencies(tmp_path: Path) -> None:
    # A write of 1024 sectors queued at 0.0, issued at 0.001, done at 0.021; a read queued
    # behind it at 0.002 (a back-merged bio at 72 never completes on its own), issued at
    # 0.010, done at 0.030; a discard is neither.
    events = (
        "Q W 1024 0 0 0\nD W 1024 0 0 1000000\n"
        "Q R 64 8 0 2000000\nM R 8 72 0 2500000\nD R 72 8 0 10000000\n"
        "C W 1024 0 0 21000000\nC R 72 8 0 30000000\nD D 8 4096 0 3000\n"
    )
    (origin, _) = blocktrace.summarize(_folder(tmp_path, events))
    read, write = origin.directions["read"], origin.directions["write"]
    assert (read.requests, read.sectors, write.requests, write.sectors) == (1, 72, 1, 1024)
    assert read.q2c and read.d2c and write.q2c and write.d2c
    assert round(read.q2c.avg_ms, 3) == 28.0 and round(read.d2c.avg_ms, 3) == 20.0
    assert round(write.q2c.avg_ms, 3) == 21.0 and round(write.d2c.avg_ms, 3) == 20.0
    back = blocktrace.traces_of({"disks": {"origin": origin.to_json()}})["origin"]
    assert back.directions == origin.directions  # through a job's JSON and back


def test_q2g_and_i2d_get_their_p99_from_the_events(tmp_path: Path) -> None:
    # btt writes no per-I/O file for them. 100 reads: each gets its request 1..100 us
    # after queueing and is issued 2 ms after insertion; one write waits 50 ms for both.
    lines = []
    for i in range(100):
        q = i * 0.01
        at = [q, q + (i + 1) * 1e-6, q + 2e-3, q + 4e-3, q + 5e-3]
        for action, t in zip("QGIDC", at, strict=True):
            lines.append(f"{action} R 8 {i * 8} {int(t)} {round(t % 1 * 1e9)}")
    lines += ["Q W 8 9000 5 0", "G W 8 9000 5 50000000", "I W 8 9000 5 60000000"]
    lines += ["D W 8 9000 5 110000000"]
    (origin, _) = blocktrace.summarize(_folder(tmp_path, "\n".join(lines) + "\n"))
    q2g, i2d = origin.latencies["q2g"], origin.latencies["i2d"]
    assert q2g.p99_ms is not None and i2d.p99_ms is not None
    assert round(q2g.p99_ms, 3) == 0.1  # the 99th of 101: the slowest read's 100 us
    assert round(i2d.p99_ms, 3) == 2.0
    assert round(q2g.avg_ms, 6) == 0.001136  # the averages stay btt's


def test_old_three_field_events_have_no_direction_times(tmp_path: Path) -> None:
    (origin, _) = blocktrace.summarize(_folder(tmp_path, "D R 8\nC R 8\n"))
    assert origin.directions == {"read": Direction(requests=1, sectors=8)}


def test_compare_puts_reads_and_writes_side_by_side() -> None:
    good = DiskTrace("data", "nvme0n1", {"d2c": Latency(5.0)})
    good.directions = {"read": Direction(90, 900, Latency(2.0, 4.0), Latency(3.0, 9.0))}
    bad = DiskTrace("data", "nvme0n1", {"d2c": Latency(5.1)})
    bad.directions = {"read": Direction(700, 5600, Latency(4.0, 8.0), Latency(40.0, 120.0))}
    text = blocktrace.compare(good, bad)
    assert "reads Q2C 3 -> 40 ms (p99 9 -> 120); D2C 2 -> 4 ms (p99 4 -> 8)" in text
    assert "10 -> 8 sectors (90 -> 700)" in text


def test_no_worse_looks_at_each_direction_and_the_request_size() -> None:
    def trace(read_q2c: float, sectors: int) -> DiskTrace:
        t = DiskTrace("data", "nvme0n1", {"q2c": Latency(5.0), "d2c": Latency(1.0)})
        t.requests, t.sectors = 10, {sectors: 10}
        t.directions = {"read": Direction(10, 10 * sectors, Latency(1.0), Latency(read_q2c))}
        return t

    good = trace(2.0, 300)
    assert blocktrace.no_worse(good, trace(2.1, 290))  # within 10%
    assert blocktrace.no_worse(good, trace(1.0, 600))  # better is not worse
    assert not blocktrace.no_worse(good, trace(3.0, 300))  # reads wait longer in the queue
    assert not blocktrace.no_worse(good, trace(2.0, 8))  # requests stopped merging
    assert not blocktrace.no_worse(DiskTrace("data", "nvme0n1"), good)  # nothing traced


def test_a_guests_numbers_that_are_no_numbers_are_skipped(tmp_path: Path) -> None:
    """'²' is isdigit() but no int, 5,000 digits are past int()'s limit, a huge field
    overflowed a float: each stopped the read; a NaN, an infinity or 1e999 in btt's
    files reached the report and its JSON."""
    (tmp_path / "disks").write_text("origin nvme0n1\n")
    long, huge = "9" * 5000, "9" * 400
    btt = BTT.replace("1026\n", long + "\n", 1)  # Q2G's count
    btt = btt.replace("0.000325948", huge + ".0")  # Q2C's average: inf as a float
    (tmp_path / "nvme0n1.btt").write_text(btt)
    dat = "".join(f"0.1 {v}\n" for v in ("nan", "inf", "-inf", "1e999", "1e307", "0.002"))
    (tmp_path / "nvme0n1_259,0_d2c.dat").write_text(dat)
    events = [
        "D R \u00b2",
        f"D R {long}",
        "D R \u0663",  # Arabic-Indic 3: int() reads it, blkparse never writes it
        f"Q R 8 0 0 {huge}",
        f"Q R 8 {huge} 0 0",
        f"C R 8 0 {huge} 0",
        f"Q R 8 16 {long} 0",
        "Q R 8 32 0 1000",
        "D R 8 32 0 2000",
        "C R 8 32 0 3000",
    ]
    (tmp_path / "nvme0n1.events").write_text("\n".join(events) + "\n")
    (trace,) = blocktrace.summarize(tmp_path)
    assert set(trace.latencies) == {"d2c", "i2d"}  # Q2G's and Q2C's rows are none
    assert trace.latencies["d2c"].p99_ms == 2.0  # 1e307 s is no finite ms
    assert trace.requests == 1 and trace.sectors == {8: 1}
    read = trace.directions["read"]
    assert read.q2c and read.q2c.n == 1 and round(read.q2c.avg_ms, 6) == 0.002
    json.dumps(trace.to_json(), allow_nan=False)  # strict JSON: every figure finite


def test_requests_followed_at_once_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    """5 million queued bios that never complete held ~950 MB: past MAX_PENDING in a
    phase, a request is not followed, and those followed still pair."""
    monkeypatch.setattr(blocktrace, "MAX_PENDING", 3)
    lines = [f"{a} R 8 {s} 0 {s}" for a in "QID" for s in range(0, 80, 8)]
    lines += [f"C R 8 {s} 1 0" for s in range(0, 80, 8)]
    read = blocktrace.events(lines).directions["read"]
    assert read.q2c and read.d2c and (read.q2c.n, read.d2c.n) == (3, 3)


def test_btts_report_is_read_a_line_at_a_time(tmp_path: Path) -> None:
    """The tar holds up to 512 MB: a .btt of one line is not read whole."""
    (tmp_path / "disks").write_text("origin nvme0n1\n")
    (tmp_path / "nvme0n1.btt").write_text("x" * (32 << 20) + "\n" + BTT)
    tracemalloc.start()
    try:
        (trace,) = blocktrace.summarize(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert trace.latencies["q2c"].n == 1026 and peak < 4 << 20
