"""A guest's system statistics, read from /proc before and after the testcase, as one
flat table of (source, name) -> value, and their deltas over the testcase. Pure.

Counters are summed over the CPUs (per-CPU rows double the statistics and mostly show
where the scheduler happened to run a task, not what the kernel did). iostat's derived
figures are computed per disk from the diskstats deltas and the seconds between the two
reads, as `iostat -x` does: r/s, rkB/s, rrqm/s, the average request size, await, %util.
"""

from collections.abc import Mapping

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


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


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
                out[("stat", name)] = float(value)
        elif parts[0] in ("ctxt", "processes", "intr", "softirq") and len(parts) > 1:
            out[("stat", parts[0])] = float(parts[1])  # intr, softirq: their totals
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
                out[key] = out.get(key, 0.0) + float(value)
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
            out[("diskstats", f"{disk} {name}")] = float(value)
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


def parse(files: Mapping[str, str]) -> Stats:
    """One read of the /proc files (by source name; a missing one reads as nothing: a
    kernel without schedstats has no /proc/schedstat)."""
    out: Stats = {}
    for source, text in files.items():
        if source in _PARSERS:
            out.update(_PARSERS[source](text))
    return out


def delta(before: Stats, after: Stats, seconds: float) -> Stats:
    """Each statistic's change over the testcase, and iostat's figures for each disk
    that did I/O in it."""
    out = {k: after[k] - before[k] for k in after if k in before}
    out.update(iostat(out, seconds))
    return out


# perf stat's software counters an explain boot reads (TCG guests have no PMU)
PERF_EVENTS = ("context-switches", "cpu-migrations", "page-faults", "task-clock")


def perf_stat(csv: str) -> Stats:
    """`perf stat -x,`'s counters (value,unit,event,...); one not counted is left out."""
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
