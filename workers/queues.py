"""Task-queue names; each can be set so build hosts and VM hosts are different machines."""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Queues:
    control: str  # workflows (cheap: decisions only)
    build: str  # kernel builds and git (needs the repository, make, ccache)
    vm: str  # QEMU runs (needs qemu and the built artifacts)

    @classmethod
    def from_env(cls) -> "Queues":
        return cls(
            control=os.environ.get("KBISECT_CONTROL_QUEUE", "kbisect"),
            build=os.environ.get("KBISECT_BUILD_QUEUE", "kbisect-build"),
            vm=os.environ.get("KBISECT_VM_QUEUE", "kbisect-vm"),
        )
