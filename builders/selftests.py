"""A kernel tree's selftests for one target, built once per (tree, target) into the cache.

`make -C tools/testing/selftests TARGETS=TARGET install` runs in a `git archive` of the
revision in a temporary folder of the cache (the user's checkout is never touched); the
install folder is kept as a gzip'd tar (the guest unpacks it), with the target's `config`
fragment and the runner's list of tests, under `selftests/<tree hash>-<target>/`, written
beside and renamed into place. A target that does not build is one line (UserError): the
selftests' revision is the user's choice.
"""

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import InfraError, UserError
from kbisect.infra.git import Git, git_argv, git_env
from kbisect.infra.printable import one_line

SELFTESTS = "tools/testing/selftests"
# What of a tree the selftests' makefiles read (the rest of a kernel tree is not needed).
TREE_PARTS = ("Makefile", "arch", "include", "scripts", "tools", "usr")
TARBALL, CONFIG, TESTS, META = "kselftest.tar.gz", "config", "kselftest-list.txt", "meta.json"
MAX_TARBALL_BYTES = 4 << 20  # what a testcase may ship to its guest (manifest.MAX_FILES_BYTES)
MAKE_SECONDS = 1800


@dataclass(frozen=True)
class Selftests:
    """A target's built selftests: the cache entry's folder and what it holds."""

    commit: str
    tree: str
    target: str
    folder: Path
    cached: bool = False  # found in the cache, not built now

    @property
    def tarball(self) -> Path:
        return self.folder / TARBALL

    @property
    def config(self) -> str:
        """The target's config fragment ("" when it has none)."""
        path = self.folder / CONFIG
        return path.read_text() if path.is_file() else ""

    @property
    def tests(self) -> list[str]:
        """`TARGET:TEST` for each test the runner knows."""
        return (self.folder / TESTS).read_text().split()


def entry_dir(cache: Path, tree: str, target: str) -> Path:
    return cache / "selftests" / f"{tree}-{target}"


def build(repo: Path, rev: str, target: str, cache: Path) -> Selftests:
    """The selftests of `target` at `rev` of `repo`, from the cache or built now.
    UserError: no such target there, or it does not build."""
    git = Git(repo)
    git.check_repo()
    commit = git.resolve(rev)
    tree = git.tree_of(commit)
    if not git.ok("cat-file", "-e", f"{commit}:{SELFTESTS}/{target}/Makefile"):
        raise UserError(
            f"no selftests target {target!r} at {commit[:12]}: {SELFTESTS}/{target}/Makefile "
            "is not there (ls that folder for the targets)"
        )
    folder = entry_dir(cache, tree, target)
    if (folder / META).is_file():
        return Selftests(commit, tree, target, folder, cached=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".build-"))
    try:
        partial = work / "entry"
        partial.mkdir()
        _build(git, commit, target, work, partial)
        (partial / META).write_text(json.dumps({"commit": commit, "tree": tree, "target": target}))
        try:
            partial.rename(folder)
        except OSError:
            if not (folder / META).is_file():  # not another builder's entry: a real fault
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Selftests(commit, tree, target, folder)


def _build(git: Git, commit: str, target: str, work: Path, entry: Path) -> None:
    src, install = work / "src", work / "install"
    src.mkdir()
    present = set(git.run("ls-tree", "--name-only", commit).split())
    _archive(git, commit, [p for p in TREE_PARTS if p in present], src)
    log = work / "make.log"
    argv = [
        "make",
        "-C",
        str(src / SELFTESTS),
        f"-j{os.cpu_count() or 1}",
        f"TARGETS={target}",
        f"KSFT_INSTALL_PATH={install}",
        "install",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")} | {"LC_ALL": "C"}
    with log.open("wb") as out:
        try:
            done = subprocess.run(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                timeout=MAKE_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise InfraError(f"selftests {target}: make ran over {MAKE_SECONDS} s") from exc
        except FileNotFoundError as exc:
            raise InfraError("make is not installed: run the README's install command") from exc
    if done.returncode != 0 or not (install / "run_kselftest.sh").is_file():
        raise UserError(
            f"selftests target {target!r} does not build at {commit[:12]} on this host: "
            f"{_last_line(log)} (try another --selftests-from)"
        )
    tar = ["tar", "-czf", str(entry / TARBALL), "--sort=name", "--owner=0", "--group=0"]
    subprocess.run([*tar, "--numeric-owner", "-C", str(install), "."], check=True, timeout=300)
    size = (entry / TARBALL).stat().st_size
    if size > MAX_TARBALL_BYTES:
        raise UserError(
            f"selftests target {target!r} installs {size / (1 << 20):.1f} MiB compressed, more "
            f"than the {MAX_TARBALL_BYTES >> 20} MiB a testcase may ship to its guest: name one "
            "test (kselftest:TARGET:TEST) of a smaller target"
        )
    listed = install / TESTS
    (entry / TESTS).write_text(listed.read_text() if listed.is_file() else "")
    config = f"{commit}:{SELFTESTS}/{target}/config"
    if git.ok("cat-file", "-e", config):
        (entry / CONFIG).write_text(git.run("show", config))


def _archive(git: Git, commit: str, parts: list[str], dst: Path) -> None:
    """`git archive` of those parts of the commit's tree, unpacked into `dst`."""
    archive = subprocess.Popen(
        git_argv(git.repo, "archive", "--format=tar", commit, "--", *parts),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=git_env(),
    )
    try:
        untar = subprocess.run(
            ["tar", "-x", "-C", str(dst)], stdin=archive.stdout, capture_output=True, check=False
        )
    finally:
        if archive.stdout is not None:
            archive.stdout.close()
        status = archive.wait()
    if status != 0 or untar.returncode != 0:
        raise InfraError(f"cannot unpack {commit[:12]}'s selftests (git archive, tar)")


def _last_line(log: Path) -> str:
    """The log's last compiler-style error line, else its last line (one printable
    line): make's own 'Error 2' lines say nothing."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln.lower()]
    return one_line((errors or lines or ["no output"])[-1], 200)
