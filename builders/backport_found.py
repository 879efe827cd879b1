"""Whether a target branch already carries an upstream change, under any hash.

Distro and stable kernels take upstream commits as cherry-picks: a new hash, a message
that names the original (stable's `commit X upstream.` or `[ Upstream commit X ]`,
Ubuntu's `(cherry picked from commit X)` or `(backported from commit X)`). A commit of
the target is the change when its message names it so, or when its patch is the same
(`git patch-id --stable`, which ignores line numbers and whitespace). Only the commits
after the merge base of the two are read: the target's history before it is upstream's.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from kbisect.errors import KbisectError
from kbisect.infra.git import Git

# The lines that name an upstream commit in a backport's message.
PROVENANCE = (
    re.compile(r"^commit ([0-9a-f]{12,40}) upstream\.?$"),
    re.compile(r"^\[ ?Upstream commit ([0-9a-f]{12,40}) ?\]$"),
    re.compile(r"^\((?:cherry picked|backported) from commit ([0-9a-f]{12,40})(?: .*)?\)$"),
)


@dataclass(frozen=True)
class Found:
    commit: str  # the target's commit that is the change
    subject: str
    how: str  # "ancestor", "provenance line" or "same patch"


def named_upstream(message: str) -> list[str]:
    """The upstream commits (full or abbreviated hashes) a message's provenance lines name."""
    found = []
    for line in message.splitlines():
        for pattern in PROVENANCE:
            if m := pattern.match(line.strip()):
                found.append(m.group(1))
    return found


def patch_ids(git: Git, revs: list[str], paths: list[str] | None = None) -> dict[str, str]:
    """Each commit's stable patch-id by commit (of its diff against its first parent,
    limited to `paths` when given); a commit that changes nothing there has none."""
    if not revs:
        return {}
    log = git.output(
        "log", "-p", "--no-walk=unsorted", "--first-parent", "-m", "--full-index",
        "--format=commit %H", "--stdin", "--", *(paths or []),
        input="\n".join(revs).encode() + b"\n",
    )  # fmt: skip
    ids: dict[str, str] = {}
    for line in git.output("patch-id", "--stable", input=log).decode().splitlines():
        pid, _, commit = line.partition(" ")
        ids.setdefault(commit.strip(), pid)
    return ids


def changed_paths(git: Git, commit: str) -> list[str]:
    out = git.run("diff-tree", "-r", "--no-commit-id", "--name-only", "-z", f"{commit}^", commit)
    return [p for p in out.split("\0") if p]


def find_in(git: Git, change: str, target: str) -> Found | None:
    """The target's commit that is `change` (full hashes both), or None."""
    if git.is_ancestor(change, target):
        return Found(change, git.commit_info(change).subject, "ancestor")
    base = git.run("merge-base", change, target, check=False).strip()
    span = f"{base}..{target}" if base else target
    rows = git.run("log", "--format=%H%x00%B%x01", span, "--grep", change[:12]).split("\x01")
    for row in rows:
        commit, _, message = row.strip().partition("\0")
        if any(change.startswith(h) for h in named_upstream(message)):
            return Found(commit, message.partition("\n")[0], "provenance line")
    paths = changed_paths(git, change)
    want = patch_ids(git, [change]).get(change)
    touching = git.run("rev-list", "--no-merges", span, "--", *paths).split() if paths else []
    for commit, pid in patch_ids(git, touching, paths).items():
        if want and pid == want:
            return Found(commit, git.commit_info(commit).subject, "same patch")
    return None


FIXES = re.compile(r"^Fixes:\s*([0-9a-f]{8,40})\b", re.M)


def fixes_naming(git: Git, commits: list[str]) -> list[str]:
    """Commits on any branch or tag whose `Fixes:` tag names one of these, oldest first:
    the follow-ups a backport of them wants too. One pass over the history, however many
    commits are asked about (a kernel's history is a million commits)."""
    greps = [f"--grep=^Fixes: {c[:8]}" for c in commits]
    if not greps:
        return []
    out = git.run("log", "--branches", "--tags", "--reverse", "--format=%H%x00%B%x01", *greps)
    found = []
    for row in out.split("\x01"):
        commit, _, message = row.strip().partition("\0")
        named = FIXES.findall(message)
        if (
            commit
            and commit not in commits
            and any(c.startswith(n) for n in named for c in commits)
        ):
            found.append(commit)
    return found


def upstream_fixes(repo: str, commit: str) -> list[tuple[str, str]]:
    """Commits on any branch or tag whose `Fixes:` tag names this one (hash, subject),
    newest first: the upstream fix to backport ([] where the repository is not readable
    from here)."""
    try:
        git = Git(Path(repo))
        return [(h, git.commit_info(h).subject) for h in reversed(fixes_naming(git, [commit]))]
    except KbisectError:
        return []


def change_to_take(repo: str, culprit: str, regression: bool) -> tuple[str, bool]:
    """What a bisection's answer takes to a target, and whether as a revert: a fix as it is;
    for a regression the first commit whose `Fixes:` names the culprit (later ones are its
    follow-ups), else the culprit reverted."""
    if not regression:
        return culprit, False
    fixes = upstream_fixes(repo, culprit)
    return (fixes[-1][0], False) if fixes else (culprit, True)
