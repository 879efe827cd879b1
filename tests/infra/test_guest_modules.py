"""The modules a testcase needs, from a kernel's modules folder: load order, built-ins,
missing ones, compressed files; and how the guest image carries them."""

import lzma
from pathlib import Path

import pytest

from kbisect.errors import InfraError, UserError
from kbisect.infra import guest_modules, initramfs
from kbisect.model import Direction
from kbisect.testcases.manifest import DiskSpec, Manifest, MetricSpec
from kbisect.testcases.runner import needed_modules


def _folder(tmp_path: Path) -> Path:
    """A modules folder shaped like Debian's cloud kernel's: nvme built in, dm modules."""
    root = tmp_path / "6.1.0-47-cloud-amd64"
    md = root / "kernel" / "drivers" / "md"
    md.mkdir(parents=True)
    (md / "dm-mod.ko").write_bytes(b"\x7fELF dm-mod")
    (md / "dm-bufio.ko").write_bytes(b"\x7fELF dm-bufio")
    (md / "dm-snapshot.ko.xz").write_bytes(lzma.compress(b"\x7fELF dm-snapshot"))
    (root / "extra").mkdir()
    (root / "extra" / "dm-mod.ko").write_bytes(b"out-of-tree copy: not preferred")
    (root / "modules.builtin").write_text("kernel/drivers/nvme/host/nvme.ko\n")
    return root


DEPENDS = {"dm_mod": [], "dm_bufio": [], "dm_snapshot": ["dm_mod", "dm_bufio"]}


def _depends(path: Path) -> list[str]:
    return DEPENDS[guest_modules._module_name(path) or ""]


def test_dependencies_load_first_and_built_ins_are_skipped(tmp_path: Path) -> None:
    mods = guest_modules.scan(_folder(tmp_path))
    assert mods.release == "6.1.0-47-cloud-amd64"
    assert "nvme" in mods.builtin
    order = guest_modules.load_order(mods, ["nvme", "dm-snapshot", "dm_mod"], "k", _depends)
    assert order == ["dm_mod", "dm_bufio", "dm_snapshot"]
    assert mods.files["dm_mod"].parent.name == "md"  # the tree's own before extra/


def test_a_module_the_kernel_lacks_is_one_line_naming_it(tmp_path: Path) -> None:
    mods = guest_modules.scan(_folder(tmp_path))
    with pytest.raises(UserError, match=r"kernel k has module 9p neither built in nor in"):
        guest_modules.load_order(mods, ["9p"], "k", _depends)
    DEPENDS["dm_bufio"] = ["dm_persistent_data"]
    try:
        with pytest.raises(UserError, match=r"dm_persistent_data \(needed by dm_bufio\)"):
            guest_modules.load_order(mods, ["dm_snapshot"], "k", _depends)
    finally:
        DEPENDS["dm_bufio"] = []


def test_a_dependency_loop_is_a_host_problem_not_a_hang(tmp_path: Path) -> None:
    mods = guest_modules.scan(_folder(tmp_path))
    DEPENDS["dm_mod"] = ["dm_snapshot"]
    try:
        with pytest.raises(InfraError, match="depends on itself"):
            guest_modules.load_order(mods, ["dm_snapshot"], "k", _depends)
    finally:
        DEPENDS["dm_mod"] = []


def test_files_are_decompressed_for_busybox_insmod(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    mods = guest_modules.scan(folder)
    assert guest_modules.module_bytes(mods.files["dm_snapshot"]) == b"\x7fELF dm-snapshot"


def test_the_guest_image_lists_the_modules_in_order(tmp_path: Path) -> None:
    mods = {"dm_mod": b"A", "dm_bufio": b"B", "dm_snapshot": b"C"}
    image = initramfs.build_image([], b"true\n", {}, modules=mods)
    assert image.modules == ("dm_mod", "dm_bufio", "dm_snapshot")
    data = Path(image.initramfs).read_bytes()
    assert b"kbisect/modules\x00" in data and b"dm_mod\ndm_bufio\ndm_snapshot\n" in data
    assert b"lib/modules/kbisect/dm_snapshot.ko\x00" in data
    plain = initramfs.build_image([], b"true\n", {})
    assert plain.initramfs != image.initramfs and plain.modules == ()


def _manifest(**kw: object) -> Manifest:
    base: dict[str, object] = {
        "name": "t",
        "description": "",
        "folder": Path("/nonexistent"),
        "primary": "m",
        "metrics": {"m": MetricSpec("m", "s", Direction.LOWER)},
        "disks": [],
        "tools": [],
        "config_fragment": "",
        "script": b"",
    }
    return Manifest(**(base | kw))  # type: ignore[arg-type]


def test_disks_and_the_host_userland_bring_their_own_modules() -> None:
    assert needed_modules(_manifest()) == []
    disks = [DiskSpec("a", 1)]
    assert needed_modules(_manifest(disks=disks, modules=["dm_mod", "nvme"])) == ["nvme", "dm_mod"]
    host = needed_modules(_manifest(userland="host"))
    assert host == ["virtio_pci", "9pnet_virtio", "9p", "overlay"]
