"""A real, bounded drift of the host: a background CPU load whose duty cycle ramps linearly
from 0 to a peak share of one core over a ramp time, then holds.

The load is one process, so it never takes more than one core, and it runs at the guests'
own priority: a niced one (nice 10) took nothing measurable from a 2-vCPU guest here
(docs/measurements.md, "Real noisy labs"). It ends itself after a hard limit or as soon as
the process that started it is gone. `load()` starts it for the length of a `with` block
and stops it by its own process id. By hand:
    .venv/bin/python -m benchmarks.host_drift --peak 0.5 --ramp 300 --limit 10800
"""

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PERIOD = 0.1  # seconds a busy-then-idle cycle: short enough to look like a steady share
PEAK = 0.5  # share of one core at the top
RAMP = 300.0  # seconds to reach it: about one slowdown:25 job here, so its level moves through it
LIMIT = 3 * 3600.0  # seconds before it ends itself, whatever happens to its parent
ROOT = Path(__file__).resolve().parent.parent  # where `-m benchmarks.host_drift` resolves


def duty(elapsed: float, peak: float, ramp: float) -> float:
    """The share of one core to take `elapsed` seconds in: 0 rising to `peak` at `ramp`."""
    if ramp <= 0:
        return peak
    return peak * min(1.0, max(0.0, elapsed / ramp))


@contextmanager
def load(
    peak: float, ramp: float, limit: float = LIMIT, grace: float = 5.0, delay: float = 0.0
) -> Iterator[int]:
    """Run the load for the `with` block (idle its first `delay` seconds); yields its
    process id."""
    if not 0 < peak <= 1:
        raise ValueError(f"peak {peak} is not a share of one core in (0, 1]")
    argv = [sys.executable, "-m", "benchmarks.host_drift", "--peak", str(peak)]
    argv += ["--ramp", str(ramp), "--limit", str(limit), "--parent", str(os.getpid())]
    argv += ["--delay", str(delay)]
    # Its own session: a Ctrl-C on the benchmark reaches us, and we stop it in `finally`.
    proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True)
    try:
        yield proc.pid
    finally:
        stop(proc, grace)


def stop(proc: "subprocess.Popen[bytes]", grace: float) -> None:
    """Terminate `proc`, kill it if it is still there after `grace` seconds, and reap it."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run(peak: float, ramp: float, limit: float, parent: int, delay: float = 0.0) -> None:
    """Idle `delay` seconds, then busy for duty() of each period and idle for the rest,
    until the limit or an orphaning."""
    start = time.monotonic() + delay
    while time.monotonic() < start and os.getppid() == parent:
        time.sleep(min(PERIOD, max(0.0, start - time.monotonic())))
    while (now := time.monotonic()) - start < limit and os.getppid() == parent:
        busy_until = now + PERIOD * duty(now - start, peak, ramp)
        while time.monotonic() < busy_until:
            pass
        time.sleep(max(0.0, now + PERIOD - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--peak", type=float, default=PEAK, help=f"share of one core at the top ({PEAK})"
    )
    p.add_argument("--ramp", type=float, default=RAMP, help=f"seconds to reach it ({RAMP:g})")
    p.add_argument("--limit", type=float, default=LIMIT, help=f"seconds before it ends ({LIMIT:g})")
    p.add_argument("--parent", type=int, default=os.getppid(), help="end when this pid is gone")
    p.add_argument("--delay", type=float, default=0.0, help="seconds idle before the load (0)")
    args = p.parse_args(argv)
    run(min(1.0, max(0.0, args.peak)), args.ramp, args.limit, args.parent, args.delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())
