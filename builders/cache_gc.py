"""`kbisect gc`: free the disk kbisect's cache takes, and the refs it wrote.

What goes: QEMU run directories (console.log, disk images) last written more than N days
ago, build slots whose repository is gone, artifacts no build or boot has used for N
days (prebuilt kernels and kernel lists too), guest images (initramfs, userland
squashfs) no boot has used and job inputs (--config, --fixup) no job has stored or read
for N days (and the temp files and staging folders a killed maker left a day ago), and
`refs/kbisect/verify/*`, `refs/kbisect/backport/*` and `refs/kbisect/patched/*` refs made
more than N days ago in the repositories kbisect has built (each slot names its
repository). A backport's two kernels (the target with its series, and the target) stay
while its ref does. What stays: anything written or used within N days (each use
touches it), a slot whose lock is held (a build, or an orphan of a killed one, still writes
there), a ref whose age is unknown. Each worker runs it on its own cache on a timer
(workers/worker.py); `kbisect gc` runs it by hand."""

import os
import re
import shutil
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.builders import job_inputs, worktree
from kbisect.builders.backport_series import BACKPORT_IDENTITY
from kbisect.builders.patched_commit import PATCHED_REFS
from kbisect.errors import InfraError, UserError
from kbisect.evidence import RUN_NAME, RUNS
from kbisect.infra.git import Git
from kbisect.infra.host_userland import STAGING_PREFIX
from kbisect.settings import Settings

DAY = 86400.0
VERIFY_REFS = "refs/kbisect/verify/"
BACKPORT_REFS = "refs/kbisect/backport/"  # a backport job's test kernel (backport_series)
# Names infra/initramfs.py, infra/host_userland.py and builders/kconfig.py give (a content
# hash), and their temp files.
IMAGE_NAME = re.compile(r"^[0-9a-f]{24}\.(cpio|squashfs)$")
TEMP_NAME = re.compile(r"^[0-9a-f]{24}\.tmp$")


@dataclass
class GcReport:
    dry_run: bool
    runs: list[Path] = field(default_factory=list)
    slots: list[Path] = field(default_factory=list)
    artifacts: list[Path] = field(default_factory=list)
    images: list[Path] = field(default_factory=list)  # guest initramfs images
    configs: list[Path] = field(default_factory=list)  # jobs' stored --config and --fixup files
    refs: list[tuple[Path, str]] = field(default_factory=list)  # (repository, ref)
    kept: list[str] = field(default_factory=list)  # old enough, kept, and why
    bytes_freed: int = 0  # what a dry run would free

    def removed_count(self) -> int:
        kinds = (self.runs, self.slots, self.artifacts, self.images, self.configs, self.refs)
        return sum(len(k) for k in kinds)


def collect(
    settings: Settings,
    older_than_days: float,
    dry_run: bool,
    *,
    artifacts: bool = True,
    repos: Iterable[Path] = (),
) -> GcReport:
    """Remove (or with dry_run, list) what kbisect no longer needs; see the module doc."""
    if older_than_days < 0:
        raise UserError(f"--older-than {older_than_days:g}: give a number of days, 0 or more")
    cutoff = time.time() - older_than_days * DAY
    report = GcReport(dry_run=dry_run)
    cache = settings.cache
    _collect_runs(cache / RUNS, cutoff, report)
    known = _known_repos(cache / "slots") | {Path(r).resolve() for r in repos}
    _collect_slots(cache / "slots", report)
    if artifacts:
        pinned = {k: v for repo in sorted(known) for k, v in _backport_trees(repo, cutoff).items()}
        _collect_artifacts(cache / "artifacts", cutoff, report, pinned)
        _collect_prebuilt(cache, cutoff, report)
    _collect_files(cache / "images", IMAGE_NAME, cutoff, report, report.images)
    for stage in _subdirs(cache / "images"):
        if stage.name.startswith(STAGING_PREFIX):
            _remove_stale_stage(stage, report)
    for folder, _ in job_inputs.KINDS.values():
        _collect_files(cache / folder, job_inputs.KEPT_NAME, cutoff, report, report.configs)
    for repo in sorted(known):
        _collect_refs(repo, cutoff, report)
    return report


def _collect_runs(root: Path, cutoff: float, report: GcReport) -> None:
    for run in _subdirs(root):
        named = _run_time(run.name)
        if named is None:
            continue  # not a name kbisect gave: not ours to remove
        if max(named, _last_write(run)) < cutoff:
            report.runs.append(run)
            _remove(run, report)


def _run_time(name: str) -> float | None:
    m = RUN_NAME.fullmatch(name)
    try:
        return time.mktime(time.strptime(m[1], "%Y%m%d-%H%M%S")) if m else None
    except ValueError:  # 20241399-...: not a time, not ours
        return None


def _collect_slots(root: Path, report: GcReport) -> None:
    for slot in worktree.orphan_slots(root):
        fd = worktree.lock_orphan(slot)
        if fd is None:
            if slot.exists():  # else another process removed it meanwhile
                report.kept.append(f"{slot}: its repository is gone, but it is in use")
            continue
        try:
            size = _size(slot)
            if report.dry_run or worktree.remove_locked(slot):
                report.slots.append(slot)
                report.bytes_freed += size
            else:
                report.kept.append(f"{slot}: could not be removed")
        finally:
            os.close(fd)
    for grave in worktree.abandoned_graves(root):
        report.slots.append(grave)
        _remove(grave, report)


def _collect_artifacts(root: Path, cutoff: float, report: GcReport, pinned: dict[str, str]) -> None:
    for entry in _subdirs(root):
        # A cache hit touches meta.json; a build in progress writes its log there.
        why = pinned.get(entry.name.split("-", 1)[0])
        if why is not None and _last_write(entry) < cutoff:
            report.kept.append(f"{entry}: {why}")
        elif _last_write(entry) < cutoff:
            report.artifacts.append(entry)
            _remove(entry, report)
            continue
        for tmp in entry.glob(".*.tmp"):  # left by a killed build: a live one is written to
            _remove_stale(tmp, report)


def _remove_stale(tmp: Path, report: GcReport) -> None:
    """A temp file not written for a day: its writer was killed (a live one writes)."""
    st = _lstat(tmp)
    if st is not None and st.st_mtime < time.time() - DAY:
        report.bytes_freed += st.st_size
        if not report.dry_run:
            tmp.unlink(missing_ok=True)


def _remove_stale_stage(stage: Path, report: GcReport) -> None:
    """A userland image's staging folder not written for a day: its maker was killed (a
    live one writes its image). Most of it is hard links to the host's own files: only
    what has no other link is freed."""
    if _last_write(stage) >= time.time() - DAY:
        return
    for dirpath, _, filenames in os.walk(stage):
        for name in filenames:
            st = _lstat(Path(dirpath, name))
            if st is not None and st.st_nlink == 1:
                report.bytes_freed += st.st_size
    if not report.dry_run:
        shutil.rmtree(stage, ignore_errors=True)


def _lstat(path: Path) -> os.stat_result | None:
    """None when it went meanwhile (a build published it, another gc removed it)."""
    try:
        return path.lstat()
    except FileNotFoundError:
        return None


def _collect_files(
    root: Path, name: re.Pattern[str], cutoff: float, report: GcReport, into: list[Path]
) -> None:
    """Files kbisect named in root, not used (each use touches them) since the cut-off."""
    try:
        files = sorted(p for p in root.iterdir() if p.is_file() and not p.is_symlink())
    except FileNotFoundError:
        return
    for path in files:
        if TEMP_NAME.match(path.name):
            _remove_stale(path, report)
            continue
        st = _lstat(path) if name.match(path.name) else None
        if st is not None and st.st_mtime < cutoff:
            into.append(path)
            report.bytes_freed += st.st_size
            if not report.dry_run:
                path.unlink(missing_ok=True)


def _collect_prebuilt(cache: Path, cutoff: float, report: GcReport) -> None:
    """Prebuilt kernels (packages and what they unpacked to) and kernel lists not used
    for the cut-off: each use touches them."""
    unused = [
        *_subdirs(cache / "prebuilt" / "unpacked"),
        *_subdirs(cache / "kernel-lists"),
        *sorted((cache / "prebuilt" / "debs").glob("*.deb")),
    ]
    for path in unused:
        if path.is_dir():
            if _last_write(path) < cutoff:
                report.artifacts.append(path)
                _remove(path, report)
            continue
        st = _lstat(path)
        if st is not None and st.st_mtime < cutoff:
            report.artifacts.append(path)
            report.bytes_freed += st.st_size
            if not report.dry_run:
                path.unlink(missing_ok=True)


def _known_repos(slots: Path) -> set[Path]:
    repos = set()
    for owner in slots.glob("*-*/repo"):
        try:
            path = Path(owner.read_text().strip())
        except OSError:
            continue
        if path.is_absolute() and path.exists():
            repos.add(path)
    return repos


def _backport_trees(repo: Path, cutoff: float) -> dict[str, str]:
    """The trees (their first 20 hex digits, as artifact entries are named) of the test
    kernels of backports made since the cut-off, and of their targets: kept for the
    reviewer the backport's report points to, while its ref lasts."""
    git = Git(repo)
    try:
        tips = git.run("for-each-ref", "--format=%(refname)", BACKPORT_REFS).split()
    except InfraError:
        return {}
    kept: dict[str, str] = {}
    for ref in tips:
        made = _ref_time(git, ref)
        if made is not None and made < cutoff:
            continue
        # The series' commits are kbisect's (BACKPORT_IDENTITY); the first that is not is
        # the target the series was written on.
        # A series is a few commits (MAX_PREREQUISITES, the change, its follow-ups): never
        # the kernel's whole history.
        rows = git.run("rev-list", "--first-parent", "--format=%T %cn", "--max-count=64", ref)
        for line in rows.splitlines():
            if line.startswith("commit "):
                continue
            tree, _, who = line.partition(" ")
            kept[tree[:20]] = f"a backport's kernel ({ref} in {repo})"
            if who != BACKPORT_IDENTITY["GIT_COMMITTER_NAME"]:
                break
    return kept


def _collect_refs(repo: Path, cutoff: float, report: GcReport) -> None:
    git = Git(repo)
    try:
        kinds = (VERIFY_REFS, BACKPORT_REFS, PATCHED_REFS)
        refs = git.run("for-each-ref", "--format=%(refname)", *kinds).split()
    except InfraError as exc:
        report.kept.append(f"{repo}: not read ({exc})")
        return
    for ref in refs:
        made = _ref_time(git, ref)
        if made is None:
            report.kept.append(f"{repo} {ref}: age unknown (packed, no reflog)")
        elif made < cutoff:
            report.refs.append((repo, ref))
            if not report.dry_run:
                git.run("update-ref", "-d", ref)


def _ref_time(git: Git, ref: str) -> float | None:
    """When the ref was made: its reflog's or loose file's time; None if packed only."""
    for rel in (f"logs/{ref}", ref):
        path = git.run("rev-parse", "--path-format=absolute", "--git-path", rel).strip()
        try:
            return os.stat(path).st_mtime
        except OSError:
            continue
    return None


def _subdirs(root: Path) -> list[Path]:
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except FileNotFoundError:
        return []


def _last_write(path: Path) -> float:
    """The newest modification time of path and the files directly in it."""
    try:
        times, children = [path.lstat().st_mtime], list(path.iterdir())
    except FileNotFoundError:
        return time.time()  # gone meanwhile: something is working there
    for child in children:
        try:
            times.append(child.lstat().st_mtime)
        except FileNotFoundError:
            continue
    return max(times)


def _size(path: Path) -> int:
    """Bytes under path, each hard-linked file once, symlinks not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def _remove(path: Path, report: GcReport) -> None:
    size = _size(path)
    if not report.dry_run:
        shutil.rmtree(path, ignore_errors=True)
        if path.exists() or path.is_symlink():  # say only what went
            report.kept.append(f"{path}: could not be removed")
            for found in (report.runs, report.slots, report.artifacts):
                if path in found:
                    found.remove(path)
            return
    report.bytes_freed += size
