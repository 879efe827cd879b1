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

The folder is shared by every user, root included, so nothing in it is trusted: it must be
the user's own or root's and sticky (infra/install.sh makes /run/lock/kbisect so, and a
tmpfiles.d line makes it again at boot); lock files open relative to it, never through a
link, and only a file made here is ever chmod'ed.
"""

import contextlib
import errno
import fcntl
import os
import pwd
import stat
import time
from collections.abc import Callable, Iterator, Sequence

from kbisect import settings
from kbisect.errors import InfraError, UserError

SHARED_FOLDER_MODE = 0o1777  # like /run/lock: anyone may add a lock, no one may swap another's
POLL = 0.5  # seconds between tries: waiting reports progress, so it can be cancelled
Progress = Callable[[str], None]


def parse_cpus(text: str, keep_one: bool = True) -> tuple[int, ...]:
    """'1', '2-3' or '1,3' -> the CPUs, checked against this host's; `keep_one`: one
    must stay out for builds (a worker's; a benchmark that builds nothing meanwhile may
    take them all)."""
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
    if keep_one and cpus == have:
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


def duet_halves(pinned: Sequence[int], guest_cpus: int) -> tuple[tuple[int, ...], ...]:
    """The reserved CPUs split for a duet, one half a guest (so the two share no core);
    a UserError when they cannot hold two guests of `guest_cpus` vCPUs."""
    half = len(pinned) // 2
    if half < guest_cpus:
        raise UserError(
            f"--duets needs a VM worker whose --measure-cpus hold two guests of {guest_cpus} "
            f"vCPUs ({2 * guest_cpus} CPUs); this one reserves {_text(pinned) or 'none'}: "
            "start it with a larger --measure-cpus, or submit the job without --duets"
        )
    return tuple(pinned[:half]), tuple(pinned[half : 2 * half])


def _text(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def folder_problem(owner: int, mode: int, me: int) -> str | None:
    """Why a lock folder with this owner and mode is unsafe for user `me`, or None.

    Trusted: the user's own folder, or root's when no one else can swap its files in
    (sticky like /run/lock, or not writable by others). Another user's folder is never
    trusted: its owner could plant a link that makes root open or chmod any file."""
    if not stat.S_ISDIR(mode):
        return "is not a folder"
    if owner == me:
        return None
    if owner != 0:
        return f"belongs to {_user(owner)}, who could swap its lock files"
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return "is writable by other users and not sticky"
    return None


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name}"
    except KeyError:
        return f"uid {uid}"


def _folder() -> int:
    """The host's lock folder, opened once and checked: locks are opened relative to it."""
    path = settings.Settings.from_env().locks
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        why = "is a symbolic link" if path.is_symlink() else f"cannot be opened: {exc.strerror}"
        raise InfraError(
            f"the host lock folder {path} {why}: set KBISECT_LOCK_DIR to a folder of yours"
        ) from exc
    st = os.fstat(fd)
    problem = folder_problem(st.st_uid, st.st_mode, os.getuid())
    if problem:
        os.close(fd)
        raise UserError(
            f"the host lock folder {path} {problem}: run infra/install.sh as root to make "
            "the shared one (root's, sticky), or set KBISECT_LOCK_DIR to a folder of yours"
        )
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != SHARED_FOLDER_MODE:
        os.fchmod(fd, SHARED_FOLDER_MODE)  # the fd, not the path: nothing to redirect it
    return fd


def _open(folder: int, name: str) -> int:
    """A lock file's fd: never through a link, never a FIFO, never chmod'ed unless just
    made here (flock needs only a readable fd, so others' files open read-only)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder)
            os.fchmod(fd, 0o644)  # the creator's umask must not lock other users out
        except FileExistsError:
            fd = os.open(name, flags, dir_fd=folder)
    except OSError as exc:
        why = "is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise InfraError(
            f"the host lock file {name} {why}: remove it from KBISECT_LOCK_DIR"
        ) from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InfraError(
            f"the host lock file {name} is not a file: remove it from KBISECT_LOCK_DIR"
        )
    return fd


def take(fd: int, how: int, progress: Progress, waiting: str) -> None:
    """flock `how` on fd, saying `waiting` (progress raises when the activity is
    cancelled) every POLL seconds until it is had."""
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            progress(waiting)  # raises when the activity is cancelled
            time.sleep(POLL)


@contextlib.contextmanager
def _held(name: str, exclusive: bool, progress: Progress, waiting: str) -> Iterator[None]:
    folder = _folder()
    try:
        gate = _open(folder, "turnstile.lock")
        try:
            lock = _open(folder, name)
        except BaseException:
            os.close(gate)
            raise
    finally:
        os.close(folder)
    try:
        take(gate, fcntl.LOCK_EX, progress, waiting)
        try:
            take(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, progress, waiting)
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
