"""The libvirt domain of one guest run, built from plain data: no I/O, no libvirt import.

It boots like QemuMachine's argv: q35, direct kernel and initrd, the same command line,
ttyS0 to the console file and ttyS1 to the result channel file, every way the guest ends
(power off, reboot, crash) destroys the domain, so panic=-1 ends the run as -no-reboot
does. NVMe disks keep their serials and throttling: libvirt before 11.5 has no emulated
NVMe bus, so there they go to QEMU through the qemu namespace (<qemu:commandline>).
"""

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import InfraError
from kbisect.infra.qemu import HOST_ROOT_TAG, USERLAND_SERIAL, guest_cmdline, nvme_args
from kbisect.model import Disk

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
# libvirt's version number is major * 1,000,000 + minor * 1,000 + release.
NVME_BUS_VERSION = 11_005_000

ET.register_namespace("qemu", QEMU_NS)


@dataclass(frozen=True)
class DomainSpec:
    name: str
    kernel: str
    initrd: str
    cmdline: str  # the testcase's part; guest_cmdline() adds the console and panic knobs
    accel: str  # kvm or tcg
    memory_mib: int
    cpus: int
    run_dir: Path  # console.log and results.log go here
    disks: tuple[tuple[Disk, Path], ...] = ()  # each disk with its image
    host_root: bool = False  # the host's / read-only over virtio-9p, tag "kbhost"
    userland_image: str = ""  # or, with host_root, this image on a read-only virtio disk
    pin: tuple[int, ...] = ()  # host CPUs for the vCPUs and QEMU's own threads
    # uid, gid QEMU runs as, with no relabelling of our files: a system daemon would run
    # it as libvirt-qemu, which cannot read a private cache. None: the daemon's default.
    owner: tuple[int, int] | None = None
    libvirt_version: int = 9_000_000


def _path(path: str | Path) -> str:
    """An absolute path with nothing that libvirt, XML or QEMU options could split or
    reinterpret: control characters (XML turns a newline in an attribute into a space)
    and commas (QEMU's option separator, for the passthrough args)."""
    text = str(path)
    if not text.startswith("/"):
        raise InfraError(f"path {text!r} is not absolute, as libvirt needs")
    if "," in text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise InfraError(f"path {text!r} has a comma or a control character: refused")
    return text


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def _os(dom: ET.Element, spec: DomainSpec) -> None:
    os_el = _sub(dom, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="q35")
    _sub(os_el, "kernel", _path(spec.kernel))
    _sub(os_el, "initrd", _path(spec.initrd))
    _sub(os_el, "cmdline", guest_cmdline(spec.cmdline))


def _cputune(dom: ET.Element, spec: DomainSpec) -> None:
    if not spec.pin:
        return
    cpuset = ",".join(str(c) for c in spec.pin)
    tune = _sub(dom, "cputune")
    for vcpu in range(spec.cpus):
        _sub(tune, "vcpupin", vcpu=str(vcpu), cpuset=cpuset)
    _sub(tune, "emulatorpin", cpuset=cpuset)


def _serial(devices: ET.Element, path: Path, port: int) -> None:
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=_path(path))
    _sub(serial, "target", port=str(port))


def _host_root(devices: ET.Element) -> None:
    # accessmode squash is QEMU's security_model=none, as QemuMachine's -fsdev.
    fs = _sub(devices, "filesystem", type="mount", accessmode="squash", multidevs="remap")
    _sub(fs, "source", dir="/")
    _sub(fs, "target", dir=HOST_ROOT_TAG)
    _sub(fs, "readonly")


def _userland_disk(devices: ET.Element, image: str) -> None:
    el = _sub(devices, "disk", type="file", device="disk")
    _sub(el, "driver", name="qemu", type="raw")
    _sub(el, "source", file=_path(image))
    _sub(el, "target", dev="vdz", bus="virtio")
    _sub(el, "readonly")
    _sub(el, "serial", USERLAND_SERIAL)


def _nvme_bus_disk(devices: ET.Element, index: int, disk: Disk, image: Path) -> None:
    """libvirt 11.5+: a controller of its own per disk, so the serial the guest looks
    disks up by (/sys/block/nvme*/device/serial) is the controller's, as with QEMU."""
    controller = _sub(devices, "controller", type="nvme", index=str(index))
    _sub(controller, "serial", disk.serial)
    el = _sub(devices, "disk", type="file", device="disk")
    _sub(el, "driver", name="qemu", type="raw", cache="none", io="threads")
    _sub(el, "source", file=_path(image))
    _sub(el, "target", dev=f"nvme{index}n1", bus="nvme")
    _sub(el, "address", type="drive", controller=str(index), bus="0", target="0", unit="0")
    if disk.profile.iops or disk.profile.bps:
        iotune = _sub(el, "iotune")
        if disk.profile.iops:
            _sub(iotune, "total_iops_sec", str(disk.profile.iops))
        if disk.profile.bps:
            _sub(iotune, "total_bytes_sec", str(disk.profile.bps))


def _passthrough_nvme(disk: Disk, image: Path) -> list[str]:
    """QemuMachine's -drive, and its NVMe device in JSON: QEMU creates every -device in
    the older key=value form before the JSON ones libvirt writes, so a key=value nvme
    would take a PCI slot libvirt gave one of its own devices (seen: slot 1, the root
    port of the host root's 9p device)."""
    drive = nvme_args(disk, image)[:2]
    device = {"driver": "nvme", "serial": disk.serial, "drive": disk.name}
    return [*drive, "-device", json.dumps(device, separators=(",", ":"))]


def domain_xml(spec: DomainSpec) -> str:
    passthrough = spec.libvirt_version < NVME_BUS_VERSION and bool(spec.disks)
    dom = ET.Element("domain", {"type": "kvm" if spec.accel == "kvm" else "qemu"})
    _sub(dom, "name", spec.name)
    _sub(dom, "memory", str(spec.memory_mib), unit="MiB")
    _sub(dom, "vcpu", str(spec.cpus), placement="static")
    _cputune(dom, spec)
    _os(dom, spec)
    features = _sub(dom, "features")
    _sub(features, "acpi")
    # -cpu host under KVM, -cpu max under TCG, as QemuMachine.
    _sub(dom, "cpu", mode="host-passthrough" if spec.accel == "kvm" else "maximum")
    _sub(dom, "clock", offset="utc")
    for event in ("on_poweroff", "on_reboot", "on_crash"):
        _sub(dom, event, "destroy")
    devices = _sub(dom, "devices")
    _serial(devices, spec.run_dir / "console.log", 0)
    _serial(devices, spec.run_dir / "results.log", 1)
    if spec.host_root and spec.userland_image:
        _userland_disk(devices, spec.userland_image)
    elif spec.host_root:
        _host_root(devices)
    if not passthrough:
        for index, (disk, image) in enumerate(spec.disks):
            _nvme_bus_disk(devices, index, disk, image)
    # -nodefaults as QemuMachine: no USB controller, balloon, NIC or display.
    _sub(devices, "controller", type="usb", model="none")
    _sub(devices, "memballoon", model="none")
    if spec.owner is not None:
        seclabel = _sub(dom, "seclabel", type="static", model="dac", relabel="no")
        _sub(seclabel, "label", f"+{spec.owner[0]}:+{spec.owner[1]}")
    if passthrough:
        commandline = _sub(dom, f"{{{QEMU_NS}}}commandline")
        for disk, image in spec.disks:
            _path(image)
            for arg in _passthrough_nvme(disk, image):
                _sub(commandline, f"{{{QEMU_NS}}}arg", value=arg)
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode") + "\n"
