"""A guest's system statistics, read from /proc before and after the testcase, as one
flat table of (source, name) -> value, and their deltas over the testcase. Pure.

Counters are summed over the CPUs (per-CPU rows double the statistics and mostly show
where the scheduler happened to run a task, not what the kernel did). iostat's derived
figures are computed per disk from the diskstats deltas and the seconds between the two
reads, as `iostat -x` does: r/s, rkB/s, rrqm/s, the average request size, await, %util.

The files are the kernel under test's: a figure that is not finite or past a counter's
range makes its file unreadable (Unreadable), and a source's statistics are bounded
(`bounded`); what is left out is said in `said`.
"""

from collections import Counter
from collections.abc import Callable, Mapping

from kbisect.contract import EXPLAIN_NAME_CHARS, EXPLAIN_SOURCE_STATS
from kbisect.infra.qemu import guest_text
from kbisect.model import Stats

# The /proc files an explain boot reads, by the source name the comparison gives them
SOURCES = ("vmstat", "diskstats", "schedstat", "softirqs", "interrupts", "stat", "meminfo")
SECTOR_BYTES = 512  # diskstats counts 512-byte sectors whatever the device's block size
# /proc/diskstats fields after major, minor and name (Documentation/admin-guide/iostats.rst)
DISK_FIELDS = (
    "reads",
    "reads merged",
    "sectors read",
    "ms reading",
    "writes",
    "writes merged",
    "sectors written",
    "ms writing",
    "in flight",
    "ms doing io",
    "weighted ms",
)
# /proc/stat's cpu line (USER_HZ ticks)
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# /proc/schedstat's cpu lines, version 15 on (Documentation/scheduler/sched-stats.rst);
# the second field is a legacy zero
SCHED_FIELDS = (
    "yld_count",
    "",
    "sched_count",
    "sched_goidle",
    "ttwu_count",
    "ttwu_local",
    "run_time_ns",
    "run_delay_ns",
    "timeslices",
)


# A kernel counter's range (u64): a figure past it is none of the kernel's, and would
# overflow the comparison's arithmetic
LARGEST = 2.0**64


class Unreadable(ValueError):
    """A statistics file that does not read as the kernel writes it: why, in words."""


def _number(text: str) -> float | None:
    """A figure; None for a word (a header, perf's "<not counted>"). Unreadable: NaN, an
    infinity, or a figure past LARGEST."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not abs(value) <= LARGEST:  # NaN too
        raise Unreadable(f"{guest_text(text, EXPLAIN_NAME_CHARS)!r} is not a counter's value")
    return value


def _figure(text: str) -> float:
    """A figure where the file has one. Unreadable: anything else."""
    value = _number(text)
    if value is None:
        raise Unreadable(f"{guest_text(text, EXPLAIN_NAME_CHARS)!r} is not a number")
    return value


def _pairs(text: str, source: str) -> Stats:
    """`name value` lines (vmstat) or `Name: value [kB]` lines (meminfo)."""
    out: Stats = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and (value := _number(parts[1])) is not None:
            out[(source, parts[0])] = value
    return out


def _per_cpu_table(text: str, source: str) -> Stats:
    """softirqs and interrupts: a CPU header, then a row a source with a count a CPU
    (summed) and, for interrupts, the controller and the device after the counts."""
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = len(lines[0].split())
    out: Stats = {}
    for line in lines[1:]:
        label, _, rest = line.partition(":")
        fields = rest.split()
        counts = [_number(f) for f in fields[:cpus]]
        if not label.strip() or not counts or any(c is None for c in counts):
            continue
        name = label.strip()
        if name.isdigit() and fields[cpus:]:
            name = fields[-1]  # the device, as IRQ numbers move between kernels
        out[(source, name)] = out.get((source, name), 0.0) + sum(c or 0.0 for c in counts)
    return out


def _stat(text: str) -> Stats:
    out: Stats = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            for name, value in zip(CPU_FIELDS, parts[1:], strict=False):
                out[("stat", name)] = _figure(value)
        elif parts[0] in ("ctxt", "processes", "intr", "softirq") and len(parts) > 1:
            out[("stat", parts[0])] = _figure(parts[1])  # intr, softirq: their totals
    return out


def _schedstat(text: str) -> Stats:
    out: Stats = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        for name, value in zip(SCHED_FIELDS, parts[1:], strict=False):
            if name:
                key = ("schedstat", name)
                out[key] = out.get(key, 0.0) + _figure(value)
    return out


def _diskstats(text: str) -> Stats:
    out: Stats = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 + len(DISK_FIELDS):
            continue
        disk = parts[2]
        if disk.startswith(("loop", "ram")):
            continue  # idle in a guest, and dozens of them
        for name, value in zip(DISK_FIELDS, parts[3:], strict=False):
            out[("diskstats", f"{disk} {name}")] = _figure(value)
    return out


_PARSERS = {
    "vmstat": lambda t: _pairs(t, "vmstat"),
    "meminfo": lambda t: _pairs(t, "meminfo"),
    "softirqs": lambda t: _per_cpu_table(t, "softirqs"),
    "interrupts": lambda t: _per_cpu_table(t, "interrupts"),
    "stat": _stat,
    "schedstat": _schedstat,
    "diskstats": _diskstats,
}


def parse(files: Mapping[str, str], said: list[str] | None = None) -> Stats:
    """One read of the /proc files (by source name; a missing one reads as nothing: a
    kernel without schedstats has no /proc/schedstat), each bounded; an unreadable one is
    left out, said in `said`."""
    said = [] if said is None else said
    out: Stats = {}
    for source, text in files.items():
        if source in _PARSERS:
            out.update(bounded(read_source(source, text, _PARSERS[source], said), said))
    return out


def read_source(source: str, text: str, parser: Callable[[str], Stats], said: list[str]) -> Stats:
    """One file's statistics; none, said in `said`, when it is unreadable."""
    try:
        return parser(text)
    except Unreadable as exc:
        said.append(f"{source}: cannot read it: {exc}")
        return {}


def bounded(stats: Stats, said: list[str]) -> Stats:
    """The statistics as a result carries them: each name guest_text of EXPLAIN_NAME_CHARS,
    a source's first EXPLAIN_SOURCE_STATS, and no figure that is not finite or is past
    LARGEST (a delta's or a rate's overflow); what is left out said in `said`."""
    out: Stats = {}
    kept: Counter[str] = Counter()
    left: Counter[str] = Counter()
    for (source, name), value in stats.items():
        if not abs(value) <= LARGEST:  # NaN and the infinities too
            left[f"{source}: figures out of range"] += 1
        elif kept[source] >= EXPLAIN_SOURCE_STATS:
            left[f"{source}: statistics past its first {EXPLAIN_SOURCE_STATS:,}"] += 1
        else:
            kept[source] += 1
            out[(source, guest_text(name, EXPLAIN_NAME_CHARS))] = value
    said += [f"{what}: {n:,} left out" for what, n in left.items()]
    return out


def delta(before: Stats, after: Stats, seconds: float) -> Stats:
    """Each statistic's change over the testcase, and iostat's figures for each disk
    that did I/O in it."""
    out = {k: after[k] - before[k] for k in after if k in before}
    out.update(iostat(out, seconds))
    return out


def uptime(text: str) -> float:
    """The guest's uptime in seconds (kb_now: /proc/uptime's first figure). Unreadable:
    anything else."""
    return _figure(text.strip())


# perf stat's software counters an explain boot reads (TCG guests have no PMU)
PERF_EVENTS = ("context-switches", "cpu-migrations", "page-faults", "task-clock")


def perf_stat(csv: str) -> Stats:
    """`perf stat -x,`'s counters (value,unit,event,...); one not counted is left out.
    Unreadable: a counter that is not finite or past LARGEST."""
    out: Stats = {}
    for line in csv.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and not line.startswith("#"):
            value = _number(fields[0])
            if value is not None:
                out[("perf-stat", fields[2])] = value
    return out


def iostat(d: Stats, seconds: float) -> Stats:
    """`iostat -x`'s figures per disk from diskstats deltas over `seconds`."""
    out: Stats = {}
    disks = {name.rsplit(" ", 1)[0] for (src, name) in d if src == "diskstats" and " " in name}
    for disk in sorted(disks):

        def get(field: str, disk: str = disk) -> float:
            return d.get(("diskstats", f"{disk} {field}"), 0.0)

        for io, verb in (("r", "read"), ("w", "written")):
            count = get("reads" if io == "r" else "writes")
            if count <= 0:
                continue
            sectors = get(f"sectors {verb}")
            merged = get("reads merged" if io == "r" else "writes merged")
            wait = get("ms reading" if io == "r" else "ms writing")
            if seconds > 0:
                out[("diskstats", f"{disk} {io}/s")] = count / seconds
                out[("diskstats", f"{disk} {io}kB/s")] = sectors * SECTOR_BYTES / 1024 / seconds
                out[("diskstats", f"{disk} {io}rqm/s")] = merged / seconds
            out[("diskstats", f"{disk} {io}areq-sz sectors")] = sectors / count
            out[("diskstats", f"{disk} {io}_await ms")] = wait / count
            out[("diskstats", f"{disk} {io}rqm %")] = 100 * merged / (merged + count)
        if seconds > 0 and any(get(f) > 0 for f in ("reads", "writes")):
            out[("diskstats", f"{disk} %util")] = 100 * get("ms doing io") / (seconds * 1000)
    return out
