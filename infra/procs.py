"""Child processes that die with the worker: no make or QEMU outlives a killed worker."""

import ctypes
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """A `preexec_fn`: the kernel sends SIGKILL to the child when the thread that started
    it exits, so a worker killed with SIGKILL leaves no orphan writing a build slot."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
