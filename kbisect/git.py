"""A thin, argv-only wrapper over git for one repository."""

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from kbisect.errors import InfraError, UnknownRevisionError, UserError
from kbisect.model import Commit

# Deterministic identity for commits kbisect itself writes (the lab).
LAB_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect lab",
    "GIT_AUTHOR_EMAIL": "lab@kbisect.invalid",
    "GIT_COMMITTER_NAME": "kbisect lab",
    "GIT_COMMITTER_EMAIL": "lab@kbisect.invalid",
}


class Git:
    def __init__(self, repo: Path) -> None:
        self.repo = Path(repo)

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: bytes | None = None,
        check: bool = True,
    ) -> str:
        full_env = {**os.environ, "LC_ALL": "C", **(env or {})}
        try:
            proc = subprocess.run(
                ["git", "-C", str(self.repo), *args],
                input=input,
                capture_output=True,
                env=full_env,
                check=False,
            )
        except FileNotFoundError as exc:
            raise InfraError("git is not installed: run the README's install command") from exc
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InfraError(f"git {args[0]} failed in {self.repo}: {err[-1] if err else '?'}")
        return proc.stdout.decode(errors="replace")

    def ok(self, *args: str) -> bool:
        return (
            subprocess.run(
                ["git", "-C", str(self.repo), *args], capture_output=True, check=False
            ).returncode
            == 0
        )

    def check_repo(self) -> None:
        if not self.repo.exists() or not self.ok("rev-parse", "--git-dir"):
            raise UserError(f"{self.repo} is not a git repository: pass --repo a kernel git tree")

    def resolve(self, rev: str) -> str:
        """Full commit hash of rev; a revision is never passed on unresolved."""
        # A leading dash would be read as an option by git.
        if not rev or rev.startswith("-") or "\0" in rev:
            raise UnknownRevisionError(
                f"invalid revision {rev!r}: give a commit hash, tag or branch"
            )
        out = self.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        if not out.strip():
            raise UnknownRevisionError(
                f"unknown revision {rev!r} in {self.repo}: check it with 'git log' there"
            )
        return out.strip()

    def commit_info(self, rev: str) -> Commit:
        full = self.resolve(rev)
        out = self.run("show", "-s", "--format=%H%x00%s%x00%an <%ae>%x00%aI", full)
        h, subject, author, date = out.rstrip("\n").split("\0")
        return Commit(hash=h, subject=subject, author=author, date=date)

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", f"{commit}^{{tree}}").strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)
