"""Build one commit: worktree, config, make with ccache, artifact cache, kept log."""

import fcntl
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from kbisect import settings
from kbisect.builders import artifact_cache, kconfig, worktree
from kbisect.errors import DiskFullError, InfraError, KernelBuildError
from kbisect.git import Git
from kbisect.model import Artifact, BuildSpec

REQUIRED_TOOLS = ("gcc", "make", "flex", "bison", "bc", "perl")
MIN_FREE_BYTES = 3 * 1024**3
# Lines in a failed build log that blame the host, not the commit.
INFRA_PATTERNS = (
    re.compile(r"No space left on device"),
    re.compile(r"(command not found|: not found)$", re.M),
    re.compile(r"fatal error: (openssl|gelf|libelf)\S*\.h: No such file"),
    re.compile(r"Cannot allocate memory|Killed signal terminated program"),
)
IMAGE_PATHS = {"x86_64": "arch/x86/boot/bzImage"}
# Fixed build identity: reproducible images and ccache hits on init/version.c.
REPRO_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "Thu Jan  1 00:00:00 UTC 2026",
    "KBUILD_BUILD_USER": "kbisect",
    "KBUILD_BUILD_HOST": "kbisect",
}

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def compiler_version() -> str:
    out = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.returncode == 0 and out.stdout else "gcc?"


def check_host(path: Path) -> None:
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


@contextmanager
def _free_slot(repo: Path) -> Iterator[tuple[int, Path]]:
    """A build slot (worktree + build dir) that no other build holds, across processes.

    The lock is an flock, so a killed worker's slot is free again at once.
    """
    held = None
    try:
        for i in range(MAX_SLOTS):
            slot = worktree.slot_dir(repo, i)
            fh = open(slot / "lock", "w")  # closed in finally
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                continue
            held = fh
            yield i, slot
            return
        slot = worktree.slot_dir(repo, 0)  # all busy: wait for the first
        held = open(slot / "lock", "w")
        fcntl.flock(held, fcntl.LOCK_EX)
        yield 0, slot
    finally:
        if held is not None:
            held.close()  # releases the lock


class KernelBuilder:
    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = jobs or settings.build_jobs()

    def build(
        self, repo: Path, commit: str, spec: BuildSpec, progress: Progress = _quiet
    ) -> Artifact:
        """The artifact; KernelBuildError if it does not compile, InfraError if the host fails."""
        git = Git(repo)
        tree = git.tree_of(commit)
        cfg_hash = kconfig.config_hash(spec, compiler_version())
        cached = artifact_cache.lookup(tree, cfg_hash, commit)
        if cached is not None:
            progress("artifact cache hit")
            return cached
        check_host(settings.cache_dir())
        with _free_slot(repo) as (index, slot):
            # Another process may have built it while we waited for the lock.
            cached = artifact_cache.lookup(tree, cfg_hash, commit)
            if cached is not None:
                return cached
            return self._build_locked(repo, commit, tree, cfg_hash, spec, index, slot, progress)

    def _build_locked(
        self,
        repo: Path,
        commit: str,
        tree: str,
        cfg_hash: str,
        spec: BuildSpec,
        index: int,
        slot: Path,
        progress: Progress,
    ) -> Artifact:
        start = time.monotonic()
        adir = artifact_cache.entry_dir(tree, cfg_hash)
        adir.mkdir(parents=True, exist_ok=True)
        log_path = adir / "build.log"
        progress(f"checking out {commit[:12]}")
        src = worktree.checkout(repo, commit, index)
        out = slot / "build"
        interrupted = slot / "build-in-progress"
        if interrupted.exists():
            # A build was killed mid-way: a truncated object newer than its source would
            # pass for up to date, so start clean (ccache makes that about a minute).
            shutil.rmtree(out, ignore_errors=True)
        out.mkdir(exist_ok=True)
        interrupted.touch()
        with open(log_path, "w") as log:
            log.write(f"# kbisect build of {commit} (tree {tree}) config {cfg_hash}\n")
            log.flush()
            try:
                self._configure(src, out, spec, log, progress)
                progress("compiling")
                self._make(src, out, spec, [spec.target], log, progress)
            except KernelBuildError as err:
                err.log_path = str(log_path)
                artifact_cache.store_failure(adir, err)
                interrupted.unlink()
                raise
        interrupted.unlink()
        image = out / IMAGE_PATHS[spec.arch]
        artifact = Artifact(
            commit=commit,
            tree=tree,
            config_hash=cfg_hash,
            kernel=artifact_cache.keep(image, adir, "bzImage"),
            config=artifact_cache.keep(out / ".config", adir, "config"),
            build_log=str(log_path),
            seconds=round(time.monotonic() - start, 1),
        )
        artifact_cache.store(adir, artifact)
        return artifact

    def _configure(
        self, src: Path, out: Path, spec: BuildSpec, log: TextIO, progress: Progress
    ) -> None:
        progress("configuring (tinyconfig + fragments)")
        self._make(src, out, spec, ["tinyconfig"], log, progress)
        frags = kconfig.fragments_for(spec)
        paths = []
        for i, text in enumerate(frags):
            p = out / f"kbisect-fragment-{i}.config"
            p.write_text(text)
            paths.append(str(p))
        self._run(
            [
                str(src / "scripts/kconfig/merge_config.sh"),
                "-m",
                "-O",
                str(out),
                str(out / ".config"),
                *paths,
            ],
            src,
            log,
        )
        self._make(src, out, spec, ["olddefconfig"], log, progress)
        missing = kconfig.missing_options(frags, (out / ".config").read_text())
        if missing:
            # Not fatal: an old commit may not know a symbol; the log says so.
            log.write(f"# kbisect: requested but not in .config: {' '.join(missing)}\n")

    def _make(
        self,
        src: Path,
        out: Path,
        spec: BuildSpec,
        targets: list[str],
        log: TextIO,
        progress: Progress,
    ) -> None:
        cc = "ccache gcc" if shutil.which("ccache") else "gcc"
        argv = [
            "make",
            "-C",
            str(src),
            f"O={out}",
            f"ARCH={spec.arch}",
            f"-j{self.jobs}",
            f"CC={cc}",
            *targets,
        ]
        self._run(argv, src, log, progress)

    def _run(
        self, argv: list[str], cwd: Path, log: TextIO, progress: Progress | None = None
    ) -> None:
        env = {
            **os.environ,
            **REPRO_ENV,
            "CCACHE_DIR": str(settings.cache_dir() / "ccache"),
            # Hash paths relative to the slot, so other slots and repos hit the same entries.
            "CCACHE_BASEDIR": str(cwd.parent),
            "CCACHE_NOHASHDIR": "1",
            "CCACHE_MAXSIZE": os.environ.get("CCACHE_MAXSIZE", "8G"),
            "LC_ALL": "C",
        }
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: stopping kills every compiler
        )
        assert proc.stdout is not None
        tail: list[str] = []
        try:
            for line in proc.stdout:
                log.write(line)
                tail = [*tail, line][-40:]
                if progress is not None and line.startswith("  "):
                    progress(line.strip())
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # progress() raised: the build was stopped
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.flush()
        if rc != 0:
            text = "".join(tail)
            for pat in INFRA_PATTERNS:
                if pat.search(text):
                    kind = DiskFullError if "space" in pat.pattern else InfraError
                    raise kind(f"build failed for a host reason ({pat.pattern}): see {log.name}")
            first_error = next(
                (t.strip() for t in tail if "error" in t.lower()), tail[-1].strip() if tail else ""
            )
            raise KernelBuildError(f"kernel does not build: {first_error}")
