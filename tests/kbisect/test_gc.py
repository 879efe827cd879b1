"""`kbisect gc`: what is old or orphaned goes, what is recent or in use stays."""

import fcntl
import os
import subprocess
import time
from pathlib import Path

import pytest

from kbisect.builders import cache_gc as gc
from kbisect.builders import worktree
from kbisect.builders.backport_series import write_series
from kbisect.builders.patched_commit import Patch, apply_patches
from kbisect.builders.verify_commit import make_verify_commit
from kbisect.errors import UserError
from kbisect.infra.git import LAB_IDENTITY, Git
from kbisect.settings import Settings

DAY = 86400.0


def _age(path: Path, days: float) -> None:
    """Make path and everything in it look last written `days` ago."""
    when = time.time() - days * DAY
    for p in [*path.rglob("*"), path] if path.is_dir() else [path]:
        os.utime(p, (when, when), follow_symlinks=False)


def _run_dir(cache: Path, days_ago: float, size: int = 1000) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() - days_ago * DAY))
    run = cache / "runs" / f"{stamp}-{os.urandom(4).hex()}"
    run.mkdir(parents=True)
    (run / "console.log").write_bytes(b"x" * size)
    _age(run, days_ago)
    return run


@pytest.fixture
def settings(cache: Path) -> Settings:
    return Settings.from_env()


def test_old_run_directories_go(settings: Settings, cache: Path) -> None:
    old, new = _run_dir(cache, 10, size=5000), _run_dir(cache, 1)
    for name in ("my-notes", "20241399-000000-0123abcd"):  # not names kbisect gives
        (cache / "runs" / name).mkdir()
        _age(cache / "runs" / name, 100)
    other = cache / "runs" / "my-notes"
    report = gc.collect(settings, older_than_days=7, dry_run=False)
    assert report.runs == [old] and not old.exists()
    assert new.exists() and other.exists()
    assert report.bytes_freed >= 5000


def test_a_run_still_being_written_stays(settings: Settings, cache: Path) -> None:
    """Named 10 days ago but its console is written now (a long job): in use."""
    run = _run_dir(cache, 10)
    (run / "console.log").write_text("still booting\n")
    assert gc.collect(settings, older_than_days=7, dry_run=False).runs == []
    assert run.exists()


def test_dry_run_removes_nothing(settings: Settings, cache: Path) -> None:
    old = _run_dir(cache, 10, size=5000)
    report = gc.collect(settings, older_than_days=7, dry_run=True)
    assert report.dry_run and report.runs == [old] and report.bytes_freed >= 5000
    assert old.exists()


def _repo(path: Path) -> tuple[Git, dict[str, str]]:
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    env = {**LAB_IDENTITY, "PATH": "/usr/bin:/bin", "HOME": str(path)}
    c = {}
    for i, name in enumerate(("base", "culprit", "later")):
        (path / f"f{i % 2}").write_text(f"{name}\n")
        subprocess.run(["git", "-C", str(path), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(path), "commit", "-qm", name], check=True, env=env)
        c[name] = Git(path).resolve("HEAD")
    return Git(path), c


def test_a_symlinked_slot_is_neither_written_through_nor_reported_removed(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "repo").write_text(str(tmp_path / "gone"))  # looks like an orphan's
    slots = cache / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    (slots / "abc-0").symlink_to(outside)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert not (outside / "lock").exists()  # no lock file made through the link
    assert report.slots == [] and (slots / "abc-0").is_symlink() and outside.exists()


def test_slots_of_deleted_repositories_go_unless_in_use(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    _repo(live)
    gone = tmp_path / "gone"
    _repo(gone)
    keep = worktree.slot_dir(live, 0)
    orphan, busy = worktree.slot_dir(gone, 0), worktree.slot_dir(gone, 1)
    (orphan / "src").mkdir()
    (orphan / "src" / "big").write_bytes(b"x" * 10_000)
    subprocess.run(["rm", "-rf", str(gone)], check=True)
    with open(busy / "lock", "w") as held:  # an orphaned compiler still writes there
        fcntl.flock(held, fcntl.LOCK_EX)
        report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.slots == [orphan] and not orphan.exists()
    assert keep.exists() and busy.exists()
    assert any(str(busy) in why for why in report.kept)
    assert report.bytes_freed >= 10_000


def test_a_slot_whose_remover_died_midway_goes_and_one_being_removed_stays(
    settings: Settings, cache: Path
) -> None:
    slots = cache / "slots"
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = slots / f"{worktree.GRAVE}abc-0-{dead.pid}"
    going = slots / f"{worktree.GRAVE}abc-1-{os.getpid()}"
    for grave in (left, going):
        (grave / "src").mkdir(parents=True)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.slots == [left] and not left.exists() and going.exists()


def test_artifacts_not_used_for_a_while_go(settings: Settings, cache: Path) -> None:
    arts = cache / "artifacts"
    unused, used = arts / "aaaa-1111", arts / "bbbb-2222"
    for d in (unused, used):
        d.mkdir(parents=True)
        (d / "bzImage").write_bytes(b"k" * 3000)
        (d / "meta.json").write_text("{}")
        _age(d, 40)
    os.utime(used / "meta.json")  # a cache hit marks it used
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.artifacts == [unused] and not unused.exists() and used.exists()
    assert report.bytes_freed >= 3000
    again = gc.collect(settings, older_than_days=30, dry_run=False, artifacts=False)
    assert again.artifacts == []


def test_temp_files_a_killed_build_left_go(settings: Settings, cache: Path) -> None:
    entry = cache / "artifacts" / "cccc-3333"
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text("{}")
    stale, live = entry / ".build.x1.log.tmp", entry / ".build.x2.log.tmp"
    stale.write_text("half a log")
    live.write_text("a log being written")
    _age(stale, 3)
    gc.collect(settings, older_than_days=30, dry_run=False)
    assert not stale.exists() and live.exists() and entry.exists()


def test_a_userland_image_a_killed_worker_was_making_goes(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    host_file = _file(tmp_path / "host" / "bin" / "fio", 0, 5000)
    stages = []
    for days in (3, 0):
        stage = cache / "images" / f".userland-{days}abcdefg"
        (stage / "root" / "bin").mkdir(parents=True)
        os.link(host_file, stage / "root" / "bin" / "fio")  # staged as a hard link
        _file(stage / "image", 0, 2000)  # the squashfs mksquashfs was writing
        _age(stage, days)
        stages.append(stage)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert not stages[0].exists() and stages[1].exists() and host_file.exists()
    assert report.bytes_freed == 2000  # the image; the host's file is still the host's


def test_old_verify_and_patched_refs_go_in_repositories_kbisect_built(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    git, c = _repo(tmp_path / "kernel")
    worktree.slot_dir(git.repo, 0)  # kbisect has built there: the slot names the repo
    old = make_verify_commit(git, c["culprit"], c["later"], revert=True).commit
    new = make_verify_commit(git, c["culprit"], c["base"], revert=False).commit
    revert = Patch("revert.diff", "revert", git.patch(c["culprit"], reverse=True))
    patched = apply_patches(git, c["later"], [revert]).tip  # `try --patch`'s kernel
    assert old and new
    common = Path(git.run("rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    for p in [*common.rglob(old), *common.rglob(patched)]:
        _age(p, 60)
    dry = gc.collect(settings, older_than_days=30, dry_run=True)
    assert sorted(dry.refs) == [
        (git.repo.resolve(), f"refs/kbisect/patched/{patched}"),
        (git.repo.resolve(), f"refs/kbisect/verify/{old}"),
    ]
    assert git.ok("rev-parse", "--verify", f"refs/kbisect/verify/{old}")
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert sorted(report.refs) == sorted(dry.refs)
    assert not git.ok("rev-parse", "--verify", f"refs/kbisect/verify/{old}")
    assert not git.ok("rev-parse", "--verify", f"refs/kbisect/patched/{patched}")
    assert git.ok("rev-parse", "--verify", f"refs/kbisect/verify/{new}")


def test_a_backports_two_kernels_stay_while_its_ref_does(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    git, c = _repo(tmp_path / "kernel")
    worktree.slot_dir(git.repo, 0)
    tip = write_series(git, c["base"], [c["culprit"]])  # the target base, with the series
    entries = [cache / "artifacts" / f"{git.tree_of(r)[:20]}-cfg" for r in (tip, c["base"])]
    other = cache / "artifacts" / "dddd-4444"
    for d in (*entries, other):
        d.mkdir(parents=True)
        (d / "meta.json").write_text("{}")
        _age(d, 40)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.artifacts == [other] and all(d.exists() for d in entries)
    assert sum("a backport's kernel" in why for why in report.kept) == 2
    common = Path(git.run("rev-parse", "--path-format=absolute", "--git-common-dir").strip())
    for p in common.rglob(tip):
        _age(p, 60)
    later = gc.collect(settings, older_than_days=30, dry_run=False)
    assert later.refs == [(git.repo.resolve(), f"refs/kbisect/backport/{tip}")]
    assert sorted(later.artifacts) == sorted(entries)


def test_a_verify_ref_of_unknown_age_stays(settings: Settings, cache: Path, tmp_path: Path) -> None:
    """Packed, with no reflog (made by an older kbisect): its age is not known."""
    git, c = _repo(tmp_path / "kernel")
    git.run("update-ref", "refs/kbisect/verify/x", c["later"])
    git.run("pack-refs", "--all")
    report = gc.collect(settings, older_than_days=0, dry_run=False, repos=[git.repo])
    assert report.refs == [] and git.ok("rev-parse", "--verify", "refs/kbisect/verify/x")
    assert any("refs/kbisect/verify/x" in why for why in report.kept)


def test_a_missing_cache_is_nothing_to_do(settings: Settings) -> None:
    report = gc.collect(settings, older_than_days=1, dry_run=False)
    assert report.bytes_freed == 0 and report.removed_count() == 0


def test_a_negative_age_is_refused(settings: Settings) -> None:
    with pytest.raises(UserError, match="0 or more"):
        gc.collect(settings, older_than_days=-1, dry_run=True)


def test_prebuilt_kernels_and_kernel_lists_not_used_for_a_while_go(
    settings: Settings, cache: Path, tmp_path: Path
) -> None:
    from kbisect.builders import kernel_list, prebuilt
    from tests.builders.test_prebuilt import make_deb

    old = prebuilt.resolve(str(make_deb(tmp_path, "6.1.0-1-cloud-amd64")), settings)
    new = prebuilt.resolve(str(make_deb(tmp_path, "6.1.0-2-cloud-amd64")), settings)
    stale_deb = cache / "prebuilt" / "debs" / "linux-image-x_1_amd64.deb"
    stale_deb.parent.mkdir(parents=True)
    stale_deb.write_bytes(b"d" * 500)
    listed = kernel_list.make(["linux-image-a", "linux-image-b"], settings)
    unpacked_old = Path(old.artifact.kernel).parents[1]
    for path in (unpacked_old, Path(new.artifact.kernel).parents[1], stale_deb, listed.repo):
        _age(path, 40)
    prebuilt.resolve(
        str(tmp_path / "linux-image-6.1.0-2-cloud-amd64_6.1.170-3_amd64.deb"), settings
    )
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert sorted(report.artifacts) == sorted([unpacked_old, stale_deb, listed.repo])
    assert Path(new.artifact.kernel).exists() and not unpacked_old.exists()


def _file(path: Path, days_ago: float, size: int = 100) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    _age(path, days_ago)
    return path


def test_guest_images_and_job_configs_not_used_for_a_while_go(
    settings: Settings, cache: Path
) -> None:
    old_image = _file(cache / "images" / "0123456789abcdef01234567.cpio", 40, 4000)
    new_image = _file(cache / "images" / "fedcba9876543210fedcba98.cpio", 1)
    old_userland = _file(cache / "images" / "0123456789abcdef01234568.squashfs", 40, 4000)
    old_config = _file(cache / "configs" / "0123456789abcdef01234567.config", 40, 3000)
    new_config = _file(cache / "configs" / "fedcba9876543210fedcba98.config", 1)
    old_fixup = _file(cache / "patches" / "0123456789abcdef01234567.patch", 40, 1000)
    new_fixup = _file(cache / "patches" / "fedcba9876543210fedcba98.patch", 1)
    mine = _file(cache / "configs" / "my-notes.txt", 40)  # not a name kbisect gives
    torn = _file(cache / "images" / "aaaaaaaaaaaaaaaaaaaaaaaa.tmp", 3)  # a killed writer's
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert sorted(report.images) == [old_image, old_userland]
    assert report.configs == [old_config, old_fixup]
    assert not old_image.exists() and not old_config.exists() and not torn.exists()
    assert not old_fixup.exists() and new_fixup.exists()
    assert new_image.exists() and new_config.exists() and mine.exists()
    assert report.bytes_freed >= 12000 and report.removed_count() == 4


def test_a_guest_image_or_config_in_use_is_marked_used(settings: Settings, cache: Path) -> None:
    """A boot reuses the cached image, a job's build reads its config, a new job stores
    a config another stored weeks ago: each use marks it, so gc keeps it."""
    from kbisect.builders import kconfig
    from kbisect.infra import initramfs

    image = Path(initramfs.build_image([], b"echo a\n", {}).initramfs)
    config = Path(kconfig.store_config("CONFIG_X=y\n", cache))
    for path in (image, config):
        _age(path, 40)
    assert initramfs.build_image([], b"echo a\n", {}).initramfs == str(image)
    assert kconfig.store_config("CONFIG_X=y\n", cache) == str(config)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.images == [] and report.configs == [] and image.exists() and config.exists()
    _age(config, 40)
    assert kconfig.stored_config(str(config)) == "CONFIG_X=y\n"
    assert gc.collect(settings, older_than_days=30, dry_run=False).configs == []


def test_a_file_that_goes_while_gc_looks_is_skipped(
    settings: Settings, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build publishes (renames) its temp log, another gc removes a package, while this
    one looks: gc goes on with the rest."""
    entry = cache / "artifacts" / "cccc-3333"
    entry.mkdir(parents=True)
    (entry / "meta.json").write_text("{}")
    tmp = _file(entry / ".build.x1.log.tmp", 3)
    deb = _file(cache / "prebuilt" / "debs" / "linux-image-x_1_amd64.deb", 40)
    old = _run_dir(cache, 40)
    real_lstat = Path.lstat

    def vanishing(self: Path) -> os.stat_result:
        if self in (tmp, deb):
            self.unlink(missing_ok=True)
        return real_lstat(self)

    monkeypatch.setattr(Path, "lstat", vanishing)
    report = gc.collect(settings, older_than_days=30, dry_run=False)
    assert report.runs == [old] and not old.exists()
