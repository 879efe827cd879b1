"""`kbisect testcase new NAME --from fio:JOB.fio`: a fio job file of the user's, imported as
a testcase folder (the kinds' template: manifest, guest script, config fragment) with the
job file copied in, so every VM host ships the same job to its guests.

The job runs on the testcase's own scratch NVMe disk as a raw device: where the job file
names files or a directory, the import points it at the disk instead (`${KB_DEV}`) and
keeps what it said as a comment. The figures are LKP fio-basic's, summed over the jobs:
bandwidth and IOPS, and completion latency (mean, p99) for each direction the job does.
"""

import math
import re
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import UserError
from kbisect.infra import user_file

KIND = "fio"
USAGE = "fio:JOB.fio"
MAX_JOB_BYTES = 64 << 10  # a job file is a page of options, not data
FILE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,59}\.fio$")
# Options naming where a job does its I/O: the testcase's disk takes their place.
TARGETS = frozenset({"filename", "directory", "filename_format", "opendir"})
# The I/O engines that reach a network or another host: a guest has no network.
NETWORK_ENGINES = frozenset({"net", "netsplice", "rdma", "http", "nbd", "rbd", "libiscsi"})
DIRECTIONS = ("read", "write", "trim")
# rw= values (fio's aliases included) and the directions each does
RW = {
    "read": ("read",), "randread": ("read",), "write": ("write",), "randwrite": ("write",),
    "rw": ("read", "write"), "readwrite": ("read", "write"), "randrw": ("read", "write"),
    "trim": ("trim",), "randtrim": ("trim",), "trimwrite": ("trim", "write"),
    "randtrimwrite": ("trim", "write"),
}  # fmt: skip
SIZE_RE = re.compile(r"^(\d+)([kmgt]i?b?)?$", re.IGNORECASE)
MIN_DISK_MIB, DEFAULT_DISK_MIB, MAX_DISK_MIB = 256, 1024, 65536
SLACK_MIB = 64
# Per direction that did I/O, LKP fio-basic's figures summed (or the worst) over the
# jobs, from fio's JSON, in the host's python3.
SUMMARY = (
    "import json, sys\n"
    'jobs = json.load(open(sys.argv[1]))["jobs"]\n'
    "for d in sys.argv[2:]:\n"
    '    done = [j[d] for j in jobs if j.get(d, {}).get("total_ios", 0) > 0]\n'
    "    if not done:\n"
    "        continue\n"
    '    ios = sum(x["total_ios"] for x in done)\n'
    '    print(d + "_bw_mbps", "%.3f" % (sum(x["bw_bytes"] for x in done) / 1e6))\n'
    '    print(d + "_iops", "%.1f" % sum(x["iops"] for x in done))\n'
    '    mean = sum(x["clat_ns"]["mean"] * x["total_ios"] for x in done) / ios\n'
    '    print(d + "_clat_mean_us", "%.2f" % (mean / 1e3))\n'
    '    p99 = [x["clat_ns"].get("percentile", {}).get("99.000000") for x in done]\n'
    "    p99 = [p for p in p99 if p is not None]\n"
    "    if p99:\n"
    '        print(d + "_clat_p99_us", "%.2f" % (max(p99) / 1e3))\n'
)
# metric suffix: (unit, better, description)
FIGURES = {
    "bw_mbps": ("MB/s", "higher", "bandwidth, all jobs together"),
    "iops": ("IOPS", "higher", "I/O operations per second, all jobs together"),
    "clat_mean_us": ("us", "lower", "mean completion latency"),
    "clat_p99_us": ("us", "lower", "the worst job's 99th percentile completion latency"),
}


@dataclass(frozen=True)
class Job:
    """A job file as the testcase ships it."""

    file_name: str
    text: str  # rewritten to run on the testcase's disk
    directions: tuple[str, ...]  # what it reads, writes or trims, in DIRECTIONS' order
    disk_mib: int
    moved: tuple[str, ...]  # the target options the disk replaced ("filename=/dev/sdb")


def read_job(path: Path) -> Job:
    """The job file at `path`, checked and rewritten; UserError (one line) if it cannot be
    imported."""
    text = user_file.read_text(str(path), MAX_JOB_BYTES, "fio job", "give a fio job file")
    name = path.name if FILE_RE.fullmatch(path.name) else "job.fio"
    return parse(text, name, str(path))


def parse(text: str, file_name: str, where: str) -> Job:
    sections: dict[str, dict[str, str]] = {}
    out: list[str] = []
    current: dict[str, str] | None = None
    moved: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in ";#":
            out.append(line)
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            current = sections.setdefault(section, {})
            out.append(line)
            continue
        key, _, value = (part.strip() for part in stripped.partition("="))
        if key.startswith("include ") or key == "include":
            raise UserError(
                f"{where}:{n}: the job includes another file: paste it into the job file "
                "(an import copies one file)"
            )
        if current is None:
            raise UserError(f"{where}:{n}: an option before any [section]: not a fio job file")
        key = key.lower()
        if key in TARGETS:
            moved.append(f"{key}={value}")
            out.append(f"; kbisect: on the testcase's disk instead of {key}={value}")
            continue
        if key == "ioengine" and value.lower() in NETWORK_ENGINES:
            raise UserError(
                f"{where}:{n}: ioengine={value} needs a network, and a guest has none: "
                "use a local engine (psync, libaio, io_uring)"
            )
        current[key] = value
        out.append(line)
    jobs = [s for s in sections if s != "global"]
    if not jobs:
        raise UserError(f"{where}: no job section ([NAME] other than [global]): not a fio job")
    common = sections.get("global", {})
    directions = _directions([common | sections[s] for s in jobs])
    return Job(
        file_name,
        _on_the_disk(out, "global" in sections),
        directions,
        _disk_mib([common | sections[s] for s in jobs], where),
        tuple(moved),
    )


def _on_the_disk(lines: list[str], has_global: bool) -> str:
    """The job's lines with every job on the testcase's disk (the guest script exports
    KB_DEV; fio expands ${VAR} in job files)."""
    target = "filename=${KB_DEV}   ; kbisect: the testcase's scratch NVMe disk, a raw device"
    if not has_global:
        return "\n".join(["[global]", target, "", *lines]) + "\n"
    at = next(i for i, line in enumerate(lines) if line.strip().replace(" ", "") == "[global]")
    return "\n".join([*lines[: at + 1], target, *lines[at + 1 :]]) + "\n"


def _directions(jobs: list[dict[str, str]]) -> tuple[str, ...]:
    """What the jobs do; a value fio expands at run time (${VAR}) may be either."""
    done: set[str] = set()
    for job in jobs:
        rw = job.get("rw", job.get("readwrite", "read")).split(":")[0].strip().lower()
        done.update(RW.get(rw, ("read", "write")))
    return tuple(d for d in DIRECTIONS if d in done)


def _bytes(value: str) -> int | None:
    """A plain size (`512m`, `2g`, `4096`) in bytes, fio's base 1024; None for the rest
    (percentages, ranges, ${VAR})."""
    m = SIZE_RE.fullmatch(value.strip())
    if m is None:
        return None
    power = " kmgt".index((m.group(2) or " ").lower()[0])
    return int(m.group(1)) << (10 * power)


def _disk_mib(jobs: list[dict[str, str]], where: str) -> int:
    """A disk that holds the furthest byte any job reaches (offset, size, and numjobs apart
    by offset_increment) where the job file says plainly, else DEFAULT_DISK_MIB."""
    reach = 0
    for job in jobs:
        size = _bytes(job.get("size", "")) or _bytes(job.get("io_size", ""))
        if size is None:
            return DEFAULT_DISK_MIB  # the whole device, or a size fio works out later
        offset = _bytes(job.get("offset", "0")) or 0
        step = _bytes(job.get("offset_increment", "0")) or 0
        numjobs = int(job["numjobs"]) if job.get("numjobs", "").isdigit() else 1
        reach = max(reach, offset + size + step * max(numjobs - 1, 0))
    mib = max(MIN_DISK_MIB, math.ceil(reach / (1 << 20)) + SLACK_MIB)
    if mib > MAX_DISK_MIB:
        raise UserError(
            f"{where}: its jobs reach {mib} MiB, a testcase's disk is at most {MAX_DISK_MIB}: "
            "make size= smaller"
        )
    return mib
