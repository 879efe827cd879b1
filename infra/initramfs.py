"""Guest image: an initramfs with busybox, the testcase's tools and their libraries.

Everything comes from the host's Debian packages; the image is a newc cpio written here
(deterministic: fixed mtimes and owners) and cached by the hash of what went in.
"""

import hashlib
import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kbisect import settings
from kbisect.errors import InfraError
from kbisect.infra import atomic_write
from kbisect.infra.qemu import USERLAND_SERIAL
from kbisect.model import GuestImage

BUSYBOX = Path("/bin/busybox")
TOOL_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Debian package that provides each tool, for the error message.
TOOL_PACKAGES = {"busybox": "busybox-static", "dmsetup": "dmsetup", "fio": "fio"}
MODULES_DIR = "lib/modules/kbisect"  # the testcase's modules, whatever the kernel's release
# Boots of other kinds than a scored one: the marker file in /kbisect/ that init reads
BOOT_TRACE, BOOT_EXPLAIN = "trace", "explain"
_LDD_PATH = re.compile(r"(/\S+) \(0x[0-9a-f]+\)")
# Folders every image has, whatever goes into it (init mounts over the first five)
GUEST_DIRS = ("dev", "proc", "sys", "tmp", "run", "usr/sbin", "lib", "lib64")
# The guest's own files in an image: path in the image -> kbisect's file beside this one
GUEST_FILES = {"init": "guest_init.sh", "kbisect/lib.sh": "guest_lib.sh"}


@dataclass(frozen=True)
class _Entry:
    mode: int
    data: bytes = b""  # file contents, or the symlink target


def find_tool(name: str) -> Path:
    if "/" in name:
        raise InfraError(f"tool {name!r} must be a bare command name")
    for d in TOOL_DIRS:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    pkg = TOOL_PACKAGES.get(name, name)
    raise InfraError(f"guest tool {name!r} is not on this host: apt-get install {pkg}")


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries binary loads, per ldd (empty for static binaries)."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return []  # "not a dynamic executable"
    libs = []
    for line in proc.stdout.splitlines():
        if "not found" in line:
            raise InfraError(f"{binary} needs a library the host lacks: {line.strip()}")
        m = _LDD_PATH.search(line)
        if m:
            libs.append(Path(m.group(1)))
    return libs


def guest_file(name: str) -> bytes:
    return (Path(__file__).parent / name).read_bytes()


def _tree(
    tools: list[str],
    testcase_script: bytes,
    params: bytes,
    host_root: bool,
    extra: dict[str, bytes],
    mode: str = "",
    modules: dict[str, bytes] | None = None,
    userland_image: str = "",
) -> dict[str, _Entry]:
    """Path in the guest -> entry; directories are implied. With the host's root the
    tools run from there: they are only checked to be installed."""
    if not BUSYBOX.exists():
        raise InfraError("busybox is not installed: apt-get install busybox-static")
    files: dict[str, _Entry] = {
        "bin/busybox": _Entry(0o100755, BUSYBOX.read_bytes()),
        "init": _Entry(0o100755, guest_file(GUEST_FILES["init"])),
        "kbisect/lib.sh": _Entry(0o100644, guest_file(GUEST_FILES["kbisect/lib.sh"])),
        "kbisect/testcase.sh": _Entry(0o100755, testcase_script),
        "kbisect/params.sh": _Entry(0o100644, params),
    }
    applets = subprocess.run(
        [str(BUSYBOX), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    for applet in applets:
        if applet != "busybox":
            files.setdefault(f"bin/{applet}", _Entry(0o120777, b"busybox"))
    for name, data in extra.items():
        files[f"kbisect/{name}"] = _Entry(0o100644, data)
    if host_root:  # empty: over 9p; else the serial of the image's disk
        serial = USERLAND_SERIAL.encode() if userland_image else b""
        files["kbisect/host-root"] = _Entry(0o100644, serial)
    if mode:  # init runs the script as this kind of boot
        files[f"kbisect/{mode}"] = _Entry(0o100644, b"")
    if modules:  # init insmods them in the listed order, before it looks for disks
        for name, data in modules.items():
            files[f"{MODULES_DIR}/{name}.ko"] = _Entry(0o100644, data)
        files["kbisect/modules"] = _Entry(0o100644, "".join(f"{n}\n" for n in modules).encode())
    for tool in tools:
        path = find_tool(tool)
        if host_root:
            continue
        files[f"usr/sbin/{tool}"] = _Entry(0o100755, path.read_bytes())
        for lib in shared_libraries(path):
            real = lib.resolve()
            files[str(lib).lstrip("/")] = _Entry(0o100755, real.read_bytes())
    return files


def _newc(entries: dict[str, _Entry]) -> bytes:
    dirs: set[str] = set()
    for path in entries:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    dirs.update(GUEST_DIRS)
    out = bytearray()
    ino = 1

    def add(name: str, mode: int, data: bytes) -> None:
        nonlocal ino
        name_b = name.encode() + b"\0"
        fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0)
        out.extend(b"070701" + b"".join(f"{v:08X}".encode() for v in fields))
        out.extend(name_b)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))
        ino += 1

    for d in sorted(dirs):
        add(d, stat.S_IFDIR | 0o755, b"")
    for path in sorted(entries):
        add(path, entries[path].mode, entries[path].data)
    add("TRAILER!!!", 0, b"")
    return bytes(out)


def build_image(
    tools: list[str],
    testcase_script: bytes,
    params: dict[str, str],
    host_root: bool = False,
    extra: dict[str, bytes] | None = None,
    mode: str = "",
    modules: dict[str, bytes] | None = None,
    userland_image: str = "",
    peer: tuple[str, ...] = (),
) -> GuestImage:
    """The cached initramfs for these tools, this testcase script and its parameters;
    `host_root`: the guest runs the script on the host's root filesystem; `extra`: the
    testcase's other files, in /kbisect/; `mode`: a boot of another kind, BOOT_TRACE
    (the script once under blktrace, from the host root, or from the initramfs when the
    tools are in `tools`) or BOOT_EXPLAIN (the script between reads of the system's
    statistics, under perf where the guest has it);
    `modules`: kernel modules (name -> file) init loads first, in this order;
    `userland_image`: with `host_root`, the host userland's image (infra.host_userland)
    the guest mounts instead of the host's root over 9p; `peer`: the host client's options
    (GuestImage.peer), nothing of the image's."""
    params_sh = params_file(params)
    entries = _tree(
        sorted(set(tools)),
        testcase_script,
        params_sh,
        host_root,
        extra or {},
        mode,
        modules,
        userland_image,
    )
    h = hashlib.sha256()
    for path in sorted(entries):
        h.update(path.encode() + b"\0" + hashlib.sha256(entries[path].data).digest())
    out = settings.cache_dir() / "images" / f"{h.hexdigest()[:24]}.cpio"
    try:
        os.utime(out)  # used now: `kbisect gc` removes images no boot used for a while
    except FileNotFoundError:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write.write_bytes(out, _newc(entries))
    except OSError:
        pass  # not ours to touch: the mark is only a hint
    return GuestImage(
        initramfs=str(out),
        tools=tuple(sorted(set(tools))),
        host_root=host_root,
        modules=tuple(modules or ()),
        userland_image=userland_image if host_root else "",
        peer=peer,
    )


def params_file(params: dict[str, str]) -> bytes:
    """The guest's /kbisect/params.sh: each parameter exported, as init sources it."""
    return "".join(
        f"export {k}='{_shell_quote_free(v)}'\n" for k, v in sorted(params.items())
    ).encode()


def _shell_quote_free(value: str) -> str:
    """Parameters are baked into a sourced file: allow only characters that need no quoting."""
    if not re.fullmatch(r"[A-Za-z0-9_.:/+-]*", value):
        raise InfraError(f"testcase parameter value {value!r} has characters kbisect does not pass")
    return value
