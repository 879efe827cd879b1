"""The two backends the workers drive, as protocols: a second Machine (libvirt) or Builder
(prebuilt kernels) is one new class, chosen per worker.

Errors are the interface as much as the results: KernelBuildError (the tree does not
compile: skip the commit), InfraError (the host: retry), and for machines four outcomes
in GuestRun (success, testcase failed, panic, hang); anything else is InfraError.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kbisect.model import Artifact, BuildSpec, Disk, GuestImage, GuestRun

Progress = Callable[[str], None]


class Builder(Protocol):
    def build(self, repo: Path, commit: str, spec: BuildSpec, progress: Progress) -> Artifact: ...


class Machine(Protocol):
    name: str
    pin: tuple[int, ...]  # host CPUs its guests are pinned to; () = any
    cpus: int  # each guest's vCPUs
    host: str  # the machine its guests run on: a timing is judged against that host's level

    def run(
        self,
        artifact: Artifact,
        guest: GuestImage,
        disks: list[Disk],
        timeout: float,
        cmdline: str = "",
        progress: Progress = ...,
    ) -> GuestRun: ...
