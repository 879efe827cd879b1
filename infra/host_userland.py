"""The host's userland as a read-only squashfs image, for a kernel that cannot mount the
host's root over virtio-9p (Debian's 6.12 cloud kernels ship no 9p modules; they ship
squashfs, virtio_blk and overlay).

The image holds the Debian packages a testcase's tools come from, with everything they
depend on, the essential set (dash, coreutils...), awk and python3 (testcases parse their
tools' output with them), and /etc less what the guest never sees of the host (shadow
files, sshd's keys). It is made once and cached by what went in: every file's path, size,
mode and mtime, as git's index tells a changed file; an upgraded package makes a new one.
Blocks are stored uncompressed: under TCG a guest's CPU is slow and the host's disk is not.
"""

import contextlib
import functools
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from kbisect import settings
from kbisect.errors import InfraError
from kbisect.infra import host_lock
from kbisect.infra.initramfs import find_tool

DPKG_INFO = Path("/var/lib/dpkg/info")
DPKG_STATUS = Path("/var/lib/dpkg/status")
DPKG_ALTERNATIVES = Path("/var/lib/dpkg/alternatives")
IMAGE_SUFFIX = ".squashfs"
STAGING_PREFIX = ".userland-"  # a folder in which an image is being made
# What every host-userland testcase may use besides its declared tools: the packages of
# these commands (awk is whichever awk the host's alternatives chose), and coreutils.
BASE_TOOLS = ("sh", "awk", "grep", "sed", "python3")
BASE_PACKAGES = ("coreutils",)
# Mount points the guest's init mounts over; the image has them empty.
MOUNT_POINTS = ("proc", "sys", "dev", "tmp", "run", "var/tmp", "root", "home", "kbisect")
MKSQUASHFS_TIMEOUT = 900.0
FORMAT = "1"  # bump when what goes into the image changes in a way the key cannot see


def _installed() -> dict[str, tuple[list[list[str]], list[str], bool]]:
    """Installed package -> (its Depends and Pre-Depends as alternatives, what it
    provides, essential)."""
    out = subprocess.run(
        [
            "dpkg-query",
            "-W",
            "-f",
            "${db:Status-Abbrev}\t${Package}\t${Depends}, ${Pre-Depends}\t${Provides}\t"
            "${Essential}\n",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise InfraError(f"dpkg-query cannot list the host's packages: {out.stderr.strip()}")
    packages: dict[str, tuple[list[list[str]], list[str], bool]] = {}
    for line in out.stdout.splitlines():
        status, name, depends, provides, essential = line.split("\t")
        if status[1:2] != "i":  # installed ("ii"), held ones too ("hi")
            continue
        alternatives = [
            [_name(a) for a in group.split("|")] for group in depends.split(",") if group.strip()
        ]
        packages[name] = (alternatives, [_name(p) for p in provides.split(",") if p.strip()],
                          essential == "yes")  # fmt: skip
    return packages


def _name(relation: str) -> str:
    """ "libc6 (>= 2.34)" or "python3:any" -> the package name."""
    return relation.strip().split(" ")[0].split(":")[0]


def closure(roots: Iterable[str]) -> list[str]:
    """The installed packages `roots` need, with the essential set: each dependency's
    first installed alternative (or a package that provides it)."""
    packages = _installed()
    providers: dict[str, str] = {}
    for name, (_, provides, _) in packages.items():
        for virtual in provides:
            providers.setdefault(virtual, name)
    todo = [r for r in roots if r in packages]
    todo += [n for n, (_, _, essential) in packages.items() if essential]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in packages[name][0]:
            found = next((a for a in group if a in packages), None)
            found = found or next((providers[a] for a in group if a in providers), None)
            if found:
                todo.append(found)
    return sorted(seen)


def owners(paths: Iterable[Path]) -> list[str]:
    """The packages that installed these files (a path dpkg does not know is skipped)."""
    argv = ["dpkg-query", "-S", "--", *(str(p) for p in paths)]
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    found = []
    for line in out.splitlines():
        head, sep, _ = line.partition(": ")
        if sep and not head.startswith("diversion by"):
            found += [_name(p) for p in head.split(",")]
    return sorted(set(found))


def tool_packages(tools: Iterable[str]) -> list[str]:
    """The packages of the testcase's tools, by the tool's path and what it links to,
    each also by its name through the root's links (dpkg lists busybox as /bin/busybox
    on a merged-/usr host, where it is found as /usr/bin/busybox)."""
    aliases = {"/" + target.lstrip("/"): "/" + name for name, target in _root_links().items()}
    paths: set[str] = set()
    for tool in tools:
        path = find_tool(tool)
        for p in (str(path), str(path.resolve())):
            paths.add(p)
            parent, base = os.path.split(p)
            if parent in aliases:
                paths.add(os.path.join(aliases[parent], base))
    return owners(Path(p) for p in sorted(paths)) if paths else []


def _listed(package: str) -> Iterator[str]:
    for name in (f"{package}.list", *(p.name for p in DPKG_INFO.glob(f"{package}:*.list"))):
        listing = DPKG_INFO / name
        if listing.exists():
            yield from listing.read_text(errors="replace").splitlines()


def alternatives() -> Iterator[str]:
    """The links update-alternatives made (/usr/bin/awk -> /etc/alternatives/awk): no
    package lists them. Each file: its mode, its link, then (name, link) pairs."""
    for record in DPKG_ALTERNATIVES.glob("*"):
        lines = record.read_text(errors="replace").split("\n\n", 1)[0].splitlines()
        yield from (p for p in lines[1::2] if p.startswith("/"))


def hidden() -> tuple[str, ...]:
    """What a guest never sees of the host, as guest_init.sh's kb_hide_host hides it over
    9p (its KB_HIDDEN_* lists, the one place they are written)."""
    init = (Path(__file__).parent / "guest_init.sh").read_text()
    lists = re.findall(r'^KB_HIDDEN_(?:DIRS|FILES)="([^"]*)"$', init, re.M)
    return tuple(path for paths in lists for path in paths.split())


def _readable(path: str) -> bool:
    """A link, or a file anyone may read: what a 9p guest under an unprivileged QEMU
    sees, whoever makes the image (root would add /etc/sudoers and private keys)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or (
        stat.S_ISREG(st.st_mode) and bool(st.st_mode & stat.S_IROTH)
    )


def files(packages: Iterable[str]) -> list[str]:
    """Every path the packages installed that is on the host now, the alternatives'
    links, and /etc, less the hidden and the unreadable; as the image has them (relative,
    through the host's directory links: /bin/x is usr/bin/x on a merged-/usr host)."""
    secret = hidden()
    paths = {p for package in packages for p in _listed(package) if p.startswith("/")}
    paths.update(alternatives())
    paths.update(str(p) for p in Path("/etc").rglob("*"))
    out = set()
    for p in paths:
        parent, base = os.path.split(p)
        rel = os.path.join(os.path.realpath(parent), base).lstrip("/")
        if not rel or any(rel == h or rel.startswith(h + "/") for h in secret):
            continue
        if _readable("/" + rel):
            out.add(rel)  # directories come with their files
    return sorted(out)


def _root_links() -> dict[str, str]:
    """/bin -> usr/bin and the like: the root's links to directories."""
    return {
        name: os.readlink(f"/{name}")
        for name in sorted(os.listdir("/"))
        if os.path.islink(f"/{name}") and os.path.isdir(f"/{name}")
    }


def key(paths: list[str]) -> str:
    h = hashlib.sha256(f"kbisect host userland {FORMAT}\0".encode())
    for rel, target in _root_links().items():
        h.update(f"link {rel} {target}\0".encode())
    for rel in paths:
        try:
            st = os.lstat("/" + rel)
        except FileNotFoundError:
            continue  # gone since it was listed (an /etc file): the image goes without it
        link = os.readlink("/" + rel) if stat.S_ISLNK(st.st_mode) else ""
        h.update(f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{link}\0".encode())
    return h.hexdigest()[:24]


@functools.lru_cache(maxsize=16)
def _paths(tools: tuple[str, ...], status_mtime: int) -> list[str]:
    """The image's paths for these tools while dpkg's database stays as it was."""
    del status_mtime  # the cache's key: a package installed or removed lists anew
    return files(closure([*BASE_PACKAGES, *tool_packages([*BASE_TOOLS, *tools])]))


_MAKING = threading.Lock()  # one image made at a time in this process (a duet's two guests)


def image(
    tools: Iterable[str],
    progress: Callable[[str], None] = lambda _: None,
    held: bool = False,
    pin: Sequence[int] = (),
) -> Path:
    """The squashfs image of the host's userland for these tools, made if missing: as a
    build is, never while a timed guest runs on the host (it reads and writes 200-300
    MiB): under the host's build lock, off the CPUs reserved for guests (`pin`); `held`:
    the caller holds the host's lock already (a duet, for both its guests: they make it
    one after the other, so neither guest starts while the other's is being made)."""
    try:
        status_mtime = DPKG_STATUS.stat().st_mtime_ns
    except OSError as exc:
        raise InfraError(f"no dpkg database here ({exc}): the userland image needs Debian") from exc
    paths = _paths(tuple(sorted(set(tools))), status_mtime)
    out = settings.cache_dir() / "images" / f"{key(paths)}{IMAGE_SUFFIX}"
    with _MAKING:
        try:
            os.utime(out)  # used now: `kbisect gc` removes images no boot used for a while
        except FileNotFoundError:
            _make(out, paths, progress, held, pin)
    return out


def _make(
    out: Path, paths: list[str], progress: Callable[[str], None], held: bool, pin: Sequence[int]
) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    progress(f"making the host userland's image of {len(paths)} files (once)")
    lock = contextlib.nullcontext() if held else host_lock.for_build(progress)
    with lock, tempfile.TemporaryDirectory(dir=out.parent, prefix=STAGING_PREFIX) as tmp:
        stage = Path(tmp) / "root"
        _stage(stage, paths)
        made = Path(tmp) / "image"
        _mksquashfs(stage, made, pin)
        os.replace(made, out)


def _stage(stage: Path, paths: list[str]) -> None:
    """The image's tree: hard links to the host's files where the filesystem allows (a
    copy elsewhere), its links as links, the root's directory links and mount points."""
    stage.mkdir()
    for rel, target in _root_links().items():
        os.symlink(target, stage / rel)
    for rel in MOUNT_POINTS:
        (stage / rel).mkdir(parents=True, exist_ok=True)
    for rel in paths:
        src, dst = Path("/" + rel), stage / rel
        if os.path.lexists(dst):  # a root link or mount point made above
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
            continue
        try:
            os.link(src, dst)
        except OSError:
            try:
                shutil.copy2(src, dst)
            except OSError:
                continue  # gone or unreadable since it was listed: the image goes without it


def _mksquashfs(stage: Path, out: Path, pin: Sequence[int]) -> None:
    argv = host_lock.taskset(host_lock.others(pin)) if pin else []  # off the guests' CPUs
    argv += [
        "mksquashfs", str(stage), str(out), "-noappend", "-quiet", "-no-progress",
        "-no-xattrs", "-all-root", "-noI", "-noId", "-noD", "-noF", "-noX",
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=MKSQUASHFS_TIMEOUT
        )
    except FileNotFoundError as exc:
        raise InfraError("mksquashfs is not installed: apt-get install squashfs-tools") from exc
    except subprocess.TimeoutExpired as exc:
        raise InfraError(f"mksquashfs took over {MKSQUASHFS_TIMEOUT:.0f} s") from exc
    if proc.returncode != 0:
        raise InfraError(f"mksquashfs failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
