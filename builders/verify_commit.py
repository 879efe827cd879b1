"""The commit that verifies a bisection: the culprit reverted on the new endpoint, or the fix
applied to the old one (the backport an SRU would ship).

Written with plumbing and a temporary index (no checkout, the user's work tree and branches
untouched), with a fixed identity and date so that a retried activity makes the same commit
and the builder's cache keeps working. A ref under refs/kbisect/verify/ keeps it from gc.
"""

import tempfile
from pathlib import Path

from kbisect.errors import InfraError
from kbisect.infra.git import LAB_IDENTITY, Git
from kbisect.workflows.bisect_types import VerifyCommit

VERIFY_IDENTITY = {
    **LAB_IDENTITY,
    "GIT_AUTHOR_NAME": "kbisect verify",
    "GIT_COMMITTER_NAME": "kbisect verify",
}


def make_verify_commit(git: Git, change: str, onto: str, revert: bool) -> VerifyCommit:
    """`onto` with `change` reverted (revert=True) or applied, as a new commit on top of it.

    A merge is taken against its first parent, as `git revert -m 1` does.
    """
    change, onto = git.resolve(change), git.resolve(onto)
    info = git.commit_info(change)
    if revert:
        subject = f'Revert "{info.subject}"'
        body = f"This reverts commit {change}.\n\nWritten by kbisect to verify a bisection."
    else:
        subject = info.subject
        body = f"(cherry picked from commit {change})\n\nWritten by kbisect to verify a bisection."
    parent = f"{change}^1" if git.ok("rev-parse", "--verify", "--quiet", f"{change}^1") else None
    if parent is None:
        return VerifyCommit(None, subject, f"{change[:12]} is a root commit: nothing to apply")
    patch = git.patch(change, reverse=revert)
    if not patch.strip():
        return VerifyCommit(None, subject, f"{change[:12]} changes nothing: nothing to verify")
    with tempfile.TemporaryDirectory(prefix="kbisect-verify-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", onto, env=env)
        try:
            git.run("apply", "--cached", "--3way", "-", env=env, input=patch)
            tree = git.run("write-tree", env=env).strip()
        except InfraError as exc:
            what = "revert" if revert else "apply"
            hint = "" if revert else " ('kbisect backport JOB --target REV' finds what it needs)"
            return VerifyCommit(
                None, subject, f"{change[:12]} does not {what} cleanly on {onto[:12]}: {exc}{hint}"
            )
    if tree == git.tree_of(onto):
        state = "not in" if revert else "already in"
        return VerifyCommit(None, subject, f"{change[:12]} is {state} {onto[:12]}: nothing to test")
    date = git.run("show", "-s", "--format=%cI", onto).strip()
    commit = git.run(
        "commit-tree",
        tree,
        "-p",
        onto,
        "-m",
        subject,
        "-m",
        body,
        env={**VERIFY_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date},
    ).strip()
    # With a reflog: its time is when the ref was made, which `kbisect gc` ages it by.
    git.run(
        "update-ref",
        "--create-reflog",
        f"refs/kbisect/verify/{commit}",
        commit,
        env=VERIFY_IDENTITY,
    )
    return VerifyCommit(commit, subject)
