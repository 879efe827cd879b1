"""The reproduction lab: a kernel git history with a known culprit, built from Debian's source.

The tarball is imported once into a cached base repository (deterministic hash); each
lab is a hardlinked bare clone of it plus N commits written through git plumbing with a
temporary index, so no 1.5 GB checkout is needed. The truth goes beside the repository.
"""

import fcntl
import hashlib
import json
import random
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbisect import settings
from kbisect.contract import Mode
from kbisect.errors import InfraError, UserError
from kbisect.infra.git import LAB_IDENTITY, Git, git_argv, git_env
from kbisect.infra.lab_culprits import (
    NVME_CORE,
    PREREQ_SUBJECT,
    SEED_CULPRIT,
    Culprit,
    add_prerequisite,
)
from kbisect.infra.lab_distro import DISTRO_BRANCH, DISTRO_TAG, DistroCommit, write_distro
from kbisect.infra.lab_plan import Kind, LabPlan, PlannedCommit, Span, make_plan

# .c files that the base config (tinyconfig + QEMU guest needs) compiles: a filler
# there costs the bisection a rebuild, as a real commit would.
BUILT_FILES = (
    "kernel/fork.c",
    "kernel/exit.c",
    "kernel/signal.c",
    "kernel/softirq.c",
    "kernel/resource.c",
    "kernel/sysctl.c",
    "kernel/params.c",
    "kernel/kthread.c",
    "kernel/workqueue.c",
    "kernel/notifier.c",
    "kernel/sched/core.c",
    "kernel/time/timer.c",
    "kernel/irq/manage.c",
    "kernel/printk/printk.c",
    "mm/filemap.c",
    "mm/page_alloc.c",
    "mm/memory.c",
    "mm/vmscan.c",
    "mm/readahead.c",
    "mm/slub.c",
    "mm/util.c",
    "fs/namei.c",
    "fs/read_write.c",
    "fs/super.c",
    "fs/dcache.c",
    "fs/inode.c",
    "fs/block_dev.c",
    "fs/exec.c",
    "block/blk-core.c",
    "block/blk-merge.c",
    "block/blk-mq.c",
    "block/genhd.c",
    "block/bio.c",
    "block/blk-settings.c",
    "lib/string.c",
    "lib/vsprintf.c",
    "lib/bitmap.c",
    "lib/kobject.c",
    "drivers/base/core.c",
    "drivers/base/bus.c",
    "drivers/pci/probe.c",
    "drivers/tty/serial/8250/8250_core.c",
    "drivers/md/dm.c",
    "drivers/md/dm-table.c",
    "drivers/md/dm-snap.c",
    "drivers/nvme/host/pci.c",
    "arch/x86/kernel/setup.c",
    "arch/x86/mm/init.c",
)
# Directories the base config never builds.
UNBUILT_DIRS = ("sound/pci", "fs/btrfs", "drivers/gpu/drm/amd/display/dc", "net/wireless")
# Files whose breakage is visible: a compile error / a panic during boot.
BUILD_BREAK_FILES = ("kernel/sys.c", "mm/mmap.c", "fs/open.c", "lib/sort.c")
BOOT_BREAK_FILES = ("init/main.c", "kernel/panic.c", "kernel/reboot.c", "kernel/cpu.c")

AUTHORS = (
    ("Ada Kernel", "ada@example.org"),
    ("Bo Maintainer", "bo@example.org"),
    ("Cy Storage", "cy@example.org"),
    ("Di Memory", "di@example.org"),
)
IMPORT_DATE = 1767225600  # 2026-01-01T00:00:00Z; fixed so the base commit hash is stable


@dataclass(frozen=True)
class LabOptions:
    commits: int = 64
    mode: str = Mode.REGRESSION.value
    culprit_at: int | None = None
    culprit_patch: Path | None = None
    culprit: Culprit = SEED_CULPRIT  # what the culprit does, when not a patch
    merges: int = 0
    broken_build: tuple[Span, ...] = ()
    broken_boot: tuple[Span, ...] = ()
    seed: int | None = None
    replace: bool = False  # remove an existing lab (and only a lab) at the destination
    distro: int = 0  # fix mode: commits of a distro branch forked from the old endpoint
    fix_needs_prereq: bool = False  # the fix's context needs an upstream refactor before it


LAB_MARK = "kbisect.lab"  # git config of a lab's repository, set when kbisect makes it


def truth_path(lab: Path) -> Path:
    lab = Path(lab).resolve()
    return lab.with_name(lab.name + ".truth.json")


def base_repo_path(tarball: Path) -> Path:
    """Where the import of this tarball is cached (its refs/heads/import, once made)."""
    st = tarball.stat()
    key = hashlib.sha256(f"{tarball.name}:{st.st_size}:{int(st.st_mtime)}".encode()).hexdigest()
    return settings.cache_dir() / "lab-base" / f"{tarball.name.split('.tar')[0]}-{key[:12]}.git"


def _base_repo(progress: Callable[[str], None]) -> tuple[Path, str]:
    """The cached import of the kernel source tarball: (repo, commit)."""
    tarball = settings.KERNEL_SOURCE_TARBALL
    if not tarball.exists():
        raise InfraError(
            f"{tarball} is missing: install Debian's linux-source-6.1 (README install command)"
        )
    base = base_repo_path(tarball)
    if (base / "refs/heads/import").exists():
        return base, Git(base).run("rev-parse", "refs/heads/import").strip()
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(base.parent / "import.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two labs made at once: one import, the other waits
        if (base / "refs/heads/import").exists():
            return base, Git(base).run("rev-parse", "refs/heads/import").strip()
        return _import(tarball, base, progress)


def _import(tarball: Path, base: Path, progress: Callable[[str], None]) -> tuple[Path, str]:
    progress(f"importing {tarball.name} into the lab base (once per machine)")
    tmp_root = Path(tempfile.mkdtemp(dir=base.parent.parent, prefix="import-"))
    try:
        git_tmp = tmp_root / "base.git"
        subprocess.run(git_argv(tmp_root, "init", "-q", "--bare", str(git_tmp)), check=True)
        gt = Git(git_tmp)
        gt.run("config", "core.looseCompression", "1")
        (tmp_root / "src").mkdir()
        # tar(1) unpacks in seconds where Python's tarfile takes minutes.
        subprocess.run(
            ["tar", "-xf", str(tarball), "-C", str(tmp_root / "src")],
            check=True,
            capture_output=True,
        )
        (top,) = list((tmp_root / "src").iterdir())
        env = {
            "GIT_DIR": str(git_tmp),
            "GIT_WORK_TREE": str(top),
            "GIT_INDEX_FILE": str(tmp_root / "index"),
        }
        Git(top).run("add", "-A", "-f", ".", env=env)  # Debian's .gitignore ends in "/*"
        tree = gt.run("write-tree", env=env).strip()
        if not gt.ok("cat-file", "-e", f"{tree}:Makefile"):
            raise InfraError(f"importing {tarball} produced no kernel tree")
        version = _kernel_version(top)
        commit = _commit_tree(
            gt,
            tree,
            [],
            f"Import Linux {version} from Debian linux-source",
            IMPORT_DATE,
            AUTHORS[0],
            signed=False,
        )
        gt.run("update-ref", "refs/heads/import", commit)
        # One pack without deltas (one import has no history to delta against): a clone
        # of a lab over a URL (`kbisect tree add NAME file://LAB`) then copies it as it is,
        # not compressing 83,000 loose objects again (8 s, not 54 s, on 2 cores).
        gt.run("config", "pack.compression", "1")
        gt.run("repack", "-a", "-d", "-q", "--window=0")
        git_tmp.rename(base)
        return base, commit
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


def _kernel_version(top: Path) -> str:
    fields: dict[str, str] = {}
    for line in (top / "Makefile").read_text().splitlines()[:6]:
        k, _, v = line.partition("=")
        fields[k.strip()] = v.strip()
    return f"{fields.get('VERSION')}.{fields.get('PATCHLEVEL')}.{fields.get('SUBLEVEL')}"


def _commit_tree(
    git: Git,
    tree: str,
    parents: list[str],
    message: str,
    when: int,
    author: tuple[str, str],
    signed: bool = True,
) -> str:
    """A commit by `author`. Its message ends in the author's Signed-off-by, as every
    upstream kernel commit's does (checkpatch's NO_AUTHOR_SIGN_OFF wants it in a patch
    made from it); only the cached import, whose hash must not change, has none."""
    if signed:
        message = f"{message}\n\nSigned-off-by: {author[0]} <{author[1]}>"
    env = {
        **LAB_IDENTITY,
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_AUTHOR_DATE": f"{when} +0000",
        "GIT_COMMITTER_DATE": f"{when} +0000",
    }
    args = ["commit-tree", tree]
    for p in parents:
        args += ["-p", p]
    return git.run(*args, "-m", message, env=env).strip()


class _Writer:
    """Writes lab commits into a bare repository through per-branch temporary indexes."""

    def __init__(self, git: Git, workdir: Path) -> None:
        self.git = git
        self.workdir = workdir

    def index_at(self, name: str, tree: str) -> dict[str, str]:
        env = {"GIT_INDEX_FILE": str(self.workdir / f"{name}.index")}
        self.git.run("read-tree", tree, env=env)
        return env

    def read(self, tree: str, path: str) -> str:
        return self.git.run("cat-file", "blob", f"{tree}:{path}")

    def exists(self, tree: str, path: str) -> bool:
        return self.git.ok("cat-file", "-e", f"{tree}:{path}")

    def merge(self, side: str, ours: str, theirs: str) -> str:
        """The tree of a real three-way merge of two commits: a side branch's change to a
        file the main line changed too (the culprit's file) keeps both changes."""
        out = subprocess.run(
            git_argv(self.git.repo, "merge-tree", "--write-tree", "--name-only", ours, theirs),
            env=git_env(None),
            capture_output=True,
            check=False,
        )
        tree, _, conflicts = out.stdout.decode(errors="replace").partition("\n")
        if out.returncode == 1:  # the conflicted paths, then a blank line, then messages
            paths = ", ".join(dict.fromkeys(conflicts.partition("\n\n")[0].split("\n")))
            raise UserError(
                f"lab: merging {side} conflicts in {paths} (the culprit's change against "
                "a side branch's): pick another --seed or --culprit-at"
            )
        if out.returncode != 0 or not tree.strip():
            err = out.stderr.decode(errors="replace").strip().splitlines()
            raise InfraError(f"git merge-tree failed in {self.git.repo}: {err[-1:]}")
        return tree.strip()

    def write(self, env: dict[str, str], path: str, text: str) -> None:
        blob = self.git.run("hash-object", "-w", "--stdin", input=text.encode()).strip()
        self.git.run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)

    def apply(
        self, env: dict[str, str], patch: Path, reverse: bool, where: str, hint: str = ""
    ) -> None:
        args = ["apply", "--cached"] + (["-R"] if reverse else []) + [str(patch)]
        out = subprocess.run(
            git_argv(self.git.repo, *args),
            env=git_env({**env, "PATH": "/usr/bin:/bin"}),
            capture_output=True,
            check=False,
        )
        if out.returncode != 0:
            raise UserError(
                f"--culprit-patch {patch} does not apply to {where}: "
                f"{out.stderr.decode(errors='replace').strip().splitlines()[-1:]}{hint}"
            )

    def tree(self, env: dict[str, str]) -> str:
        return self.git.run("write-tree", env=env).strip()


def _break_build(text: str, idx: int) -> str:
    return text + (
        f"\nint kbisect_lab_build_break_{idx}(void)\n{{\n"
        f"\treturn kbisect_lab_undefined_{idx};\n}}\n"
    )


def _break_boot(text: str, idx: int) -> str:
    return text + (
        f"\nstatic int __init kbisect_lab_boot_break_{idx}(void)\n{{\n"
        f'\tpanic("kbisect lab: this kernel does not boot ({idx})");\n'
        "\treturn 0;\n}\nlate_initcall(kbisect_lab_boot_break_" + f"{idx});\n"
    )


def _subject(kind: Kind, path: str, pos: int, rng: random.Random) -> str:
    subsys = "/".join(Path(path).parent.parts[:2]) if path else "lab"
    verbs = ("tidy up", "clarify", "document", "annotate", "comment on")
    things = ("locking", "error paths", "helper", "fast path", "init order", "limits")
    if kind is Kind.FILLER:
        return f"{subsys}: {rng.choice(verbs)} {rng.choice(things)}"
    if kind is Kind.BREAK_BUILD:
        return f"{subsys}: add helper for upcoming rework"
    if kind is Kind.FIX_BUILD:
        return f'Revert "{subsys}: add helper for upcoming rework"'
    if kind is Kind.BREAK_BOOT:
        return f"{subsys}: add early sanity check"
    if kind is Kind.FIX_BOOT:
        return f'Revert "{subsys}: add early sanity check"'
    return f"Merge branch 'topic-{pos}'"


def create_lab(
    dest: Path, options: LabOptions, progress: Callable[[str], None] = lambda _: None
) -> dict[str, object]:
    """Make the lab at dest. It is built in a hidden directory beside dest and moved into
    place when finished: a failed or killed run leaves nothing that blocks the next."""
    given = Path(dest)
    dest = given.resolve()
    _check_destination(given, dest, options.replace)
    if options.culprit_patch is not None:
        if not options.culprit_patch.is_file():
            raise UserError(f"--culprit-patch {options.culprit_patch} is not a file")
        # git applies it from inside the lab's worktree: a path relative to here is not there
        options = replace(options, culprit_patch=options.culprit_patch.resolve())
    _check_distro(options)
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(2**31)
    plan = make_plan(
        options.commits,
        mode=options.mode,
        culprit_at=options.culprit_at,
        merges=options.merges,
        broken_build=list(options.broken_build),
        broken_boot=list(options.broken_boot),
        seed=seed,
        prereq=options.fix_needs_prereq,
    )
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.partial-"))
    except OSError as exc:
        raise UserError(
            f"cannot create the lab in {given}: {exc.strerror or exc}; pick another directory"
        ) from exc
    try:
        truth = _make(partial, dest, plan, options, seed, progress)
        if options.replace and dest.exists():
            shutil.rmtree(dest)
            truth_path(dest).unlink(missing_ok=True)
        partial.rename(dest)  # over an empty directory too
    except OSError as exc:
        raise InfraError(f"cannot create the lab in {given}: {exc}") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    truth_path(dest).write_text(json.dumps(truth, indent=2) + "\n")
    return truth


def _check_distro(options: LabOptions) -> None:
    """--distro and --fix-needs-prereq make the seed's shape: a fix-mode lab of nomerges."""
    if options.distro < 0:
        raise UserError(f"--distro {options.distro}: give the distro branch's commits, 1 or more")
    if options.distro and options.mode != Mode.FIX:
        raise UserError("--distro makes a distro branch that lacks a fix: add --mode fix")
    if options.fix_needs_prereq and not options.distro:
        raise UserError("--fix-needs-prereq is for a distro branch: add --distro N")
    if options.fix_needs_prereq and (options.culprit_patch or options.culprit.kind != "nomerges"):
        raise UserError(
            "--fix-needs-prereq refactors the lines after the nomerges fix: use the default "
            "--culprit nomerges"
        )


def _check_destination(given: Path, dest: Path, replace: bool) -> None:
    """Bad input before anything slow: a file, a non-empty directory that is no lab."""
    if dest.exists() and not dest.is_dir():
        raise UserError(f"{given} exists and is not a directory: pick a new directory for the lab")
    if not dest.exists() or not any(dest.iterdir()):
        return
    is_lab = _is_lab(dest)
    unfinished = (
        not is_lab
        and (dest / "HEAD").is_file()
        and Git(dest).ok("config", "--get", LAB_MARK)  # only kbisect marks one
        and Git(dest).ok("rev-parse", "--verify", "-q", "refs/heads/import")
    )
    if replace and not (is_lab or unfinished):
        raise UserError(
            f"{given} is not a kbisect lab (its {truth_path(dest).name} and its lab-good and "
            "lab-bad tags do not agree): not replacing it"
        )
    if unfinished and not replace:
        raise UserError(
            f"{given} holds a lab that was never finished: pass --replace to make it again"
        )
    if not replace:
        raise UserError(
            f"{given} exists and is not empty: pick a new directory for the lab "
            "(or --replace, for a lab)"
        )


def _is_lab(dest: Path) -> bool:
    """A lab kbisect made: a git repository whose lab-good and lab-bad tags are the
    endpoints its truth file (beside it) names. Another folder with a stray truth file, or
    a repository with an `import` branch, is not one, and --replace leaves it alone."""
    try:
        truth = json.loads(truth_path(dest).read_text())
        want = [str(truth["good"]), str(truth["bad"])]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    git = Git(dest)
    tags = ("lab-good", "lab-bad")
    got = [
        git.run("rev-parse", "--verify", "-q", f"refs/tags/{t}^{{commit}}", check=False).strip()
        for t in tags
    ]
    return (dest / "HEAD").is_file() and got == want


def _make(
    repo: Path,
    dest: Path,
    plan: LabPlan,
    options: LabOptions,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, object]:
    """The lab's repository written at `repo` (to be moved to `dest`); its truth."""
    base, import_commit = _base_repo(progress)
    progress(f"cloning the lab base into {dest}")
    out = subprocess.run(
        git_argv(base, "clone", "-q", "--bare", "--local", str(base), str(repo)),
        check=False,
        capture_output=True,
    )
    if out.returncode != 0:
        err = out.stderr.decode(errors="replace").strip().splitlines()
        raise InfraError(f"git clone of the lab base failed: {err[-1] if err else '?'}")
    git = Git(repo)
    git.run("config", LAB_MARK, "true")
    git.run("config", "pack.window", "0")  # serving a clone: the base's pack, no delta search
    with tempfile.TemporaryDirectory(prefix="kbisect-lab-") as tmp:
        w = _Writer(git, Path(tmp))
        hashes, trees, files = _write_history(w, plan, import_commit, options, seed, progress)
        distro = _distro(w, plan, hashes, trees, files, options, seed)
    git.run("update-ref", "refs/heads/master", hashes[plan.commits[-1].pos])
    git.run("symbolic-ref", "HEAD", "refs/heads/master")
    git.run("update-ref", "-d", "refs/heads/import")
    truth = _truth(plan, hashes, seed, options)
    _check_truth(git, plan, hashes, truth)
    if distro:
        git.run("update-ref", f"refs/heads/{DISTRO_BRANCH}", distro[-1].hash)
        git.run("tag", DISTRO_TAG, distro[-1].hash)
        truth["distro"] = {
            "tip": distro[-1].hash,
            "base": hashes[0],
            "branch": DISTRO_BRANCH,
            "commits": [d.to_json() for d in distro],
        }
    # The endpoints as a user passes them (never the culprit): `--good lab-good --bad lab-bad`.
    git.run("tag", "lab-good", str(truth["good"]))
    git.run("tag", "lab-bad", str(truth["bad"]))
    return truth


@dataclass
class _Files:
    """Files the fillers edit, shuffled: built ones cost a rebuild, unbuilt ones do not."""

    import_tree: str
    built: list[str]
    unbuilt: list[str]


def _write_history(
    w: "_Writer",
    plan: LabPlan,
    import_commit: str,
    options: LabOptions,
    seed: int,
    progress: Callable[[str], None],
) -> tuple[dict[int, str], dict[int, str], "_Files"]:
    rng = random.Random(seed ^ 0x5EED)
    git = w.git
    files = _filler_files(git, import_commit, rng)
    when = IMPORT_DATE + 86400
    hashes, trees = _old_endpoint(w, git, plan, import_commit, options, when)
    envs: dict[str, dict[str, str]] = {}
    branch_positions: dict[str, set[int]] = {}
    for c in plan.commits:
        branch_positions.setdefault(c.branch, set()).add(c.pos)
    for c in plan.commits:
        when += 3600
        parent_tree = trees[c.parents[0]]
        if c.kind is Kind.MERGE:
            side = plan.commits[c.parents[1] - 1].branch
            parent_tree = w.merge(side, hashes[c.parents[0]], hashes[c.parents[1]])
        if c.kind is Kind.MERGE or c.parents[0] not in branch_positions[c.branch]:
            # first commit of a branch (or of main after the old endpoint): fork its index
            envs[c.branch] = w.index_at(c.branch, parent_tree)
        env = envs[c.branch]
        path = _change(w, env, plan, c, parent_tree, files, options, rng)
        trees[c.pos] = w.tree(env)
        subject = (
            _culprit_subject(plan.mode, options)
            if c.kind is Kind.CULPRIT
            else PREREQ_SUBJECT
            if c.kind is Kind.PREREQ
            else _subject(c.kind, path, c.pos, rng)
        )
        hashes[c.pos] = _commit_tree(
            git,
            trees[c.pos],
            [hashes[p] for p in c.parents],
            subject,
            when,
            AUTHORS[rng.randrange(len(AUTHORS))],
        )
        if c.pos % 8 == 0:
            progress(f"lab commit {c.pos}/{len(plan.commits)}")
    return hashes, trees, files


def _distro(
    w: "_Writer",
    plan: LabPlan,
    hashes: dict[int, str],
    trees: dict[int, str],
    files: "_Files",
    options: LabOptions,
    seed: int,
) -> list[DistroCommit]:
    """The distro branch (--distro N) on the old endpoint, after the main line is written:
    its picks take the main line's plain commits, under new hashes."""
    if not options.distro:
        return []
    upstream = [hashes[c.pos] for c in plan.commits if c.kind is Kind.FILLER and c.branch == "main"]
    when = IMPORT_DATE + 86400 + 3600 * (len(plan.commits) + 1)
    rng = random.Random(seed ^ 0xD15C0)
    return write_distro(
        w, _commit_tree, (hashes[0], trees[0]), upstream, files.unbuilt, options.distro, when, rng
    )


def _filler_files(git: Git, import_commit: str, rng: random.Random) -> _Files:
    import_tree = git.tree_of(import_commit)
    built = [p for p in BUILT_FILES if git.ok("cat-file", "-e", f"{import_tree}:{p}")]
    unbuilt = [
        p
        for p in git.run("ls-tree", "-r", "--name-only", import_tree, "--", *UNBUILT_DIRS).split()
        if p.endswith(".c")
    ]
    rng.shuffle(built)
    rng.shuffle(unbuilt)
    return _Files(import_tree, built, unbuilt)


def _old_endpoint(
    w: "_Writer", git: Git, plan: LabPlan, import_commit: str, options: LabOptions, when: int
) -> tuple[dict[int, str], dict[int, str]]:
    """Position 0: the import, or in fix mode the import with the bug the culprit removes."""
    import_tree = git.tree_of(import_commit)
    if not plan.old_buggy:
        return {0: import_commit}, {0: import_tree}
    env = w.index_at("old", import_tree)
    if options.culprit_patch:
        w.apply(env, options.culprit_patch, reverse=False, where="the lab base")
    else:
        path = options.culprit.path
        w.write(env, path, options.culprit.add(w.read(import_tree, path)))
    tree = w.tree(env)
    subject = (
        "nvme: don't merge requests on namespace queues"
        if options.culprit.kind == "nomerges"
        else options.culprit.subject
    )
    return {0: _commit_tree(git, tree, [import_commit], subject, when, AUTHORS[2])}, {0: tree}


def _filler_base(w: "_Writer", parent_tree: str, path: str) -> str:
    """The text a filler edits: the file as its parent has it (the culprit's change too).
    Apart so that a test can bring back the old bug and see the truth check catch it."""
    return w.read(parent_tree, path)


def _change(
    w: "_Writer",
    env: dict[str, str],
    plan: LabPlan,
    c: PlannedCommit,
    parent_tree: str,
    files: _Files,
    options: LabOptions,
    rng: random.Random,
) -> str:
    """Write commit c's change into its index; the path it changed ('' for a patch or a
    merge). Every edit starts from the file as it is in the parent's tree, never from the
    import: an edit of the culprit's file must keep the culprit's change."""
    if c.kind is Kind.MERGE:
        return ""  # its index already holds the merged tree
    if c.kind is Kind.CULPRIT:
        if options.culprit_patch:
            # The base took it (checked first), so commits before it edited its lines.
            w.apply(
                env,
                options.culprit_patch,
                reverse=plan.mode == Mode.FIX,
                where=f"the lab at position {c.pos}",
                hint="; a commit before it edited those lines: pick another --culprit-at or --seed",
            )
            return ""
        path = options.culprit.path
        text = w.read(parent_tree, path)
        text = (
            options.culprit.add(text)
            if plan.mode == Mode.REGRESSION
            else options.culprit.remove(text)
        )
        w.write(env, path, text)
        return path
    if c.kind is Kind.PREREQ:
        w.write(env, NVME_CORE, add_prerequisite(w.read(parent_tree, NVME_CORE)))
        return NVME_CORE
    if c.kind in (Kind.BREAK_BUILD, Kind.BREAK_BOOT, Kind.FIX_BUILD, Kind.FIX_BOOT):
        build = c.kind in (Kind.BREAK_BUILD, Kind.FIX_BUILD)
        pool = BUILD_BREAK_FILES if build else BOOT_BREAK_FILES
        path = pool[c.span % len(pool)]
        breakage = (_break_build if build else _break_boot)("", c.span)
        text = w.read(parent_tree, path)
        if c.kind in (Kind.BREAK_BUILD, Kind.BREAK_BOOT):
            text += breakage
        else:  # the revert takes out what its break added, and nothing else
            head, found, tail = text.rpartition(breakage)
            if not found:
                raise InfraError(f"lab: {path} lost the breakage that commit {c.pos} reverts")
            text = head + tail
        w.write(env, path, text)
        return path
    path = _filler_path(w, plan, c, parent_tree, files)
    # A real change to the object code (a new global), not only to the text: a built
    # filler makes a new image that behaves like its parent's, as most real commits do.
    mark = f"{rng.getrandbits(32):08x}"
    text = _filler_base(w, parent_tree, path) + (
        f'\n/* lab change {c.pos} */\nconst char kbisect_lab_change_{c.pos}[] = "{mark}";\n'
    )
    w.write(env, path, text)
    return path


def _filler_path(
    w: "_Writer", plan: LabPlan, c: PlannedCommit, parent_tree: str, files: _Files
) -> str:
    """The next file for a filler: two thirds built (cost a rebuild), the rest unbuilt;
    one a culprit patch deleted is passed over."""
    fillers = files.built if (c.pos % 3 and files.built) or not files.unbuilt else files.unbuilt
    while fillers:
        path = fillers.pop()
        if w.exists(parent_tree, path):
            return path
    raise UserError(f"--commits {len(plan.commits)} is more fillers than the lab has files for")


def _culprit_subject(mode: str, options: LabOptions) -> str:
    if options.culprit_patch:
        for line in options.culprit_patch.read_text(errors="replace").splitlines():
            if line.startswith("Subject:"):
                return line.removeprefix("Subject:").strip().removeprefix("[PATCH]").strip()
        return f"Apply {options.culprit_patch.name}"
    if mode == Mode.REGRESSION or options.culprit.kind != "nomerges":
        return options.culprit.subject
    return "NVMe: Allow request merges"


def _truth(
    plan: LabPlan, hashes: dict[int, str], seed: int, options: LabOptions
) -> dict[str, object]:
    old, new = hashes[0], hashes[plan.commits[-1].pos]
    return {
        "mode": plan.mode,
        "culprit": hashes[plan.culprit],
        "culprit_position": plan.culprit,
        # as a user passes them: in fix mode the old revision is the bad one
        "good": old if plan.mode == Mode.REGRESSION else new,
        "bad": new if plan.mode == Mode.REGRESSION else old,
        "old": old,
        "new": new,
        "broken_build": [hashes[p] for p in plan.positions("build_broken")],
        "broken_boot": [hashes[p] for p in plan.positions("boot_broken")],
        "merges": [hashes[c.pos] for c in plan.commits if c.kind is Kind.MERGE],
        "prerequisite": next((hashes[c.pos] for c in plan.commits if c.kind is Kind.PREREQ), None),
        "distro": None,
        "seed": seed,
        "commits": options.commits,
        "culprit_patch": str(options.culprit_patch) if options.culprit_patch else None,
        "culprit_kind": None if options.culprit_patch else str(options.culprit),
        "history": [
            {"position": c.pos, "hash": hashes[c.pos], "kind": c.kind.value, "branch": c.branch}
            for c in plan.commits
        ],
    }


@dataclass
class _Hunk:
    """One hunk of a `git diff -U0`: the lines it spans on each side, 0-based [start, end)
    (an empty span is the gap before line `start`), and the text it removes and adds."""

    old: tuple[int, int]
    new: tuple[int, int]
    removed: str = ""
    added: str = ""


@dataclass
class _FileDiff:
    path: str = ""
    created_or_deleted: bool = False
    hunks: list[_Hunk] = field(default_factory=list)


def _check_truth(git: Git, plan: LabPlan, hashes: dict[int, str], truth: dict[str, object]) -> None:
    """Every commit has the culprit's change exactly where the truth says it has (the last
    commit first: lab-bad, or in fix mode the fixed end): a later commit that reverted it,
    or an earlier one that brought it, would make the truth lie. A commit has it when
    nothing between the culprit and it touches the lines the culprit changed; it lacks it
    when nothing between the culprit's parent and it does."""
    culprit = hashes[plan.culprit]
    change = _parse_diff(git.run("diff", "-U0", "--no-renames", f"{culprit}^", culprit))
    if not any(fd.hunks or fd.created_or_deleted for fd in change.values()):
        raise InfraError(f"lab check: the culprit {culprit[:12]} changes nothing; no lab made")
    states = [(c.pos, c.buggy) for c in reversed(plan.commits)] + [(0, plan.old_buggy)]
    names = {str(truth["bad"]): "lab-bad", str(truth["good"]): "lab-good"}
    paths = [f":(literal){p}" for p in change]
    for pos, buggy in states:
        has = buggy == (plan.mode == Mode.REGRESSION)
        base = culprit if has else f"{culprit}^"
        drift = _parse_diff(git.run("diff", "-U0", "--no-renames", base, hashes[pos], "--", *paths))
        for path, fd in drift.items():
            if path in change and not _leaves_alone(change[path], fd, has):
                raise InfraError(
                    f"lab check: {path} at {names.get(hashes[pos], f'position {pos}')} "
                    f"({hashes[pos][:12]}) {'lacks' if has else 'already has'} the change of "
                    f"the culprit {culprit[:12]}, so the truth would lie; no lab made "
                    "(a kbisect bug: please report it)"
                )


def _leaves_alone(change: _FileDiff, drift: _FileDiff, has: bool) -> bool:
    """Whether `drift`, a file's diff from the culprit (has) or from its parent (not has),
    leaves alone the lines the culprit's `change` to it changed."""
    mine = [(h.new, h.removed) if has else (h.old, h.added) for h in change.hunks]
    return not drift.created_or_deleted and not any(
        _touches(span, lines, h) for span, lines in mine for h in drift.hunks
    )


def _touches(span: tuple[int, int], lines: str, h: _Hunk) -> bool:
    """Whether hunk h (its old side) changes the lines of `span`; when `span` is a gap (the
    culprit only removed `lines` there, or only added them), whether h changes the lines
    around it, or brings `lines` to it."""
    (s1, e1), (s2, e2) = span, h.old
    if s1 < e1:
        return s1 < e2 and s2 < e1 if s2 < e2 else s1 < s2 < e1
    return s2 < s1 < e2 or (s2 <= s1 <= e2 and ("\n" + lines) in ("\n" + h.added))


def _parse_diff(diff: str) -> dict[str, _FileDiff]:
    """The files of a `git diff -U0` by path, with their hunks. A hunk's body is read by
    the counts in its @@ header, so no removed line is taken for a header."""
    files: dict[str, _FileDiff] = {}
    fd = _FileDiff()
    left = [0, 0]  # the hunk's removed and added lines still to read
    for line in diff.split("\n"):
        if left[0] or left[1]:
            side = "-+".find(line[:1])  # -1: "\ No newline at end of file"
            if side == 0:
                fd.hunks[-1].removed += line[1:] + "\n"
            elif side == 1:
                fd.hunks[-1].added += line[1:] + "\n"
            if side >= 0:
                left[side] -= 1
        elif line.startswith("diff --git "):
            fd = _FileDiff()
        elif line.startswith(("--- ", "+++ ")):
            name = line[4:].rstrip("\t")
            if name == "/dev/null":
                fd.created_or_deleted = True
            elif not fd.path:
                fd.path = name[2:]  # without a/ or b/
                files[fd.path] = fd
        elif line.startswith("@@ ") and fd.path:
            old, new = (_span(part[1:]) for part in line.split(" ")[1:3])
            fd.hunks.append(_Hunk(old, new))
            left = [old[1] - old[0], new[1] - new[0]]
    return files


def _span(spec: str) -> tuple[int, int]:
    """A hunk header's 'START,COUNT' (COUNT 1 when not given) as 0-based [start, end); an
    empty span after line START is the gap at START."""
    start, _, count = spec.partition(",")
    n = int(count) if count else 1
    return (int(start) - 1, int(start) - 1 + n) if n else (int(start), int(start))
