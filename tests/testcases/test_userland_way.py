"""How a host-userland guest reaches the host's userland, read from a kernel's config and
its modules folder: 9p where it has it, the squashfs image where it has only that (Debian's
6.12 cloud kernels), a clear error where it has neither."""

from dataclasses import replace
from pathlib import Path

import pytest

from kbisect.errors import UserError
from kbisect.model import PREBUILT_TAG, Artifact
from kbisect.testcases.manifest import Manifest
from kbisect.testcases.runner import needed_modules
from kbisect.testcases.userland_way import Way, choose, modules_for

NINE_P = "CONFIG_VIRTIO_PCI=y\nCONFIG_NET_9P_VIRTIO=y\nCONFIG_9P_FS=y\nCONFIG_OVERLAY_FS=y\n"
IMAGE_AS_MODULES = (
    "CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_BLK=m\nCONFIG_SQUASHFS=m\nCONFIG_OVERLAY_FS=m\n"
    "# CONFIG_9P_FS is not set\n"
)


def _kernel(tmp_path: Path, config: str | None, modules: list[str] | None = None) -> Artifact:
    conf = tmp_path / "config"
    if config is not None:
        conf.write_text(config)
    folder = ""
    if modules is not None:
        root = tmp_path / "6.12.117+deb12-cloud-amd64"
        (root / "kernel").mkdir(parents=True)
        for name in modules:
            (root / "kernel" / f"{name}.ko").write_bytes(b"\x7fELF")
        (root / "modules.builtin").write_text("")
        folder = str(root)
    return Artifact("k" * 40, "t", "h", "/k", str(conf) if config is not None else "", "/l",
                    modules=folder)  # fmt: skip


def test_a_kernel_with_9p_keeps_9p(tmp_path: Path) -> None:
    both = NINE_P + "CONFIG_VIRTIO_BLK=y\nCONFIG_SQUASHFS=y\n"
    assert choose(_kernel(tmp_path, both)) == Way.NINE_P


def test_a_kernel_without_9p_but_with_squashfs_and_virtio_blk_gets_the_image(
    tmp_path: Path,
) -> None:
    kernel = _kernel(tmp_path, IMAGE_AS_MODULES, ["virtio_blk", "squashfs", "overlay"])
    assert choose(kernel) == Way.IMAGE
    host = Manifest.__new__(Manifest)
    object.__setattr__(host, "userland", "host")
    object.__setattr__(host, "disks", [])
    object.__setattr__(host, "modules", [])
    assert needed_modules(host, Way.IMAGE) == list(modules_for(Way.IMAGE))
    assert needed_modules(host, Way.IMAGE)[:2] == ["virtio_pci", "virtio_blk"]


def test_a_module_the_config_names_but_the_folder_lacks_is_missing(tmp_path: Path) -> None:
    """=m with no file: the guest could not load it, so the way is not there."""
    kernel = _kernel(tmp_path, IMAGE_AS_MODULES, ["virtio_blk", "overlay"])  # no squashfs.ko
    with pytest.raises(UserError, match="cannot reach the host userland"):
        choose(kernel)


def test_a_kernel_with_neither_says_what_it_needs(tmp_path: Path) -> None:
    with pytest.raises(UserError) as err:
        choose(_kernel(tmp_path, "CONFIG_VIRTIO_PCI=y\nCONFIG_OVERLAY_FS=y\n"))
    text = str(err.value)
    assert "CONFIG_9P_FS" in text and "CONFIG_SQUASHFS" in text and "--config" in text
    assert "\n" not in text


def test_a_prebuilt_kernel_is_named_by_its_release_not_its_list_commit(tmp_path: Path) -> None:
    kernel = _kernel(tmp_path, IMAGE_AS_MODULES, ["virtio_blk"])
    assert kernel.label == "k" * 40  # built from source: its commit
    listed = replace(kernel, config_hash=f"{PREBUILT_TAG}-0123")  # a kernel list's commit
    with pytest.raises(UserError, match=r"^kernel 6\.12\.117\+deb12-cloud-amd64 cannot reach"):
        choose(listed)


def test_a_bare_image_with_nothing_known_is_tried_over_9p_as_before(tmp_path: Path) -> None:
    assert choose(_kernel(tmp_path, None)) == Way.NINE_P
