"""Processes on this host, read from /proc: which one a pid is (its start time, so a reused
pid is never taken for it), the boot they run in, their descendants, and a stop that
escalates. The service's pid file, libvirt's domain owners and the dev server use these."""

import subprocess
from pathlib import Path


def start_time(pid: int) -> int | None:
    """The process's start time (/proc/PID/stat field 22, clock ticks after boot); None
    when it is gone or a zombie (exited, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after it.
    fields = stat.rsplit(")", 1)[1].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def boot_id() -> str:
    """This boot's id ('' where /proc does not say): start times count from it."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_tree(pid: int) -> list[int]:
    """The process and all its descendants."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            found += process_tree(int(kid))
    return found


def stop(proc: "subprocess.Popen[bytes]", grace: float = 30) -> None:
    """SIGTERM, and SIGKILL if it has not exited within `grace` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
