"""The Machine backends by name, as a worker or `kbisect try` is told to use them."""

from kbisect.backends import Machine
from kbisect.errors import UserError
from kbisect.infra.libvirt_machine import LibvirtConnection, LibvirtMachine, host_notes
from kbisect.infra.qemu import QemuMachine
from kbisect.settings import MACHINES, Settings


def make_machine(name: str, settings: Settings, pin: tuple[int, ...] = ()) -> Machine:
    """`name` is qemu or libvirt (settings.machine, KBISECT_MACHINE, is the usual one);
    `pin`: host CPUs reserved for guests. Cheap: nothing is started or connected."""
    machine: QemuMachine | LibvirtMachine
    if name == "qemu":
        machine = QemuMachine(accel=settings.accel, pin=pin)
    elif name == "libvirt":
        machine = LibvirtMachine(uri=settings.libvirt_uri, accel=settings.accel, pin=pin)
    else:
        raise UserError(f"unknown machine {name!r}: choose one of {', '.join(MACHINES)}")
    if settings.host_name:  # several VM workers on one machine, told apart
        machine.host = settings.host_name
    return machine


def check_machine(name: str, settings: Settings) -> list[str]:
    """Fail at a worker's start, not at its first boot, when the backend cannot work:
    InfraError saying what to install or start. Returns notes on what would slow it."""
    if name == "libvirt":
        LibvirtConnection(settings.libvirt_uri).close()
        return host_notes()
    return []
