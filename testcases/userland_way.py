"""How a host-userland guest reaches the host's userland on a given kernel: the host's root
over virtio-9p where the kernel has 9p (every kernel kbisect builds: its fragment turns it
on), else the squashfs image of the host's packages on a virtio disk (Debian's 6.12 cloud
kernels ship no 9p modules, but squashfs, virtio_blk and overlay). Read from the kernel's
config and its modules folder, never by booting it.
"""

import re
from enum import StrEnum
from pathlib import Path

from kbisect.errors import CannotTestError
from kbisect.infra import guest_modules as modules
from kbisect.model import Artifact


class Way(StrEnum):
    NINE_P = "9p"
    IMAGE = "squashfs"


# Each way's (config option, module) pairs, in load order: the virtio transport first,
# the overlay in memory last.
PCI, OVERLAY = ("CONFIG_VIRTIO_PCI", "virtio_pci"), ("CONFIG_OVERLAY_FS", "overlay")
NEEDS = {
    Way.NINE_P: (PCI, ("CONFIG_NET_9P_VIRTIO", "9pnet_virtio"), ("CONFIG_9P_FS", "9p"), OVERLAY),
    Way.IMAGE: (PCI, ("CONFIG_VIRTIO_BLK", "virtio_blk"), ("CONFIG_SQUASHFS", "squashfs"), OVERLAY),
}
_OPTION = re.compile(r"^(CONFIG_[A-Z0-9_]+)=([ym])$", re.M)


def modules_for(way: Way) -> tuple[str, ...]:
    """What the guest loads for the way, where the kernel has it as a module."""
    return tuple(module for _, module in NEEDS[way])


def _config(artifact: Artifact) -> dict[str, str] | None:
    """The kernel's options that are on (y or m), or None when its config is unknown."""
    path = Path(artifact.config) if artifact.config else None
    text = path.read_text(errors="replace") if path and path.is_file() else ""
    found = dict(_OPTION.findall(text))
    return found or None


def _has(way: Way, config: dict[str, str] | None, mods: modules.KernelModules | None) -> bool:
    if config is None and mods is None:
        return way == Way.NINE_P  # a bare image, nothing known of it: as before, 9p
    for option, module in NEEDS[way]:
        built_in = config is not None and config.get(option) == "y"
        in_folder = mods is not None and (module in mods.files or module in mods.builtin)
        if not (built_in or in_folder):
            return False
    return True


def choose(artifact: Artifact, mods: modules.KernelModules | None = None) -> Way:
    """9p where the kernel has it, else the image; CannotTestError when it has neither.
    `mods`: the kernel's modules folder as the caller scanned it (else scanned here)."""
    config = _config(artifact)
    if mods is None and artifact.modules:
        mods = modules.scan(Path(artifact.modules))
    for way in (Way.NINE_P, Way.IMAGE):
        if _has(way, config, mods):
            return way
    wants = "; ".join(
        f"{way.value}: {', '.join(option for option, _ in NEEDS[way])}" for way in Way
    )
    raise CannotTestError(
        f"kernel {artifact.label} cannot reach the host userland (it needs {wants}): "
        "use a kernel or --config with one of them, or a testcase with userland = 'initramfs'"
    )
