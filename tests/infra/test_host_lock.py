"""The host lock: a timed guest runs alone; builds share; a waiting timing is not starved."""

import os
import stat
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from kbisect.errors import InfraError, UserError
from kbisect.infra import host_lock


@pytest.fixture(autouse=True)
def lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_LOCK_DIR", str(tmp_path / "locks"))
    return tmp_path / "locks"


class Timeline:
    """Threads that take a lock, hold it a while and log when they got it."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.mutex = threading.Lock()
        self.threads: list[threading.Thread] = []

    def log(self, text: str) -> None:
        with self.mutex:
            self.events.append(text)

    def hold(
        self, name: str, lock: Callable[[], AbstractContextManager[None]], seconds: float
    ) -> None:
        def run() -> None:
            with lock():
                self.log(f"{name} in")
                time.sleep(seconds)
                self.log(f"{name} out")

        t = threading.Thread(target=run)
        t.start()
        self.threads.append(t)
        time.sleep(0.2)  # the next one starts after this one has tried

    def join(self) -> list[str]:
        for t in self.threads:
            t.join(timeout=30)
        return self.events


def test_a_measurement_waits_for_a_build_and_a_build_for_a_measurement() -> None:
    t = Timeline()
    t.hold("build", host_lock.for_build, 1.0)
    t.hold("timing", lambda: host_lock.for_guest(True), 1.0)
    t.hold("build2", host_lock.for_build, 0.1)
    # The timing waited for the first build; the second build, arriving while the timing
    # waited, went after it (the turnstile), not beside the first build.
    assert t.join() == [
        "build in",
        "build out",
        "timing in",
        "timing out",
        "build2 in",
        "build2 out",
    ]


def test_builds_and_untimed_guests_share_the_host() -> None:
    t = Timeline()
    t.hold("build", host_lock.for_build, 1.0)
    t.hold("guest", lambda: host_lock.for_guest(False), 0.1)
    assert t.join()[:3] == ["build in", "guest in", "guest out"]


def test_two_timings_never_overlap() -> None:
    t = Timeline()
    t.hold("a", lambda: host_lock.for_guest(True), 0.6)
    t.hold("b", lambda: host_lock.for_guest(True), 0.1)
    assert t.join() == ["a in", "a out", "b in", "b out"]


def test_pinned_timings_take_their_cpus_only() -> None:
    t = Timeline()
    t.hold("pinned", lambda: host_lock.for_guest(True, (1,)), 1.0)
    t.hold("build", host_lock.for_build, 0.1)
    t.hold("same cpus", lambda: host_lock.for_guest(True, (1,)), 0.1)
    assert t.join() == [
        "pinned in",
        "build in",
        "build out",
        "pinned out",
        "same cpus in",
        "same cpus out",
    ]


def test_waiting_reports_progress_and_stops_when_told() -> None:
    seen: list[str] = []

    def progress(text: str) -> None:
        seen.append(text)
        raise InfraError("stopped")  # what a cancelled activity's progress does

    with host_lock.for_build():
        with pytest.raises(InfraError), host_lock.for_guest(True, progress=progress):
            pass
    assert seen and "waiting" in seen[0]
    with host_lock.for_guest(True):  # nothing was left held
        pass


def test_measure_cpus_are_checked() -> None:
    import os

    have = sorted(os.sched_getaffinity(0))
    for bad in ("x", "1-", "9999", ",".join(map(str, have))):
        with pytest.raises(UserError):
            host_lock.parse_cpus(bad)
    if len(have) > 1:
        assert host_lock.parse_cpus(str(have[-1])) == (have[-1],)
        assert host_lock.others((have[-1],)) == tuple(have[:-1])
    assert host_lock.taskset((1, 3)) == ["taskset", "--cpu-list", "1,3"]
    assert host_lock.taskset(()) == []
    # a benchmark that builds nothing meanwhile may take every CPU
    assert host_lock.parse_cpus(",".join(map(str, have)), keep_one=False) == tuple(have)


def test_a_duet_splits_the_reserved_cpus_into_halves_that_hold_a_guest_each() -> None:
    assert host_lock.duet_halves((2, 3, 4, 5), 2) == ((2, 3), (4, 5))
    assert host_lock.duet_halves((0, 1, 2), 1) == ((0,), (1,))  # the odd one stays idle
    for pinned in ((2, 3, 4), (), (1,)):
        with pytest.raises(UserError, match="--duets needs a VM worker whose --measure-cpus"):
            host_lock.duet_halves(pinned, 2)


# The lock folder is shared by every user on the host: nothing in it may be followed,
# chmod'ed or trusted when another user could have put it there.


def test_a_symlinked_lock_file_is_refused_and_its_target_left_alone(lock_dir: Path) -> None:
    lock_dir.mkdir(parents=True)
    victim = lock_dir.parent / "root-only"
    victim.write_text("secret\n")
    victim.chmod(0o600)
    (lock_dir / "turnstile.lock").symlink_to(victim)
    with pytest.raises(InfraError, match=r"turnstile\.lock"), host_lock.for_build():
        pass
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert victim.read_text() == "secret\n"


def test_an_existing_lock_file_is_never_chmodded(lock_dir: Path) -> None:
    lock_dir.mkdir(parents=True)
    for name in ("turnstile.lock", "cores.lock"):
        (lock_dir / name).touch(mode=0o600)
        (lock_dir / name).chmod(0o600)
    with host_lock.for_build():
        pass
    assert {
        stat.S_IMODE((lock_dir / n).stat().st_mode) for n in ("turnstile.lock", "cores.lock")
    } == {0o600}


def test_new_lock_files_are_readable_by_every_user_whatever_the_umask(lock_dir: Path) -> None:
    old = os.umask(0o077)
    try:
        with host_lock.for_build():
            pass
    finally:
        os.umask(old)
    assert stat.S_IMODE((lock_dir / "cores.lock").stat().st_mode) == 0o644


def test_a_fifo_in_place_of_a_lock_file_is_refused_not_waited_on(lock_dir: Path) -> None:
    lock_dir.mkdir(parents=True)
    os.mkfifo(lock_dir / "cores.lock")
    with pytest.raises(InfraError, match=r"cores\.lock"), host_lock.for_build():
        pass


@pytest.mark.parametrize(
    ("owner", "mode", "me", "ok"),
    [
        (1000, 0o700, 1000, True),  # the user's own folder
        (0, 0o1777, 1000, True),  # the shared one install.sh makes: root's, sticky
        (0, 0o755, 1000, True),  # root's, nobody else can write in it
        (0, 0o777, 1000, False),  # root's but anyone can swap its files
        (1000, 0o1777, 0, False),  # another user's: root must not trust it
        (1000, 0o1777, 1001, False),
    ],
)
def test_only_a_folder_no_other_user_controls_is_trusted(
    owner: int, mode: int, me: int, ok: bool
) -> None:
    problem = host_lock.folder_problem(owner, stat.S_IFDIR | mode, me)
    assert (problem is None) == ok


@pytest.mark.skipif(os.getuid() != 0, reason="chown to another user needs root")
def test_root_refuses_a_lock_folder_another_user_owns(lock_dir: Path) -> None:
    lock_dir.mkdir(parents=True, mode=0o1777)
    os.chown(lock_dir, 65534, 65534)
    with pytest.raises(UserError, match=r"install\.sh"), host_lock.for_build():
        pass
    assert list(lock_dir.iterdir()) == []


def test_a_symlinked_lock_folder_is_refused(lock_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    lock_dir.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InfraError, match="symbolic link"), host_lock.for_build():
        pass
