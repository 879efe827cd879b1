"""Block-layer diagnostics from one traced repetition (blktrace in the guest).

The guest records blktrace on the testcase's disks during one extra repetition and, per
disk, leaves: `<dev>.bin` (blkparse's binary dump, what btt reads), `<dev>.events` (one
line an event: action, RWBS, sectors, start sector, seconds, nanoseconds), `<dev>.btt`
(btt's report) and btt's per-I/O latency files (`<dev>*_q2c.dat`, `<dev>*_d2c.dat`:
"time latency" lines, seconds; btt writes none for Q2G and I2D, whose p99 comes from the
events). This module turns those into the figures the seed
engineer worked out by hand (Q2C, D2C, Q2G, I2D, merges, request sizes) and compares
two kernels' figures in words. btt mixes reads and writes; a latency testcase cares about
its reads behind a writer, so each direction also gets its own requests, sizes, D2C and
Q2C, from the events (a request is followed from its first bio's queueing, by start
sector, to its completion).
"""

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kbisect.infra.qemu import guest_text
from kbisect.testcases.manifest import MAX_DISKS
from kbisect.testcases.scoring import sample

# btt's "All Devices" table: NAME MIN AVG MAX N (seconds).
_BTT_ROW = re.compile(
    r"^(Q2Q|Q2G|G2I|Q2M|I2D|M2D|D2C|Q2C)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)"
)
# an events file, a disk's latency files or its btt report, read this far at most
MAX_LINES = 5_000_000
# Distinct request sizes kept in a disk's histogram (a real device's are a few dozen, each
# a multiple of its block size): a guest's trace of unique sizes must not fill the result.
MAX_SIZES = 512
LINE_CHARS = 4096  # a line of the guest's files read at once, at most (an event's: 40)
# A count, sector or time field's digits at most (10^12 sectors is 512 TB): a longer one,
# or one not in ASCII digits ('²' is isdigit()), is none of blkparse's or btt's.
COUNT_DIGITS = 12
# Requests followed at once per phase (queued, inserted, issued): a device has a few
# thousand in flight; past it, a request queued, inserted or issued is not followed (its
# Q2G, I2D, D2C or Q2C not counted), so 5 million Q lines cannot fill memory.
MAX_PENDING = 1_000_000


@dataclass
class Latency:
    avg_ms: float
    p99_ms: float | None = None  # from btt's per-I/O files (Q2C, D2C) or the events
    n: int = 0


@dataclass
class Direction:
    """One direction's requests on a disk (reads or writes)."""

    requests: int = 0
    sectors: int = 0  # in all
    d2c: Latency | None = None
    q2c: Latency | None = None

    @property
    def avg_sectors(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0


@dataclass
class DiskTrace:
    disk: str  # the testcase's name for it
    device: str  # the guest's, e.g. nvme0n1
    latencies: dict[str, Latency] = field(default_factory=dict)  # q2c, d2c, q2g, i2d
    requests: int = 0  # issued to the device (D events)
    merges: int = 0  # bios merged into a request (M and F events)
    sectors: dict[int, int] = field(default_factory=dict)  # request size -> requests
    directions: dict[str, Direction] = field(default_factory=dict)  # "read", "write"

    @property
    def avg_request_sectors(self) -> float:
        counted = sum(self.sectors.values())  # the requests of the sizes kept (MAX_SIZES)
        return sum(s * n for s, n in self.sectors.items()) / counted if counted else 0.0

    def to_json(self) -> dict[str, object]:
        return asdict(self) | {"avg_request_sectors": round(self.avg_request_sectors, 1)}


def btt_averages(lines: Iterable[str]) -> dict[str, Latency]:
    """Each phase's average (ms) and count from btt's first (all devices) table; a row
    whose figures are not finite or its count no count is none."""
    found: dict[str, Latency] = {}
    for line in lines:
        m = _BTT_ROW.match(line.strip())
        if not m or m.group(1).lower() in found:
            continue
        avg, n = _seconds(m.group(3)), _count(m.group(5))
        if avg is not None and n is not None:
            found[m.group(1).lower()] = Latency(avg * 1e3, None, n)
    return found


def _count(text: str) -> int | None:
    """A guest's count, sector or time field: ASCII digits, COUNT_DIGITS at most."""
    ok = text.isascii() and text.isdigit() and len(text) <= COUNT_DIGITS
    return int(text) if ok else None


def _seconds(text: str) -> float | None:
    """A guest's seconds, finite in milliseconds too (as reports show them): not NaN,
    an infinity or 1e999."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if sample(value * 1e3) is not None else None


def p99(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def latency_file(lines: Iterable[str]) -> list[float]:
    """Latencies (seconds) from btt's per-I/O file: 'time latency' lines."""
    out: list[float] = []
    for i, line in enumerate(lines):
        if i >= MAX_LINES:
            break
        parts = line.split()
        if len(parts) >= 2 and (value := _seconds(parts[1])) is not None:
            out.append(value)
    return out


@dataclass
class Events:
    issued: int = 0  # requests issued to the device (D events)
    merges: int = 0  # bios merged into a request (M and F events)
    sizes: Counter[int] = field(default_factory=Counter)
    directions: dict[str, Direction] = field(default_factory=dict)
    # q2g (a bio queued until it got a request) and i2d (a request inserted into the
    # scheduler until issued to the device), seconds, both directions
    phases: dict[str, list[float]] = field(default_factory=lambda: {"q2g": [], "i2d": []})


def events(lines: Iterable[str]) -> Events:
    """Requests, merges, the size histogram and each direction's figures from 'ACTION RWBS
    SECTORS [START SECONDS NANOSECONDS]' lines (older traces lack the last three)."""
    out = Events()
    queued: dict[tuple[str, int], float] = {}  # MAX_PENDING each
    issued: dict[tuple[str, int], float] = {}
    inserted: dict[tuple[str, int], float] = {}
    times: dict[str, tuple[list[float], list[float]]] = {}  # direction -> (d2c, q2c), s
    for i, line in enumerate(lines):
        if i >= MAX_LINES:
            break
        parts = line.split()
        if len(parts) < 3:
            continue
        action, rwbs, n = parts[0], parts[1], _count(parts[2])
        way = "read" if "R" in rwbs else "write" if "W" in rwbs else ""
        if action in ("M", "F"):
            out.merges += 1
        elif action == "D" and way and n:
            out.issued += 1
            if n in out.sizes or len(out.sizes) < MAX_SIZES:
                out.sizes[n] += 1
            d = out.directions.setdefault(way, Direction())
            d.requests += 1
            d.sectors += n
        if not way or len(parts) < 6:
            continue
        start, sec, ns = (_count(p) for p in parts[3:6])
        if start is None or sec is None or ns is None:
            continue
        key, t = (way, start), sec + ns / 1e9
        if action == "Q" and len(queued) < MAX_PENDING:
            queued.setdefault(key, t)
        elif action == "G" and key in queued:
            out.phases["q2g"].append(t - queued[key])
        elif action == "I" and (key in inserted or len(inserted) < MAX_PENDING):
            inserted[key] = t
        elif action == "D":
            if key in issued or len(issued) < MAX_PENDING:
                issued[key] = t
            if key in inserted:
                out.phases["i2d"].append(t - inserted.pop(key))
        elif action == "C":
            d2c, q2c = times.setdefault(way, ([], []))
            if key in issued:
                d2c.append(t - issued.pop(key))
            if key in queued:
                q2c.append(t - queued.pop(key))
    for way, (d2c, q2c) in times.items():
        d = out.directions.setdefault(way, Direction())
        d.d2c, d.q2c = _latency(d2c), _latency(q2c)
    return out


def _latency(seconds: list[float]) -> Latency | None:
    if not seconds:
        return None
    return Latency(sum(seconds) / len(seconds) * 1e3, (p99(seconds) or 0.0) * 1e3, len(seconds))


# A block device's name as the kernel gives it (vdb, nvme0n1, dm-0), nothing a path can use.
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")


def summarize(trace_dir: Path) -> list[DiskTrace]:
    """One DiskTrace per traced disk, from what the guest left in `trace_dir`."""
    out = []
    rows = _lines(trace_dir / "disks") if (trace_dir / "disks").exists() else []
    for row in itertools.islice(rows, MAX_DISKS):  # a testcase's disks, at most
        if len(row.split()) != 2:
            continue
        name, dev = row.split()
        if not DEVICE_NAME.fullmatch(dev):
            continue  # the guest wrote it, and it names files here: never a path ("../x")
        trace = DiskTrace(guest_text(name), dev)  # the guest wrote the name: it is shown
        btt = trace_dir / f"{dev}.btt"
        if btt.exists():
            trace.latencies = {
                k: v
                for k, v in btt_averages(itertools.islice(_lines(btt), MAX_LINES)).items()
                if k in ("q2c", "d2c", "q2g", "i2d")
            }
        for phase in ("q2c", "d2c"):
            files = sorted(trace_dir.glob(f"{dev}*_{phase}.dat"))
            values = latency_file(line for f in files for line in _lines(f))
            if values and phase in trace.latencies:
                trace.latencies[phase].p99_ms = (p99(values) or 0.0) * 1e3
        ev = trace_dir / f"{dev}.events"
        if ev.exists():
            found = events(_lines(ev))
            trace.requests, trace.merges = found.issued, found.merges
            trace.sectors = dict(sorted(found.sizes.items()))
            trace.directions = dict(sorted(found.directions.items()))
            for phase, values in found.phases.items():
                if values and phase in trace.latencies:
                    trace.latencies[phase].p99_ms = (p99(values) or 0.0) * 1e3
        out.append(trace)
    return out


def _lines(path: Path) -> Iterable[str]:
    """The file's lines, each cut into pieces of LINE_CHARS at most: a guest's file of
    one 500 MB line is not read into memory whole."""
    with open(path, errors="replace") as fh:
        yield from iter(lambda: fh.readline(LINE_CHARS), "")


def compare(old: DiskTrace, new: DiskTrace, same_within: float = 0.1) -> str:
    """Two kernels' traces of one disk in words, old first: 'D2C unchanged (0.31 ms),
    Q2C +12.3 ms (0.50 -> 12.8 ms), requests 512 -> 8 sectors (1026 -> 65664)'."""
    parts = []
    for phase in ("d2c", "q2c", "q2g", "i2d"):
        a, b = old.latencies.get(phase), new.latencies.get(phase)
        if a is None or b is None:
            continue
        label = phase.upper()
        if abs(b.avg_ms - a.avg_ms) <= same_within * max(a.avg_ms, b.avg_ms, 1e-9):
            parts.append(f"{label} unchanged ({a.avg_ms:.3g} ms)")
        else:
            parts.append(
                f"{label} {b.avg_ms - a.avg_ms:+.3g} ms ({a.avg_ms:.3g} -> {b.avg_ms:.3g} ms)"
            )
        if a.p99_ms is not None and b.p99_ms is not None and phase == "q2c":
            parts.append(f"{label} p99 {a.p99_ms:.3g} -> {b.p99_ms:.3g} ms")
    if old.requests and new.requests:
        parts.append(
            f"requests {old.avg_request_sectors:.0f} -> {new.avg_request_sectors:.0f} sectors "
            f"({old.requests} -> {new.requests} issued, merges {old.merges} -> {new.merges})"
        )
    for way in ("read", "write"):
        a_dir, b_dir = old.directions.get(way), new.directions.get(way)
        if a_dir and b_dir and a_dir.requests and b_dir.requests:
            parts.append(f"{way}s " + _compare_direction(a_dir, b_dir))
    return f"{old.disk}: " + ", ".join(parts) if parts else f"{old.disk}: no trace figures"


def no_worse(old: DiskTrace, new: DiskTrace, same_within: float = 0.1) -> bool:
    """Whether the block layer held up as well on `new`: no Q2C or D2C (of the disk, of
    its reads, of its writes) more than `same_within` slower, nor requests that much
    smaller. When it held up but the testcase got worse, the time went above it."""
    pairs = [(old.latencies.get(p), new.latencies.get(p)) for p in ("q2c", "d2c")]
    for way in ("read", "write"):
        a, b = old.directions.get(way), new.directions.get(way)
        if a and b:
            pairs += [(a.q2c, b.q2c), (a.d2c, b.d2c)]
    slower = any(x and y and y.avg_ms > x.avg_ms * (1 + same_within) for x, y in pairs)
    smaller = new.avg_request_sectors < old.avg_request_sectors * (1 - same_within)
    return bool(old.requests and new.requests) and not slower and not smaller


def _compare_direction(a: Direction, b: Direction) -> str:
    """'Q2C 3.1 -> 40 ms (p99 9 -> 120), D2C 2.9 -> 4 ms, 64 -> 8 sectors (900 -> 7000)'"""
    words = []
    for label, x, y in (("Q2C", a.q2c, b.q2c), ("D2C", a.d2c, b.d2c)):
        if x and y:
            words.append(
                f"{label} {x.avg_ms:.3g} -> {y.avg_ms:.3g} ms "
                f"(p99 {x.p99_ms or 0:.3g} -> {y.p99_ms or 0:.3g})"
            )
    words.append(
        f"{a.avg_sectors:.0f} -> {b.avg_sectors:.0f} sectors ({a.requests} -> {b.requests})"
    )
    return "; ".join(words)


def traces_of(diagnostics: dict[str, object]) -> dict[str, DiskTrace]:
    """Disk name -> DiskTrace, back from Diagnostics.to_json() (a job's result)."""
    out = {}
    disks = diagnostics.get("disks")
    for name, raw in (disks if isinstance(disks, dict) else {}).items():
        if not isinstance(raw, dict):
            continue
        lat = raw.get("latencies") or {}
        out[name] = DiskTrace(
            disk=name,
            device=str(raw.get("device", "")),
            latencies={k: Latency(**v) for k, v in lat.items() if isinstance(v, dict)},
            requests=int(raw.get("requests", 0)),
            merges=int(raw.get("merges", 0)),
            sectors={int(k): int(v) for k, v in (raw.get("sectors") or {}).items()},
            directions={way: _direction(v) for way, v in (raw.get("directions") or {}).items()},
        )
    return out


def _direction(raw: dict[str, object]) -> Direction:
    def lat(v: object) -> Latency | None:
        return Latency(**v) if isinstance(v, dict) else None

    return Direction(
        requests=int(str(raw.get("requests", 0))),
        sectors=int(str(raw.get("sectors", 0))),
        d2c=lat(raw.get("d2c")),
        q2c=lat(raw.get("q2c")),
    )
