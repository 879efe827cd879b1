"""Child processes that die with the worker: no make or QEMU outlives a killed worker."""

import contextlib
import ctypes
import os
import signal
import subprocess

PR_SET_PDEATHSIG = 1
# Resolved once in the parent: loading a library between fork and exec in a threaded
# process can deadlock on the loader's lock.
_prctl = ctypes.CDLL(None, use_errno=True).prctl


def die_with_parent() -> None:
    """A `preexec_fn`: the kernel sends SIGKILL to the child when the thread that started
    it exits, so a worker killed with SIGKILL leaves no orphan writing a build slot. The
    thread that starts the child must wait for it (ours do)."""
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def kill_group(proc: "subprocess.Popen[bytes]") -> None:
    """SIGKILL to a child started with process_group=0 and all it started (a guest's
    QEMU, a peer's client), gone already or not."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
