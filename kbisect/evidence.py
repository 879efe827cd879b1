"""Where a boot's and a build's evidence is kept, as a job names it: a path relative to
the cache of the host that made it (`runs/NAME`, `artifacts/ENTRY/build.log`), never a
host's whole path. The results pages serve these from their own cache, and nothing else.

Workflow code imports this: no I/O."""

import re
from collections.abc import Sequence

from kbisect.contract import GC_DAYS
from kbisect.workflows.bisect_types import Step

RUNS = "runs"  # the cache's folder of run folders (infra.qemu.new_run_dir makes them)
RUN_NAME = re.compile(r"(\d{8}-\d{6})-[0-9a-f]{8}")  # a run folder: when, and a random part
RUN_FILES = ("console.log", "results.log")  # what a reader sees of a run folder
_RUN = re.compile(f"{RUNS}/{RUN_NAME.pattern}")
_BUILD_LOG = re.compile(r"artifacts/[0-9a-f]+-[0-9a-f]+/build\.log")  # artifact_cache's


def run_folder(console: str) -> str:
    """'runs/NAME' of a boot's console path ("" when it is none)."""
    name = "/".join(console.split("/")[-3:-1])
    return name if is_run(name) else ""


def build_log_of(path: str) -> str:
    """'artifacts/ENTRY/build.log' of a build's log path ("" when it is none)."""
    name = "/".join(path.split("/")[-3:])
    return name if is_build_log(name) else ""


def is_run(name: str) -> bool:
    return bool(_RUN.fullmatch(name))


def is_build_log(name: str) -> bool:
    return bool(_BUILD_LOG.fullmatch(name))


def files_of(steps: Sequence[Step]) -> set[str]:
    """Every file the steps name: each boot's console and result file, each build log."""
    runs = {r for s in steps for r in (*s.runs, s.failed_run) if is_run(r)}
    logs = {s.build_log for s in steps if is_build_log(s.build_log)}
    return {f"{r}/{name}" for r in runs for name in RUN_FILES} | logs


def gone(path: str) -> str:
    """Why a file a job names is not in this host's cache."""
    return (
        f"{path} is not in this host's cache: kbisect gc prunes runs and kernels after "
        f"{GC_DAYS:g} days, and on a farm a boot's files stay on the VM host that ran it "
        "(its step names it)"
    )
