"""The series that takes an upstream change to a target branch: its prerequisites first.

A change that does not apply as it is needs the commits that made the lines its hunks
read (their context and the lines they remove): git-deps' method, `git blame` of those
lines in the change's parent. Of these, the ones between the merge base and the change
that the target lacks (by patch-id or provenance line: backport_found) go first, oldest
first; their own needs are looked up the same way, a few levels deep. The series is the
first that applies, commit by commit, with `git apply` (no three-way merge: what applies
is what was reviewed). Read and written through plumbing and temporary indexes: the
user's work tree and branches are never touched.
"""

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.builders.backport_found import find_in
from kbisect.errors import InfraError
from kbisect.infra.git import Git

MAX_DEPTH = 3  # levels of prerequisites of prerequisites
MAX_PREREQUISITES = 12  # more than this is a rebase, not a backport
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
# A fixed identity and date: a retried activity writes the same commits (the build cache
# keys on them), as verify_commit's do.
BACKPORT_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect backport",
    "GIT_AUTHOR_EMAIL": "backport@kbisect.invalid",
    "GIT_COMMITTER_NAME": "kbisect backport",
    "GIT_COMMITTER_EMAIL": "backport@kbisect.invalid",
}


@dataclass
class Series:
    commits: list[str] = field(default_factory=list)  # upstream commits, in order; [] failed
    prerequisites: list[str] = field(default_factory=list)  # the ones before the change
    conflict: str = ""  # why no series applies, in one line


@dataclass(frozen=True)
class Applied:
    ok: bool
    failed: str = ""  # the commit that did not apply
    error: str = ""  # git's reason, one line


def _apply(git: Git, commit: str, env: dict[str, str], reverse: bool) -> Applied:
    """The commit's diff (reverse: its revert) applied to the index `env` names."""
    why = git.apply_to_index(env, git.patch(commit, reverse))
    return Applied(True) if why is None else Applied(False, commit, why)


def apply_series(
    git: Git, onto: str, commits: list[str], index: Path, reverse: bool = False
) -> Applied:
    """Apply each commit's diff (reverse: revert each) in turn to `onto` in the index
    file `index`; the first that does not apply stops it."""
    env = {"GIT_INDEX_FILE": str(index)}
    git.run("read-tree", onto, env=env)
    for commit in commits:
        if not (done := _apply(git, commit, env, reverse)).ok:
            return done
    return Applied(True)


def applies(git: Git, onto: str, commits: list[str]) -> Applied:
    with tempfile.TemporaryDirectory(prefix="kbisect-backport-") as tmp:
        return apply_series(git, onto, commits, Path(tmp) / "index")


def read_lines(git: Git, commit: str) -> dict[str, list[tuple[int, int]]]:
    """The lines of each file of `commit`'s parent that its patch reads: each hunk's
    old side (context and removed lines), as 1-based [start, end]. A file's name is read
    from its header only: a removed line that reads "-- x" is no header."""
    spans: dict[str, list[tuple[int, int]]] = {}
    path, in_header = "", False
    for line in git.patch(commit).decode(errors="replace").splitlines():
        if line.startswith("diff --git "):
            path, in_header = "", True
        elif in_header and line.startswith("--- "):
            path = "" if line == "--- /dev/null" else line[6:]
        elif (m := HUNK.match(line)) and path:
            in_header = False
            start, count = int(m.group(1)), int(m.group(2) or "1")
            if count:
                spans.setdefault(path, []).append((start, start + count - 1))
    return spans


def blamed(git: Git, commit: str, since: str) -> set[str]:
    """The commits that last touched the lines `commit`'s patch reads, back to `since`
    (lines older than it are blamed on it, a boundary commit: _lacked drops it)."""
    found: set[str] = set()
    for path, spans in read_lines(git, commit).items():
        ranges = [a for s, e in spans for a in ("-L", f"{s},{e}")]
        out = git.run("blame", "--porcelain", *ranges, f"{since}..{commit}^", "--", path)
        for line in out.splitlines():
            head = line.split(" ", 1)[0]
            if len(head) == 40 and not line.startswith("\t"):
                found.add(head)
    return found - {commit}


def _lacked(git: Git, commits: set[str], target: str, since: str) -> set[str]:
    """Those of `commits` the target lacks (boundary commits of blame excluded)."""
    return {c for c in commits if not git.is_ancestor(c, since) and find_in(git, c, target) is None}


def plan_series(git: Git, change: str, target: str) -> Series:
    """The upstream commits to apply to `target`, the change last (full hashes)."""
    first = applies(git, target, [change])
    if first.ok:
        return Series([change])
    since = git.run("merge-base", change, target, check=False).strip()
    if not since:
        return Series(conflict=(
            f"{change[:12]} does not apply to {target[:12]}, and they share no history to "
            "look for what it needs in"
        ))  # fmt: skip
    needed: set[str] = set()
    frontier = [change]
    tried = first
    upstream = git.run("rev-list", "--topo-order", "--reverse", f"{since}..{change}").split()
    for _ in range(MAX_DEPTH):
        new: set[str] = set()
        for c in frontier:
            new |= _lacked(git, blamed(git, c, since), target, since) - needed
        if not new:
            break
        needed |= new
        if len(needed) > MAX_PREREQUISITES:
            return Series(conflict=(
                f"{change[:12]} needs more than {MAX_PREREQUISITES} earlier commits that "
                f"{target[:12]} lacks: backport it by hand"
            ))  # fmt: skip
        prereqs = [c for c in upstream if c in needed]  # as upstream has them
        tried = applies(git, target, [*prereqs, change])
        if tried.ok:
            return Series([*prereqs, change], prereqs)
        frontier = sorted(new)
    subject = git.commit_info(tried.failed).subject
    return Series(conflict=(
        f'{tried.failed[:12]} ("{subject}") does not apply to {target[:12]}'
        + (f" after {len(needed)} earlier commit{'s' * (len(needed) != 1)}" if needed else "")
        + f": {tried.error}"
    ))  # fmt: skip


def commit_series(
    git: Git,
    onto: str,
    commits: list[str],
    written: Callable[[str], tuple[str, dict[str, str]]],
    reverse: bool = False,
) -> str:
    """Each commit's change (reverse: its revert) as a new commit on the last, from
    `onto`; `written(commit)` gives the new commit's message and GIT_* identity. The tip."""
    tip = onto
    with tempfile.TemporaryDirectory(prefix="kbisect-backport-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", onto, env=env)  # once: each commit's tree is the index so far
        for commit in commits:
            done = _apply(git, commit, env, reverse)
            if not done.ok:
                raise InfraError(f"{commit[:12]} no longer applies to {tip[:12]}: {done.error}")
            tree = git.run("write-tree", env=env).strip()
            message, who = written(commit)
            tip = git.run(
                "commit-tree", tree, "-p", tip, "-F", "-", env=who, input=message.encode()
            ).strip()
    return tip


def write_series(git: Git, onto: str, commits: list[str]) -> str:
    """The series as commits on `onto`, each with `git cherry-pick -x`'s line; the tip.
    A ref under refs/kbisect/backport/ keeps it from gc."""
    date = git.run("show", "-s", "--format=%cI", onto).strip()
    who = {**BACKPORT_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}

    def written(commit: str) -> tuple[str, dict[str, str]]:
        message = git.run("show", "-s", "--format=%B", commit).rstrip()
        return f"{message}\n(cherry picked from commit {commit})\n", who

    tip = commit_series(git, onto, commits, written)
    git.run("update-ref", "--create-reflog", f"refs/kbisect/backport/{tip}", tip,
            env=BACKPORT_IDENTITY)  # fmt: skip
    return tip
