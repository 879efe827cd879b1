"""A traced boot's figures as the explain comparison reads them."""

from kbisect.explain.traced import trace_line, trace_stats
from kbisect.testcases.blocktrace import Direction, DiskTrace, Latency


def _diagnostics() -> dict[str, object]:
    disk = DiskTrace(
        "origin", "nvme0n1", latencies={"q2c": Latency(2.5, 9.0, 100), "d2c": Latency(2.0)},
        requests=100, merges=6400, sectors={512: 100},
        directions={"read": Direction(100, 51200, q2c=Latency(2.5, 9.0, 100)),
                    "write": Direction(0, 0)},
    )  # fmt: skip
    return {"folder": "/runs/x", "disks": {"origin": disk.to_json()}}


def test_every_figure_of_a_disk_is_a_statistic_by_its_device() -> None:
    stats = trace_stats(_diagnostics())
    assert stats["nvme0n1 request size (sectors)"] == 512
    assert stats["nvme0n1 merges"] == 6400 and stats["nvme0n1 requests"] == 100
    assert stats["nvme0n1 Q2C avg ms"] == 2.5 and stats["nvme0n1 Q2C p99 ms"] == 9.0
    assert "nvme0n1 D2C p99 ms" not in stats  # btt wrote no per-I/O file for it
    assert stats["nvme0n1 read request size (sectors)"] == 512
    assert stats["nvme0n1 read Q2C p99 ms"] == 9.0
    assert stats["nvme0n1 write requests"] == 0
    assert "nvme0n1 write request size (sectors)" not in stats  # no request: no size
    assert trace_line(_diagnostics()) == "nvme0n1 100 requests of 512 sectors, 6400 merges"
    assert trace_stats({"folder": "/x"}) == {} and trace_line({}) == "no disk traced"
