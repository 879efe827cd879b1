"""A timed guest has the host's cores to itself: no build or other guest runs meanwhile.

A reader-writer lock made of two flock files in one folder per host (every worker and
`kbisect try` on the host, whatever its cache, uses the same folder):
- a measurement (a testcase whose manifest says `exclusive`, the default) holds
  `cores.lock` exclusively;
- a build or an untimed guest holds it shared: they run together, never during one;
- everyone passes a turnstile (`turnstile.lock`) first, and a measurement keeps it while
  it waits: a stream of builds cannot starve it.

A worker started with `--measure-cpus LIST` pins its guests to those CPUs and its builds
to the others; its measurements then lock `cpus-LIST.lock` (one at a time on that set)
instead of the whole host. Every build on the host must keep off those CPUs, so give
every worker on the host the same `--measure-cpus`.

flock locks die with their process: a killed worker frees the host at once.
"""

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator, Sequence

from kbisect import settings
from kbisect.errors import InfraError, UserError

POLL = 0.5  # seconds between tries: waiting reports progress, so it can be cancelled
Progress = Callable[[str], None]


def parse_cpus(text: str) -> tuple[int, ...]:
    """'1', '2-3' or '1,3' -> the CPUs, checked against this host's."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, dash, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi if dash else lo) + 1))
    except ValueError as exc:
        raise UserError(f"--measure-cpus {text!r}: give CPUs as 1, 2-3 or 1,3") from exc
    have = os.sched_getaffinity(0)
    if not cpus or not cpus <= have:
        raise UserError(
            f"--measure-cpus {text!r}: this host has CPUs {_text(sorted(have))}; give some of them"
        )
    if cpus == have:
        raise UserError(
            f"--measure-cpus {text!r} leaves no CPU for builds: keep at least one out of it"
        )
    return tuple(sorted(cpus))


def others(cpus: Sequence[int]) -> tuple[int, ...]:
    """This host's CPUs outside `cpus` (where builds go)."""
    return tuple(sorted(os.sched_getaffinity(0) - set(cpus)))


def taskset(cpus: Sequence[int]) -> list[str]:
    """The argv prefix that runs a command on these CPUs only ([] for no pinning)."""
    return ["taskset", "--cpu-list", _text(cpus)] if cpus else []


def _text(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def _open(name: str) -> int:
    folder = settings.lock_dir()
    path = folder / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:  # another user's file: flock needs only a readable fd
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise InfraError(f"cannot open the host lock {path}: {exc}") from exc
    with contextlib.suppress(OSError):  # let other users' workers share it
        os.fchmod(fd, 0o666)
    return fd


def _take(fd: int, how: int, progress: Progress, waiting: str) -> None:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            progress(waiting)  # raises when the activity is cancelled
            time.sleep(POLL)


@contextlib.contextmanager
def _held(name: str, exclusive: bool, progress: Progress, waiting: str) -> Iterator[None]:
    gate, lock = _open("turnstile.lock"), _open(name)
    try:
        _take(gate, fcntl.LOCK_EX, progress, waiting)
        try:
            _take(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, progress, waiting)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        os.close(lock)
        os.close(gate)


def for_build(progress: Progress = lambda _: None) -> contextlib.AbstractContextManager[None]:
    """Held around a build: waits while a measurement runs on the host."""
    return _held("cores.lock", False, progress, "waiting: a measurement has the host")


def for_guest(
    exclusive: bool, pinned: Sequence[int] = (), progress: Progress = lambda _: None
) -> contextlib.AbstractContextManager[None]:
    """Held around a guest run: alone on the host (or on its reserved CPUs) when timed."""
    if exclusive and pinned:
        return _held(f"cpus-{_text(pinned)}.lock", True, progress, "waiting for the reserved CPUs")
    return _held(
        "cores.lock",
        exclusive,
        progress,
        "waiting: builds or a guest have the host" if exclusive else "waiting: a measurement runs",
    )
