"""A thin, argv-only wrapper over git for one repository.

Every command runs with the user's diff, colour, hook, pager and signing settings
overridden: kbisect parses git's output, applies the patches it prints and checks out
worktrees, and a `diff.noprefix`, an external diff or a failing post-checkout hook in
someone's config must not turn into a wrong verdict; a global attributes file or
`core.eol` must not turn a build slot's files into CRLF, and `format.*` settings must not
change the SRU patch files. The user's system and global config are still read
(safe.directory, credential helpers and `url.*.insteadOf` live there), only these keys
are pinned.
"""

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from kbisect.errors import InfraError, UnknownRevisionError, UserError
from kbisect.infra import printable
from kbisect.model import Commit

# Deterministic identity for commits kbisect itself writes (the lab).
LAB_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect lab",
    "GIT_AUTHOR_EMAIL": "lab@kbisect.invalid",
    "GIT_COMMITTER_NAME": "kbisect lab",
    "GIT_COMMITTER_EMAIL": "lab@kbisect.invalid",
}

# A commit's subject and author as kbisect keeps them: a repository's text reaches reports,
# pages and posts, and git takes a subject of any length (a real one is under 100).
SUBJECT_CAP = 200
# `-c` overrides on every command (they win over every config file).
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",  # no hooks: a post-checkout hook must not fail a build
    "core.fsmonitor=false",
    "core.autocrlf=false",  # worktree files byte for byte as committed: no eol conversion,
    "core.eol=lf",
    "core.attributesFile=/dev/null",  # no `* text eol=crlf` from the user's attributes,
    "core.symlinks=true",  # and symlinks as links (the kernel has some)
    "core.sparseCheckout=false",  # and all of them: a missing file would be a compile error
    "core.pager=cat",
    "color.ui=false",
    "diff.noprefix=false",  # `git apply` needs the a/ b/ prefixes
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.srcPrefix=a/",
    "diff.dstPrefix=b/",
    "diff.context=3",  # a patch as everyone else's git makes it
    "diff.interHunkContext=0",
    "diff.algorithm=default",
    "diff.orderFile=/dev/null",
    "apply.whitespace=nowarn",  # a verify patch applies as the commit has it
    "commit.gpgSign=false",
    "log.showSignature=false",
    "i18n.logOutputEncoding=UTF-8",
    "submodule.recurse=false",
    "gc.auto=0",  # no background gc in the user's repository
    "maintenance.auto=false",
    "advice.detachedHead=false",
    # format-patch: keys its flags cannot undo (FORMAT_PATCH_OPTIONS does the rest)
    "format.numbered=auto",
    "format.forceInBodyFrom=false",
    "format.coverFromDescription=message",
    "format.encodeEmailHeaders=true",
    "format.noprefix=false",
    "format.mboxrd=false",
)
# Commands that print diffs: no external diff driver, textconv filter or colour (the
# command line is the only way to turn off diff.external and GIT_EXTERNAL_DIFF).
DIFF_COMMANDS = frozenset({"diff", "show", "log", "diff-tree"})
DIFF_OPTIONS = ("--no-ext-diff", "--no-textconv", "--no-color")
# blame: no textconv filter either (a tree's .gitattributes picks the driver, which runs,
# and its output shifts the line numbers a backport's plan asks about).
BLAME_OPTIONS = ("--no-textconv",)
# format-patch: the patch files as git makes them with no format.* config (a caller's own
# flags come after these and win). format.to/cc/headers only add up in config: these
# flags are the way to drop them.
FORMAT_PATCH_OPTIONS = (
    "--no-signoff",
    "--no-attach",
    "--suffix=.patch",
    "--no-to",
    "--no-cc",
    "--no-add-header",
    "--no-from",
    "--no-signature-file",
    "--no-base",
    "--no-notes",
    "--no-thread",
    "--filename-max-length=64",
)
# Inherited variables that would point git at another repository or index (kbisect run
# from a git hook has GIT_DIR set) or change what it prints.
SCRUBBED_ENV = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_QUARANTINE_PATH",
        "GIT_EXTERNAL_DIFF",
        "GIT_DIFF_OPTS",
        "GIT_PAGER",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
    }
)


def git_argv(repo: Path, *args: str, config: Sequence[str] = ()) -> list[str]:
    """The full argv of `git args` in repo, with the user's settings pinned and `config`
    ("key=value", after the pins: it wins) set for this command alone."""
    cmd = list(args)
    if cmd and cmd[0] in DIFF_COMMANDS:
        cmd[1:1] = DIFF_OPTIONS
    elif cmd and cmd[0] == "blame":
        cmd[1:1] = BLAME_OPTIONS
    elif cmd and cmd[0] == "format-patch":
        cmd[1:1] = FORMAT_PATCH_OPTIONS
    pins = [part for kv in (*SAFE_CONFIG, *config) for part in ("-c", kv)]
    return ["git", "--no-pager", "-C", str(repo), *pins, *cmd]


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for git: ours minus redirecting variables, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in SCRUBBED_ENV and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
    }
    return {
        **env,
        "LC_ALL": "C",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_ATTR_NOSYSTEM": "1",  # nor /etc/gitattributes (core.attributesFile is pinned)
        "GIT_TERMINAL_PROMPT": "0",
        **(extra or {}),
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
        proc = self._proc(args, env, input)
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InfraError(f"git {args[0]} failed in {self.repo}: {err[-1] if err else '?'}")
        return proc.stdout.decode(errors="replace")

    def output(self, *args: str, input: bytes | None = None, config: Sequence[str] = ()) -> bytes:
        """git's output as bytes, as it wrote them: a patch to apply again, whatever the
        encoding of the files it shows (`config` as git_argv's). InfraError when it fails."""
        proc = self._proc(args, None, input, config)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            raise InfraError(f"git {args[0]} failed in {self.repo}: {err[-1] if err else '?'}")
        return proc.stdout

    def patch(self, commit: str, reverse: bool = False) -> bytes:
        """The commit's diff against its first parent (reverse: what reverting it does), as
        `git apply` takes it: plumbing, binary-safe, whatever the user's diff settings."""
        a, b = (commit, f"{commit}^") if reverse else (f"{commit}^", commit)
        return self.output("diff-tree", "-p", "--binary", "--full-index", a, b, "--")

    def ok(self, *args: str) -> bool:
        return self._proc(args, None, None).returncode == 0

    def apply_to_index(self, index: Mapping[str, str], diff: bytes, *flags: str) -> str | None:
        """`git apply --cached FLAGS` of `diff` to the index the environment `index` names
        (GIT_INDEX_FILE): None when it applied, else git's reason on one line."""
        done = self._proc(("apply", "--cached", *flags, "-"), index, diff)
        if done.returncode == 0:
            return None
        lines = [
            x.removeprefix("error: ") for x in done.stderr.decode(errors="replace").splitlines()
        ]
        return "; ".join(x for x in lines if x.strip())[:300]

    def _proc(
        self,
        args: tuple[str, ...],
        env: Mapping[str, str] | None,
        input: bytes | None,
        config: Sequence[str] = (),
    ) -> "subprocess.CompletedProcess[bytes]":
        try:
            return subprocess.run(
                git_argv(self.repo, *args, config=config),
                input=input,
                capture_output=True,
                env=git_env(env),
                stdin=None if input is not None else subprocess.DEVNULL,
                check=False,
            )
        except FileNotFoundError as exc:
            raise InfraError("git is not installed: run the README's install command") from exc

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
        return Commit(
            hash=h,
            subject=printable.one_line(subject, SUBJECT_CAP),
            author=printable.one_line(author, SUBJECT_CAP),
            date=date,
        )

    def tree_of(self, commit: str) -> str:
        return self.run("rev-parse", f"{commit}^{{tree}}").strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)
