"""The kernel modules a testcase needs, found in a kernel's modules folder for its guest.

A distro kernel builds most drivers as modules (Debian's cloud kernel: NVMe built in, dm
and dm-snapshot as modules). The guest has no modprobe database to trust, so the host
works out the load order here (dependencies first, from each module's own `depends=`)
and ships the files, decompressed, in the guest image; the guest's init insmods them.
"""

import gzip
import lzma
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import CannotTestError, InfraError

MODULE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,55}$")
_SUFFIXES = (".ko", ".ko.xz", ".ko.gz", ".ko.zst")


def canonical(name: str) -> str:
    """Module names treat '-' and '_' alike (dm-snapshot.ko is dm_snapshot)."""
    return name.replace("-", "_")


def _module_name(path: Path) -> str | None:
    for suffix in _SUFFIXES:
        if path.name.endswith(suffix):
            return canonical(path.name[: -len(suffix)])
    return None


@dataclass(frozen=True)
class KernelModules:
    """What one kernel's modules folder offers."""

    release: str
    builtin: frozenset[str]
    files: dict[str, Path]  # module name -> its file


def scan(folder: Path) -> KernelModules:
    if not folder.is_dir():
        raise InfraError(f"kernel modules folder {folder} is gone")
    builtin_list = folder / "modules.builtin"
    builtin = frozenset(
        n
        for line in (builtin_list.read_text().split() if builtin_list.exists() else [])
        if (n := _module_name(Path(line)))
    )
    files: dict[str, Path] = {}
    # The tree's own modules first (kernel/), then extra/ and updates/ (out-of-tree).
    for path in sorted(
        folder.rglob("*.ko*"), key=lambda p: (p.parts[len(folder.parts)] != "kernel", p)
    ):
        name = _module_name(path)
        if name:
            files.setdefault(name, path)
    return KernelModules(release=folder.name, builtin=builtin, files=files)


def modinfo_depends(path: Path) -> list[str]:
    """The modules `path` needs loaded first, from its .modinfo section."""
    try:
        proc = subprocess.run(
            ["modinfo", "-F", "depends", "--", str(path)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except FileNotFoundError as exc:
        raise InfraError("modinfo is not installed: apt-get install kmod") from exc
    if proc.returncode != 0:
        raise InfraError(f"modinfo cannot read {path}: {proc.stderr.strip()[:200]}")
    return [canonical(d) for d in proc.stdout.strip().split(",") if d]


def load_order(
    mods: KernelModules,
    wanted: list[str],
    kernel: str,
    depends: Callable[[Path], list[str]] = modinfo_depends,
) -> list[str]:
    """The modules to insmod, dependencies first, for the wanted ones that are not built
    in. UserError naming the kernel when one is neither built in nor a module."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str, needed_by: str) -> None:
        if name in mods.builtin or name in order:
            return
        if name not in mods.files:
            why = f" (needed by {needed_by})" if needed_by else ""
            raise CannotTestError(
                f"kernel {kernel} has module {name}{why} neither built in nor in "
                f"{mods.release}'s modules: use a kernel or --config that has it"
            )
        if name in visiting:
            raise InfraError(f"module {name} depends on itself through {sorted(visiting)}")
        visiting.add(name)
        for dep in depends(mods.files[name]):
            visit(dep, name)
        visiting.discard(name)
        order.append(name)

    for name in wanted:
        visit(canonical(name), "")
    return order


def module_bytes(path: Path) -> bytes:
    """A module's file as insmod takes it: decompressed (busybox's insmod reads plain
    ELF; Debian 12 ships .ko, newer distros .ko.xz or .ko.zst)."""
    if path.name.endswith(".xz"):
        return lzma.decompress(path.read_bytes())
    if path.name.endswith(".gz"):
        return gzip.decompress(path.read_bytes())
    if path.name.endswith(".zst"):
        proc = subprocess.run(["zstd", "-dc", "--", str(path)], capture_output=True, check=False)
        if proc.returncode != 0:
            raise InfraError(f"cannot decompress {path}: apt-get install zstd")
        return proc.stdout
    return path.read_bytes()


def guest_files(mods: KernelModules, wanted: list[str], kernel: str) -> dict[str, bytes]:
    """Module name -> its decompressed file, in load order (dict order), for the guest."""
    return {name: module_bytes(mods.files[name]) for name in load_order(mods, wanted, kernel)}
