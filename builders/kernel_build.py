"""Build one commit: worktree, config, make with ccache, artifact cache, kept log."""

import dataclasses
import errno
import hashlib
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kbisect import settings
from kbisect.builders import artifact_cache, kconfig, slot_config, worktree
from kbisect.builders.classify import FailureScan
from kbisect.builders.sources import compiled_sources
from kbisect.errors import DiskFullError, InfraError, KernelBuildError
from kbisect.infra import host_lock
from kbisect.infra.git import Git
from kbisect.infra.procs import die_with_parent
from kbisect.model import Artifact, BuildSpec

log = logging.getLogger(__name__)
REQUIRED_TOOLS = ("gcc", "make", "flex", "bison", "bc", "perl")
MIN_FREE_BYTES = 3 * 1024**3
IMAGE_PATHS = {"x86_64": "arch/x86/boot/bzImage"}
# Fixed build identity: reproducible images and ccache hits on init/version.c.
REPRO_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026",
    "KBUILD_BUILD_USER": "kbisect",
    "KBUILD_BUILD_HOST": "kbisect",
    "KBUILD_BUILD_VERSION": "1",  # not the build dir's counter (.version)
    "LOCALVERSION": "",  # set, even empty: no "+" for a commit off a tag
}
# Inherited variables that would change what make builds or where (a parent make's
# jobserver, a cross compiler, another .config): not the commit's fault if it fails.
SCRUBBED_ENV = frozenset(
    {
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "MAKELEVEL",
        "MAKEFILES",
        "KBUILD_OUTPUT",
        "KCONFIG_CONFIG",
        "CROSS_COMPILE",
        "LLVM",
        "KCFLAGS",
        "KCPPFLAGS",
        "KAFLAGS",
    }
)
# make splits O= and CC= on blanks and reads ':', '$' and '#'; ccache splits on ':'.
MAKE_UNSAFE = re.compile(r"[\s:$#\\]")
MAX_OUTPUT_LINE = 64 * 1024  # make's output is read line by line, no line without bound

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _tool_version(tool: str) -> str:
    """The first line of `tool --version`, or 'tool?' when it does not answer."""
    try:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return f"{tool}?"
    return out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else f"{tool}?"


def compiler_version() -> str:
    """The compiler, assembler and linker (binutils decides what builds as gcc does) and
    the fixed build identity: all are in an artifact's key."""
    tools = [_tool_version(t) for t in ("gcc", "as", "ld")]
    return " ".join([*tools, *(f"{k}={v}" for k, v in sorted(REPRO_ENV.items()))])


def check_cache_path(path: Path) -> None:
    """Refuse a cache path make cannot take, before it fails in a way that looks like the
    kernel's fault."""
    for text in dict.fromkeys((str(path), str(path.resolve()))):
        bad = MAKE_UNSAFE.search(text)
        if bad:
            raise InfraError(
                f"KBISECT_CACHE={text!r} has {bad.group()!r}, which make and ccache cannot "
                "take in a path: set KBISECT_CACHE to a path without blanks, ':', '$', '#' "
                "or '\\' and restart the worker"
            )


def check_host(path: Path) -> None:
    check_cache_path(path)
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise InfraError(
            f"build tools missing: {', '.join(missing)}: run the README's install command"
        )
    free = shutil.disk_usage(path).free
    if free < MIN_FREE_BYTES:
        raise DiskFullError(
            f"only {free // 2**20} MiB free under {path}: free at least "
            f"{MIN_FREE_BYTES // 2**30} GiB (or set KBISECT_CACHE elsewhere)"
        )


MAX_SLOTS = 8


@dataclass(frozen=True)
class Slot:
    index: int
    path: Path
    lock_fd: int  # the flock; handed to make so its orphans keep the slot locked


def _slot_order(repo: Path, config_hash: str) -> list[int]:
    """Slots whose build dir is configured for these inputs first: there the next commit
    is an incremental build (a distro kernel rebuilt from scratch takes minutes even with
    every object in ccache)."""
    first = _warm_slots(repo, config_hash)
    return first + [i for i in range(MAX_SLOTS) if i not in first]


def _warm_slots(repo: Path, config_hash: str) -> list[int]:
    """The slots of repo whose build dir is configured for these inputs, whole."""
    key = worktree.repo_key(repo)

    def warm(i: int) -> bool:
        slot = worktree.slots_root() / f"{key}-{i}"
        return (
            bool(config_hash)
            and not (slot / "build-in-progress").exists()
            and slot_config.configured_hash(slot / "build") == config_hash
        )

    return [i for i in range(MAX_SLOTS) if warm(i)]


@contextmanager
def _from_scratch(repo: Path, config_hash: str, progress: Progress) -> Iterator[None]:
    """A build that finds no slot of `repo` configured for this config compiles every
    object: it takes the config's first-build lock (artifact_cache.building_config)."""
    if _warm_slots(repo, config_hash):
        yield
        return
    with artifact_cache.building_config(config_hash, progress):
        yield


@contextmanager
def _free_slot(repo: Path, config_hash: str = "") -> Iterator[Slot]:
    """A build slot (worktree + build dir) that no other build holds, across processes;
    one already configured for `config_hash` if one is free.

    The lock is an flock: a killed worker's slot is free again once its make and
    compilers (which inherit the lock) are gone too.
    """
    fd = None
    try:
        for i in _slot_order(repo, config_hash):
            path = worktree.slot_dir(repo, i)
            fd = worktree.try_lock_slot(path)
            if fd is not None:
                yield Slot(i, path, fd)
                return
        path = worktree.slot_dir(repo, 0)  # all busy: wait for the first
        fd = worktree.lock_slot(path)
        yield Slot(0, path, fd)
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock, unless an orphan still holds it


@dataclass(frozen=True)
class _Key:
    commit: str
    tree: str
    config_hash: str


class KernelBuilder:
    def __init__(self, jobs: int | None = None, pin: tuple[int, ...] = ()) -> None:
        self.jobs = jobs or settings.build_jobs()
        self.pin = pin  # host CPUs builds keep to (off those reserved for guests); () = any

    def build(
        self, repo: Path, commit: str, spec: BuildSpec, progress: Progress = _quiet
    ) -> Artifact:
        """The artifact; KernelBuildError if it does not compile, InfraError if the host fails."""
        key = _Key(commit, Git(repo).tree_of(commit), kconfig.config_hash(spec, compiler_version()))
        cached = self._lookup(key)
        if cached is not None:
            progress("artifact cache hit")
            return cached
        check_host(settings.cache_dir())
        # The host lock first: whoever holds it exclusively (a timed guest) never waits for
        # a build's locks, so waiting for another build of this kernel under it is no cycle.
        with (
            host_lock.for_build(progress),
            artifact_cache.building(key.tree, key.config_hash, progress),
            _from_scratch(repo, key.config_hash, progress),
        ):
            # Another process may have built it while we waited for the lock.
            cached = self._lookup(key)
            if cached is not None:
                progress("artifact cache hit: built meanwhile by another build")
                return cached
            with _free_slot(repo, key.config_hash) as slot:
                return self._build_locked(repo, key, spec, slot, progress)

    @staticmethod
    def _lookup(key: _Key) -> Artifact | None:
        try:
            return artifact_cache.lookup(key.tree, key.config_hash, key.commit)
        except KernelBuildError as err:
            log.info("%s: kernel does not build (cached): %s", key.commit[:12], err)
            raise

    def _build_locked(
        self, repo: Path, key: _Key, spec: BuildSpec, slot: Slot, progress: Progress
    ) -> Artifact:
        start = time.monotonic()
        adir = artifact_cache.entry_dir(key.tree, key.config_hash)
        progress(f"checking out {key.commit[:12]}")
        src = worktree.checkout(repo, key.commit, slot.index)
        out = _fresh_build_dir(slot.path)
        build_log = artifact_cache.BuildLog(adir)
        host_log = adir / artifact_cache.HOST_LOG
        run = _MakeRun(src, out, spec, self.jobs, slot, build_log.file, host_log, self.pin)
        try:
            run.configure_and_build(key, progress)
            modules = run.install_modules(progress)
            (slot.path / "build-in-progress").unlink()
            return _keep(key, spec, src, out, build_log, time.monotonic() - start, modules)
        except KernelBuildError as err:
            err.log_path = str(build_log.publish(artifact_cache.BUILD_LOG))
            artifact_cache.store_failure(adir, err)
            (slot.path / "build-in-progress").unlink()
            log.info("%s: kernel does not build, cached and skipped: %s", key.commit[:12], err)
            raise
        except BaseException as exc:
            build_log.publish(artifact_cache.HOST_LOG)
            log.warning("%s: host problem, not cached, retried: %s", key.commit[:12], exc)
            raise


def _keep(
    key: _Key,
    spec: BuildSpec,
    src: Path,
    out: Path,
    build_log: artifact_cache.BuildLog,
    seconds: float,
    modules: Path | None = None,
) -> Artifact:
    """The built files copied into the cache entry, and the entry stored."""
    adir = build_log.dir
    image = out / IMAGE_PATHS[spec.arch]
    if not image.is_file() or image.stat().st_size == 0:
        raise InfraError(
            f"make succeeded but left no {image}: see {adir / artifact_cache.HOST_LOG}"
        )
    try:
        artifact = Artifact(
            commit=key.commit,
            tree=key.tree,
            config_hash=key.config_hash,
            kernel=artifact_cache.keep(image, adir, "bzImage"),
            config=artifact_cache.keep(out / ".config", adir, "config"),
            build_log=str(build_log.publish(artifact_cache.BUILD_LOG)),
            seconds=round(seconds, 1),
            image_sha256=hashlib.sha256(image.read_bytes()).hexdigest(),
            sources=artifact_cache.keep_text(
                "\n".join(compiled_sources(out, src)) + "\n", adir, artifact_cache.SOURCES
            ),
            modules=artifact_cache.keep_tree(modules, adir, artifact_cache.MODULES)
            if modules
            else "",
        )
        symbols = out / artifact_cache.SYSTEM_MAP
        if symbols.is_file():  # beside the image: addresses for its oopses
            artifact_cache.keep(symbols, adir, artifact_cache.SYSTEM_MAP)
        artifact_cache.store(adir, artifact)
    except OSError as exc:
        kind = DiskFullError if exc.errno in (errno.ENOSPC, errno.EDQUOT) else InfraError
        raise kind(f"could not keep the build in {adir}: {exc}") from exc
    return artifact


def _fresh_build_dir(slot: Path) -> Path:
    out = slot / "build"
    interrupted = slot / "build-in-progress"
    if interrupted.exists():
        # A build was killed mid-way: a truncated object newer than its source would
        # pass for up to date, so start clean (ccache makes that about a minute).
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(exist_ok=True)
    interrupted.touch()
    return out


@dataclass
class _MakeRun:
    """The commands of one build in one slot, their output in one log."""

    src: Path
    out: Path
    spec: BuildSpec
    jobs: int
    slot: Slot
    log: TextIO
    host_log: Path  # where the log will be if the host fails the build
    pin: tuple[int, ...] = ()

    def configure_and_build(self, key: _Key, progress: Progress) -> None:
        self.log.write(
            f"# kbisect build of {key.commit} (tree {key.tree}) config {key.config_hash}\n"
        )
        kept = slot_config.reusable(self.src, self.out, key.commit, key.config_hash)
        if kept is None:
            slot_config.forget(self.out)
            self.configure(progress)
            slot_config.remember(self.out, key.commit, key.config_hash)
        else:
            progress(f"configuration kept from {kept[:12]}")
            self.log.write(
                f"# kbisect: .config kept from the slot's build of {kept}: no Kconfig, "
                "Makefile, script or config fragment differs\n"
            )
        self._note_missing()
        progress("compiling")
        if self.builds_modules():
            self.make([self.spec.target, "modules"], progress)
        else:
            self.make([self.spec.target], progress)

    def builds_modules(self) -> bool:
        return bool(self.spec.base_config) and "\nCONFIG_MODULES=y\n" in (
            "\n" + (self.out / ".config").read_text()
        )

    def install_modules(self, progress: Progress) -> Path | None:
        """The build's modules folder (lib/modules/RELEASE), or None without modules."""
        if not self.builds_modules():
            return None
        root = self.out / "kbisect-modules"
        shutil.rmtree(root, ignore_errors=True)
        progress("installing modules")
        self.make([f"INSTALL_MOD_PATH={root}", "INSTALL_MOD_STRIP=1", "modules_install"], progress)
        found = sorted((root / "lib" / "modules").glob("*"))
        if len(found) != 1:
            raise InfraError(f"modules_install left {len(found)} module folders in {root}")
        return found[0]

    def configure(self, progress: Progress) -> None:
        if self.spec.base_config:
            self.configure_distro(progress)
            return
        progress("configuring (tinyconfig + fragments)")
        self.make(["tinyconfig"], progress)
        self.merge(kconfig.fragments_for(self.spec), progress)

    def configure_distro(self, progress: Progress) -> None:
        """The user's config, trimmed by localmodconfig to the testcase's modules, then
        the fragments (a distro module stays a module), then olddefconfig."""
        progress("configuring (your config, localmodconfig, fragments)")
        (self.out / ".config").write_text(self.spec.base_config)
        self.make(["olddefconfig"], progress)
        lsmod = self.out / "kbisect-lsmod"
        lsmod.write_text(kconfig.lsmod_text(self.spec.modules))
        self.make([f"LSMOD={lsmod}", "localmodconfig"], progress)
        trimmed = (self.out / ".config").read_text()
        frags = [kconfig.keep_modules_modular(f, trimmed) for f in kconfig.fragments_for(self.spec)]
        self.merge(frags, progress)

    def merge(self, frags: list[str], progress: Progress) -> None:
        paths = []
        for i, text in enumerate(frags):
            p = self.out / f"kbisect-fragment-{i}.config"
            p.write_text(text)
            paths.append(str(p))
        merge = self.src / "scripts/kconfig/merge_config.sh"
        self.run([str(merge), "-m", "-O", str(self.out), str(self.out / ".config"), *paths])
        self.make(["olddefconfig"], progress)

    def _note_missing(self) -> None:
        frags = kconfig.fragments_for(self.spec)
        missing = kconfig.missing_options(frags, (self.out / ".config").read_text())
        if missing:
            # Not fatal: an old commit may not know a symbol; the log says so.
            self.log.write(f"# kbisect: requested but not in .config: {' '.join(missing)}\n")

    def make(self, targets: list[str], progress: Progress) -> None:
        cc = "ccache gcc" if shutil.which("ccache") else "gcc"
        argv = host_lock.taskset(self.pin)
        argv += ["make", "-C", str(self.src), f"O={self.out}", f"ARCH={self.spec.arch}"]
        argv += kconfig.kcflags(self.spec)  # the environment's KCFLAGS is scrubbed
        self.run([*argv, f"-j{self.jobs}", f"CC={cc}", *targets], progress)

    def env(self) -> dict[str, str]:
        own = settings.Settings.from_env()
        cache = own.cache_dir()
        # A deployment's shared compile cache: a fresh build host starts warm.
        remote = {"CCACHE_REMOTE_STORAGE": own.ccache_remote} if own.ccache_remote else {}
        return {
            **{k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV},
            **REPRO_ENV,
            **remote,
            "CCACHE_DIR": str(cache / "ccache"),
            # Hash paths relative to the slot, so other slots and repos hit the same entries.
            "CCACHE_BASEDIR": str(self.src.parent),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_MAXSIZE": os.environ.get("CCACHE_MAXSIZE", "8G"),
            "LC_ALL": "C",
        }

    def run(self, argv: list[str], progress: Progress | None = None) -> None:
        self.log.write(f"$ {' '.join(argv)}\n")
        self.log.flush()
        proc = subprocess.Popen(
            argv,
            cwd=self.src,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: stopping kills every compiler
            preexec_fn=die_with_parent,  # and a killed worker takes make with it
            pass_fds=(self.slot.lock_fd,),  # orphans that outlive both keep the slot locked
        )
        stdout = proc.stdout
        assert stdout is not None
        scan = FailureScan()
        try:
            for line in iter(lambda: stdout.readline(MAX_OUTPUT_LINE), ""):
                self.log.write(line)
                scan.feed(line)
                if progress is not None and line.startswith("  "):
                    progress(line.strip())
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # progress() raised: the build was stopped
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.log.flush()
        if rc != 0:
            raise scan.error(rc, str(self.host_log))


class Settler:
    """A kernel tree's own Kconfig, at one commit, in a build slot's folder of its own (the
    slot's build folder keeps its configuration): a config bisection's two configs through
    kbisect's layers (`normalized`), and a set of options settled by olddefconfig
    (`settled`, config_groups' callback)."""

    def __init__(self, run: "_MakeRun", progress: Progress) -> None:
        self._run, self._progress = run, progress

    def normalized(self, spec: BuildSpec) -> str:
        """The .config a build of `spec` starts from: its config through the layers (the
        testcase's fragment, localmodconfig, olddefconfig), as --config builds make it."""
        dataclasses.replace(self._run, spec=spec).configure(self._progress)
        return (self._run.out / ".config").read_text()

    def settled(self, config: str) -> str:
        """`config` as Kconfig settles it (make olddefconfig)."""
        (self._run.out / ".config").write_text(config)
        self._run.make(["olddefconfig"], self._progress)
        return (self._run.out / ".config").read_text()


@contextmanager
def settling(
    repo: Path, commit: str, spec: BuildSpec, jobs: int | None = None, progress: Progress = _quiet
) -> Iterator[Settler]:
    """A Settler of `repo` at `commit`, in a free build slot held for its time (under the
    host lock, as a build: configuring compiles Kconfig's tools)."""
    with host_lock.for_build(progress), _free_slot(repo) as slot:
        src = worktree.checkout(repo, commit, slot.index)
        out = slot.path / "settle"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        with open(out / "settle.log", "w") as log:
            run = _MakeRun(
                src, out, spec, jobs or settings.build_jobs(), slot, log, out / "host.log"
            )
            yield Settler(run, progress)
