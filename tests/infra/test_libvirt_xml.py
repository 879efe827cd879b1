"""The libvirt domain XML, compared with golden files: both libvirt version paths."""

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kbisect.errors import InfraError
from kbisect.infra.libvirt_xml import QEMU_NS, DomainSpec, domain_xml
from kbisect.infra.qemu import PROFILES, USERLAND_SERIAL, QemuMachine
from kbisect.model import Artifact, Disk, GuestImage

GOLDEN = Path(__file__).parent / "golden"
RUN = Path("/cache/runs/20260101-000000-0123abcd")
DISKS = (
    (Disk("origin", 256, PROFILES["ebs-gp2"]), RUN / "origin.img"),
    (Disk("cow", 64, PROFILES["fast"]), RUN / "cow.img"),
)


def _spec(**kw: object) -> DomainSpec:
    base: dict[str, object] = {
        "name": f"kbisect-{RUN.name}",
        "kernel": "/cache/artifacts/abc/bzImage",
        "initrd": "/cache/guest/initramfs-1.cpio",
        "cmdline": "kbisect.runs=3",
        "accel": "tcg",
        "memory_mib": 1024,
        "cpus": 2,
        "run_dir": RUN,
        "disks": DISKS,
        "host_root": True,
        "pin": (1,),
        "owner": (0, 0),
    }
    base.update(kw)
    return DomainSpec(**base)  # type: ignore[arg-type]


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KBISECT_RECORD_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), f"differs from {path} (KBISECT_RECORD_GOLDEN=1 rewrites)"


def test_libvirt_9_passes_nvme_through_the_qemu_namespace() -> None:
    _golden("libvirt-9.0.xml", domain_xml(_spec(libvirt_version=9_000_000)))


def test_libvirt_11_5_has_an_nvme_bus_with_iotune() -> None:
    _golden("libvirt-11.5.xml", domain_xml(_spec(libvirt_version=11_005_000, owner=None)))


def test_the_cmdline_is_the_direct_qemu_one() -> None:
    argv = QemuMachine()._argv(
        RUN, "tcg", Artifact("c", "t", "h", "/k", "/c", "/l"), GuestImage("/i", ()), "x=1"
    )
    dom = ET.fromstring(domain_xml(_spec(cmdline="x=1")))
    assert dom.findtext("os/cmdline") == argv[argv.index("-append") + 1]


def test_plain_guest_kvm_no_pin_no_disks() -> None:
    dom = ET.fromstring(
        domain_xml(_spec(accel="kvm", disks=(), host_root=False, pin=(), owner=None))
    )
    assert dom.get("type") == "kvm" and dom.find("cpu").get("mode") == "host-passthrough"  # type: ignore[union-attr]
    assert dom.find("cputune") is None and dom.find("seclabel") is None
    assert dom.find("devices/filesystem") is None
    assert dom.find(f"{{{QEMU_NS}}}commandline") is None
    # Every way the guest ends destroys the domain: panic=-1 ends the run.
    assert [dom.findtext(e) for e in ("on_poweroff", "on_reboot", "on_crash")] == ["destroy"] * 3
    ports = [
        (s.find("source").get("path"), s.find("target").get("port")) for s in dom.iter("serial")
    ]  # type: ignore[union-attr]
    assert ports == [(f"{RUN}/console.log", "0"), (f"{RUN}/results.log", "1")]


def test_pinning_covers_every_vcpu_and_the_emulator() -> None:
    dom = ET.fromstring(domain_xml(_spec(cpus=3, pin=(2, 3))))
    pins = [(p.get("vcpu"), p.get("cpuset")) for p in dom.iter("vcpupin")]
    assert pins == [("0", "2,3"), ("1", "2,3"), ("2", "2,3")]
    assert dom.find("cputune/emulatorpin").get("cpuset") == "2,3"  # type: ignore[union-attr]


def test_the_host_root_is_read_only_9p_with_the_kbhost_tag() -> None:
    fs = ET.fromstring(domain_xml(_spec())).find("devices/filesystem")
    assert fs is not None and fs.get("multidevs") == "remap" and fs.get("accessmode") == "squash"
    assert fs.find("source").get("dir") == "/" and fs.find("target").get("dir") == "kbhost"  # type: ignore[union-attr]
    assert fs.find("readonly") is not None


@pytest.mark.parametrize(
    "field",
    [
        {"kernel": "/a,b/bzImage"},  # a comma would split a QEMU option
        {"initrd": "/a/init\nrd"},  # XML turns a newline in an attribute into a space
        {"kernel": "relative/bzImage"},
        {"run_dir": Path("/tmp/x\x00y")},
        {"disks": ((Disk("d", 1, PROFILES["fast"]), Path("/r/d,file=/etc/shadow")),)},
    ],
)
def test_paths_that_would_break_are_refused(field: dict[str, object]) -> None:
    with pytest.raises(InfraError, match=r"refused|absolute"):
        domain_xml(_spec(**field))


def test_markup_in_the_cmdline_stays_text() -> None:
    dom = ET.fromstring(domain_xml(_spec(cmdline="a='<x>' & b")))
    assert dom.findtext("os/cmdline", "").endswith("a='<x>' & b")


def test_a_userland_image_is_a_read_only_virtio_disk_with_its_serial_not_9p() -> None:
    xml = domain_xml(_spec(userland_image="/c/images/u.squashfs"))
    devices = ET.fromstring(xml).find("devices")
    assert devices is not None and devices.find("filesystem") is None
    [disk] = [d for d in devices.findall("disk") if d.find("target").get("bus") == "virtio"]  # type: ignore[union-attr]
    assert disk.find("source").get("file") == "/c/images/u.squashfs"  # type: ignore[union-attr]
    assert disk.find("readonly") is not None and disk.findtext("serial") == USERLAND_SERIAL
