"""Prebuilt kernels: a Debian `linux-image-*` package (by name through the host's apt, or a
.deb file), or a vmlinuz with its modules folder, made into an Artifact like a build's.

This is how a sustaining engineer starts: narrow the range over the distro's own builds
(as mozregression does over nightlies), then bisect commits between two of them. Nothing
here runs a shell: apt-get and dpkg-deb get argv lists, and names are checked first.
"""

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.builders import artifact_cache
from kbisect.errors import InfraError, UserError
from kbisect.model import PREBUILT_TAG, Artifact
from kbisect.settings import Settings

# Debian's binary package names: lowercase letters, digits and + - . (Policy 5.6.1).
PACKAGE_RE = re.compile(r"^linux-image-[a-z0-9][a-z0-9.+-]*$")
APT_TIMEOUT = 1800.0
# apt-get's words for a name it does not know (it tries a name with '.' as a regex too).
UNKNOWN_PACKAGE = (
    "Unable to locate package",
    "has no installation candidate",
    "Couldn't find any package",
)


@dataclass(frozen=True)
class Prebuilt:
    """One prebuilt kernel: what the user named, its version, and how to boot it."""

    name: str  # the package name, or the image's file name
    version: str  # the package's version, or the kernel release
    artifact: Artifact


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _run(argv: list[str], what: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=APT_TIMEOUT
        )
    except FileNotFoundError as exc:
        raise InfraError(f"{argv[0]} is not installed, needed to {what}") from exc
    except subprocess.TimeoutExpired as exc:
        raise InfraError(f"{argv[0]} took over {APT_TIMEOUT:.0f}s to {what}") from exc


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")[:300]


def download(package: str, settings: Settings, progress: Callable[[str], None]) -> Path:
    """The package's .deb from the host's apt sources, cached by name (an ABI name such
    as linux-image-6.1.0-47-cloud-amd64 is one kernel build)."""
    debs = settings.cache_dir() / "prebuilt" / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    cached = sorted(debs.glob(f"{package}_*.deb"))
    if cached:
        os.utime(cached[-1])  # used now: `kbisect gc` removes what is not used for a while
        return cached[-1]
    progress(f"downloading {package} with apt-get")
    with tempfile.TemporaryDirectory(dir=debs) as tmp:
        proc = _run(["apt-get", "download", "--", package], f"download {package}", Path(tmp))
        got = sorted(Path(tmp).glob("*.deb"))
        if proc.returncode != 0 or not got:
            err = _last_line(proc.stderr)
            if any(m in err for m in UNKNOWN_PACKAGE):
                raise UserError(
                    f"no Debian package {package} in this host's apt sources: "
                    "'apt-cache search linux-image' lists them (run apt-get update first)"
                )
            raise InfraError(f"apt-get download {package} failed: {err or 'no .deb'}")
        target = debs / got[0].name
        os.replace(got[0], target)
    return target


def _package_fields(deb: Path) -> tuple[str, str]:
    proc = _run(["dpkg-deb", "-f", "--", str(deb), "Package", "Version"], f"read {deb}")
    fields = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    if proc.returncode != 0 or "Package" not in fields:
        raise UserError(f"{deb} is not a Debian package: {_last_line(proc.stderr)}")
    return fields["Package"], fields.get("Version", "")


def unpack(deb: Path, settings: Settings, progress: Callable[[str], None]) -> tuple[Path, bool]:
    """The package's files, unpacked once into the cache (keyed by its sha256); True
    when they were there already."""
    root = settings.cache_dir() / "prebuilt" / "unpacked" / _sha256(deb)[:24]
    if (root / ".complete").exists():
        os.utime(root / ".complete")  # used now (kbisect gc)
        return root, True
    progress(f"unpacking {deb.name}")
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".unpack-"))
    try:
        proc = _run(["dpkg-deb", "-x", "--", str(deb), str(tmp)], f"unpack {deb}")
        if proc.returncode != 0:
            raise UserError(f"cannot unpack {deb}: {_last_line(proc.stderr)}")
        (tmp / ".complete").write_text("")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root, False


def _image_in(root: Path, what: str) -> tuple[Path, str]:
    """The one kernel image a package holds, and its release (vmlinuz-RELEASE)."""
    images = sorted(root.glob("boot/vmlinuz-*"))
    if len(images) != 1:
        raise UserError(
            f"{what} holds {len(images)} kernel images (boot/vmlinuz-*), not one: "
            "give a linux-image-* package"
        )
    return images[0], images[0].name.removeprefix("vmlinuz-")


def _modules_in(root: Path, release: str) -> str:
    for base in ("lib/modules", "usr/lib/modules"):
        folder = root / base / release
        if folder.is_dir() or folder.is_symlink():
            return str(folder)
    return ""


def _check_own(root: Path, paths: list[Path], what: str) -> None:
    """Refuse a kernel, config, modules folder or module that is a symbolic link or leads
    out of the unpacked package (through a linked folder): the guest would boot or load
    a file of the host's. The modules folder's modules are checked too."""
    for path in paths:
        inside = path.resolve().is_relative_to(root.resolve())
        if path.is_symlink() or not inside:
            raise UserError(
                f"{what}: {path.relative_to(root)} is a symbolic link or under one (to "
                f"{path.resolve()}): refused; give a package that holds its own kernel"
            )
        if inside and path.is_dir():
            _check_own(root, sorted(path.rglob("*.ko*")), what)


def _artifact(
    name: str,
    version: str,
    image: Path,
    config: Path | None,
    modules: str,
    cached: bool,
    began: float,
) -> Artifact:
    sha = _sha256(image)
    return Artifact(
        commit=name,
        tree=version,
        config_hash=f"{PREBUILT_TAG}-{sha[:16]}",
        kernel=str(image),
        config=str(config) if config and config.exists() else "",
        build_log="",
        cached=cached,
        seconds=round(time.monotonic() - began, 2),
        image_sha256=sha,
        modules=modules,
    )


def from_deb(deb: Path, settings: Settings, progress: Callable[[str], None]) -> Prebuilt:
    began = time.monotonic()
    package, version = _package_fields(deb)
    root, cached = unpack(deb, settings, progress)
    image, release = _image_in(root, str(deb))
    config = root / "boot" / f"config-{release}"
    modules = _modules_in(root, release)
    own = [image, config, *([Path(modules)] if modules else [])]
    _check_own(root, [p for p in own if p.exists() or p.is_symlink()], deb.name)
    art = _artifact(package, version, image, config, modules, cached, began)
    return Prebuilt(package, version, art)


def from_image(image: Path, modules: Path | None) -> Prebuilt:
    """A vmlinuz (or bzImage) of the user's, with its modules folder: the one given, else
    /lib/modules/RELEASE for an image named vmlinuz-RELEASE, else none (all built in)."""
    began = time.monotonic()
    release = image.name.removeprefix("vmlinuz-") if image.name.startswith("vmlinuz-") else ""
    if modules is None and release and Path("/lib/modules", release).is_dir():
        modules = Path("/lib/modules", release)
    if modules is not None and not modules.is_dir():
        raise UserError(f"--modules {modules} is not a folder: give lib/modules/RELEASE")
    config = image.with_name(f"config-{release}") if release else None
    art = _artifact(image.name, release or "local", image, config, str(modules or ""), True, began)
    return Prebuilt(image.name, release or "local", art)


def as_cache_entry(art: Artifact) -> Artifact:
    """A prebuilt kernel copied into an artifact cache entry, like a build's, so a store
    can carry it to VM hosts that have neither the package nor the user's file (their
    fetch checks each file's sha256). Once per kernel: a whole entry is reused."""
    found = artifact_cache.lookup(art.tree, art.config_hash, art.commit)
    if found is not None:
        return found
    adir = artifact_cache.entry_dir(art.tree, art.config_hash)
    image = Path(art.kernel)
    config = Path(art.config) if art.config else None
    entry = Artifact(
        commit=art.commit,
        tree=art.tree,
        config_hash=art.config_hash,
        kernel=artifact_cache.keep(image, adir, "bzImage"),
        config=artifact_cache.keep(config, adir, "config")
        if config is not None
        else artifact_cache.keep_text(
            f"# {image.name}: prebuilt, no config came with it\n", adir, "config"
        ),
        build_log=artifact_cache.keep_text(f"prebuilt: {image}\n", adir, artifact_cache.BUILD_LOG),
        cached=art.cached,
        seconds=art.seconds,
        image_sha256=art.image_sha256,
        modules=artifact_cache.keep_tree(Path(art.modules), adir, artifact_cache.MODULES)
        if art.modules
        else "",
    )
    artifact_cache.store(adir, entry)
    return entry


def resolve(
    spec: str,
    settings: Settings,
    modules: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> Prebuilt:
    """A prebuilt kernel from what the user wrote: a .deb file, a kernel image file, or a
    Debian package name (fetched with the host's apt)."""
    check_spec(spec, modules)
    path = Path(spec)
    if spec.endswith(".deb"):
        return from_deb(path.resolve(), settings, progress)
    if path.is_file():
        return from_image(path.resolve(), modules)
    return from_deb(download(spec, settings, progress), settings, progress)


def check_spec(spec: str, modules: Path | None = None) -> None:
    """What resolve refuses, before anything is fetched or unpacked (UserError)."""
    if modules is not None and not modules.is_dir():
        raise UserError(f"--modules {modules} is not a folder: give lib/modules/RELEASE")
    path = Path(spec)
    if spec.endswith(".deb"):
        if not path.is_file():
            raise UserError(f"--kernel {spec}: no such file")
    elif not path.is_file() and not PACKAGE_RE.match(spec):
        raise UserError(
            f"--kernel {spec!r} is not a file and not a Debian package name: give a "
            "linux-image-* package (e.g. linux-image-6.1.0-47-cloud-amd64), a .deb or a vmlinuz"
        )
