"""An ordered list of prebuilt kernels as a git history, so the one workflow bisects it.

`kbisect bisect --kernels K1,K2,...` narrows over builds before any commit is built, as
the seed's engineer did with mainline builds and mozregression does with nightlies. Each
kernel becomes one commit of a small linear history whose tree holds a file naming it;
the workflow, its strategy, engine, UI and report then treat builds as commits, and the
build activity fetches the named kernel instead of compiling (KernelListBuilder). The
history is deterministic (fixed dates and author): the same list gives the same hashes.
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kbisect.backends import Builder
from kbisect.builders import prebuilt
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.infra.git import Git
from kbisect.model import Artifact, BuildSpec
from kbisect.settings import Settings
from kbisect.summaries import KERNEL_LISTS

KERNEL_FILE = "kbisect-kernel"  # the one file of each commit's tree: the kernel's spec
MARKER = "kbisect-kernel-list"  # in the repository's description: it is a kernel list
MAX_KERNELS = 1000
IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect",
    "GIT_AUTHOR_EMAIL": "kbisect@localhost",
    "GIT_COMMITTER_NAME": "kbisect",
    "GIT_COMMITTER_EMAIL": "kbisect@localhost",
}
_SPEC_RE = re.compile(r"^[^\0\n]{1,4096}$")


@dataclass(frozen=True)
class KernelList:
    repo: Path
    commits: list[str]  # oldest first, one a kernel

    @property
    def first(self) -> str:
        return self.commits[0]

    @property
    def last(self) -> str:
        return self.commits[-1]


def parse(text: str) -> list[tuple[str, str]]:
    """`K1,K2,...` (oldest first); each K may carry its source revision, K=REV. Files are
    made absolute here: the workers resolve them, maybe elsewhere (a shared path)."""
    items = []
    for raw in text.split(","):
        raw = raw.strip()
        if not raw:
            continue
        spec, _, rev = raw.partition("=")
        if not _SPEC_RE.match(spec) or spec.startswith("-"):
            raise UserError(f"--kernels: {raw!r} is not a kernel: give package names or files")
        if not prebuilt.PACKAGE_RE.match(spec):
            path = Path(spec)
            if not path.is_file():
                raise UserError(
                    f"--kernels: {spec!r} is neither a linux-image-* package name nor a file"
                )
            spec = str(path.resolve())
        items.append((spec, rev.strip()))
    if len(items) < 2:
        raise UserError("--kernels needs at least two kernels, oldest first: K1,K2[,...]")
    if len(items) > MAX_KERNELS:
        raise UserError(f"--kernels takes at most {MAX_KERNELS} kernels")
    if len({s for s, _ in items}) != len(items):
        raise UserError("--kernels names a kernel twice")
    return items


def subject(spec: str) -> str:
    return Path(spec).name if "/" in spec else spec


def make(specs: list[str], settings: Settings) -> KernelList:
    """The list's repository under the cache (one per list), made once."""
    key = hashlib.sha256("\n".join(specs).encode()).hexdigest()[:20]
    repo = settings.cache_dir() / KERNEL_LISTS / key
    git = Git(repo)
    if not (repo / "HEAD").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git.run("init", "-q", "--bare")
    (repo / "description").write_text(f"{MARKER}\n")
    commits: list[str] = []
    for i, spec in enumerate(specs):
        blob = git.run("hash-object", "-w", "--stdin", input=f"{spec}\n".encode()).strip()
        tree = git.run("mktree", input=f"100644 blob {blob}\t{KERNEL_FILE}\n".encode()).strip()
        when = f"{1_700_000_000 + i * 86400} +0000"  # a day apart: the list's order
        env = {**IDENTITY, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        parents = ["-p", commits[-1]] if commits else []
        commits.append(git.run("commit-tree", tree, *parents, "-m", subject(spec), env=env).strip())
    git.run("update-ref", "refs/heads/main", commits[-1])
    return KernelList(repo, commits)


def is_kernel_list(repo: Path) -> bool:
    try:
        return (repo / "description").read_text().strip() == MARKER
    except OSError:
        return False


def kernel_at(repo: Path, commit: str) -> str:
    """The kernel a list's commit names."""
    return Git(repo).run("show", f"{commit}:{KERNEL_FILE}").strip()


class KernelListBuilder:
    """A Builder that fetches a kernel list's kernels and builds everything else."""

    def __init__(self, builder: Builder, settings: Settings) -> None:
        self.builder = builder
        self.settings = settings

    def build(
        self, repo: Path, commit: str, spec: BuildSpec, progress: Callable[[str], None]
    ) -> Artifact:
        if not is_kernel_list(repo):
            return self.builder.build(repo, commit, spec, progress)
        kernel = prebuilt.resolve(kernel_at(repo, commit), self.settings, progress=progress)
        # The job knows builds by their commit in the list.
        return replace(kernel.artifact, commit=commit)


def builds_around(repo: Path, culprit: str) -> tuple[str, str] | None:
    """For a kernel list's named commit: the kernel before it and its own (the last
    old-like build and the first new-like one); None for a source repository."""
    if not is_kernel_list(repo):
        return None
    parent = Git(repo).run("rev-parse", f"{culprit}^").strip()
    return kernel_at(repo, parent), kernel_at(repo, culprit)


def builds_line(repo: Path, culprit: str, mode: Mode) -> str:
    around = builds_around(repo, culprit)
    if around is None:
        return ""
    return (
        f"last {mode.old_word} build: {subject(around[0])}; "
        f"first {mode.new_word} build: {subject(around[1])}"
    )
