"""A revision with a user's patches on it (`try --patch`, `sweep --patch N=FILE`, and a
bisection's `--fixup` at each commit it builds, where they apply): each patch a commit on
the last, written with plumbing and a temporary index (the user's work
tree and branches untouched), with a fixed identity and the base's date, so the same
patches on the same base make the same commits and the build cache finds their kernel
again. A ref under refs/kbisect/patched/ keeps the tip from gc (`kbisect gc` ages it).

A patch file is a plain diff (`git diff`, `diff -u`) or a mailbox (`git format-patch`, a
list's mbox of a series), split with `git mailsplit` and read with `git mailinfo`. Each is
applied as it is (`git apply`, no three-way merge): what builds is what was posted.
"""

import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kbisect.builders import job_inputs
from kbisect.errors import InfraError, UserError
from kbisect.infra import user_file
from kbisect.infra.git import Git

MAX_PATCH = 4 << 20  # one patch file: a series of a few hundred hunks is well under it
MAX_PATCHES = 50  # patches (an mbox's messages counted) on one revision
PATCHED_REFS = "refs/kbisect/patched/"
PATCH_IDENTITY = {
    "GIT_AUTHOR_NAME": "kbisect patch",
    "GIT_AUTHOR_EMAIL": "patch@kbisect.invalid",
    "GIT_COMMITTER_NAME": "kbisect patch",
    "GIT_COMMITTER_EMAIL": "patch@kbisect.invalid",
}
HINT = "give a diff (git diff, diff -u) or a git format-patch mail that applies to the revision"
SUBJECT_CHARS = 200


@dataclass(frozen=True)
class Patch:
    """One patch to apply: where it came from (a file, an mbox's Nth message), its subject
    (the mail's, or the file's name) and its diff."""

    source: str
    subject: str
    diff: bytes


@dataclass(frozen=True)
class Patched:
    base: str  # the revision's full hash
    tip: str  # the last patch's commit (the base itself for no patch)
    patches: tuple[Patch, ...]


def read_patches(paths: list[str], option: str = "--patch") -> list[Patch]:
    """The patches of these files, in order (an mbox gives one a message); UserError, one
    line, for a file that is not one."""
    patches: list[Patch] = []
    for path in paths:
        text = user_file.read_text(path, MAX_PATCH, option, HINT)
        patches += patches_in(text, Path(path).name, f"{option} {path}")
    return _counted(patches, option)


def patches_of(data: bytes, name: str, what: str) -> list[Patch]:
    """The patches of an upload (a chat's file), read as a --patch file is."""
    text = user_file.text_of(data, MAX_PATCH, what, HINT)
    return _counted(patches_in(text, name, what), what)


def _counted(patches: list[Patch], what: str) -> list[Patch]:
    if len(patches) > MAX_PATCHES:
        raise UserError(f"{what}: more than {MAX_PATCHES} patches: bisect a branch instead")
    return patches


def patches_in(text: str, name: str, where: str) -> list[Patch]:
    """A patch file's text as its patches (`where` names it in an error)."""
    text = text if text.endswith("\n") else text + "\n"  # a chat's paste lost its last one
    mbox = text.startswith("From ")
    found = _mails(text, name, where) if mbox else [Patch(name, name, text.encode())]
    for patch in found:
        if b"\n+++ " not in b"\n" + patch.diff and b"GIT binary patch" not in patch.diff:
            named = where if where == patch.source else f"{where}: {patch.source}"
            raise UserError(f"{named} holds no diff: {HINT}")
    return found


def _mails(text: str, name: str, where: str) -> list[Patch]:
    """An mbox's messages, split and read by git as `git am` does (`where` names the file
    in an error)."""
    with tempfile.TemporaryDirectory(prefix="kbisect-patch-") as tmp:
        box, out = Path(tmp) / "mbox", Path(tmp) / "split"
        box.write_text(text)
        out.mkdir()
        split = subprocess.run(["git", "mailsplit", "-o" + str(out), str(box)],
                               capture_output=True, text=True)  # fmt: skip
        if split.returncode:
            raise UserError(f"{where}: not a mailbox git can split: {HINT}")
        mails = sorted(out.iterdir())
        patches = []
        for i, mail in enumerate(mails, 1):
            msg, diff = Path(tmp) / "msg", Path(tmp) / "diff"
            with open(mail, "rb") as fh:
                info = subprocess.run(["git", "mailinfo", str(msg), str(diff)], stdin=fh,
                                      capture_output=True)  # fmt: skip
            if info.returncode:
                raise UserError(f"{where}: message {i} is not a mail git can read: {HINT}")
            subject = next((line[9:] for line in info.stdout.decode(errors="replace").splitlines()
                            if line.startswith("Subject: ")), "")  # fmt: skip
            source = name if len(mails) == 1 else f"{i} of {name}"
            patches.append(Patch(source, subject[:SUBJECT_CHARS] or source, diff.read_bytes()))
        return patches


def apply_patches(git: Git, rev: str, patches: list[Patch], option: str = "--patch") -> Patched:
    """`rev` with `patches` on it as commits; UserError, one line (naming the patch as
    `option` does), when one does not apply (git's reason) or changes nothing there."""
    base = git.resolve(rev)

    def each(env: dict[str, str], patch: Patch) -> bool:
        why = git.apply_to_index(env, patch.diff)
        if why is not None:
            raise UserError(
                f"{_named(option, patch)} does not apply to {rev} ({base[:12]}): {why}: "
                "rebase it onto that revision"
            )
        return True

    tip, used = _commit(git, base, patches, each)
    if len(used) < len(patches):
        unchanged = next(p for p in patches if p not in used)
        raise UserError(f"{_named(option, unchanged)} changes nothing on {rev}: drop it")
    return Patched(base, tip, tuple(patches))


def _named(option: str, patch: Patch) -> str:
    """'--patch fix.diff'; a door's upload has no option: 'the patch'."""
    return f"{option} {patch.source}" if option else patch.source


def with_fixups(git: Git, commit: str, fixups: list[Patch]) -> Patched:
    """`commit` with each fixup that applies to it (in order, each on the last), as
    `git bisect` users cherry-pick a build fix at each step: one the commit already holds
    (its reverse applies) or that does not apply is left out. No fixup applied: the
    commit itself."""

    def each(env: dict[str, str], fixup: Patch) -> bool:
        if git.apply_to_index(env, fixup.diff, "--check", "--reverse") is None:
            return False  # already there
        return git.apply_to_index(env, fixup.diff) is None

    tip, used = _commit(git, commit, fixups, each)
    return Patched(commit, tip, tuple(used))


def _commit(
    git: Git, base: str, patches: list[Patch], apply: "Callable[[dict[str, str], Patch], bool]"
) -> tuple[str, list[Patch]]:
    """The patches `apply` takes (it applies one to the index its environment names, or
    says no), each a commit on the last from `base`: the tip, and the patches taken (not
    one that changes nothing)."""
    if not patches:
        return base, []
    date = git.run("show", "-s", "--format=%cI", base).strip()
    who = {**PATCH_IDENTITY, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    tip, used = base, []
    with tempfile.TemporaryDirectory(prefix="kbisect-patch-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", base, env=env)
        for patch in patches:
            if not apply(env, patch):
                continue
            tree = git.run("write-tree", env=env).strip()
            if tree == git.tree_of(tip):
                continue
            message = f"{patch.subject}\n\nApplied by kbisect from {patch.source}.\n"
            tip = git.run("commit-tree", tree, "-p", tip, "-F", "-", env=who,
                          input=message.encode()).strip()  # fmt: skip
            used.append(patch)
    if tip != base:
        try:
            git.run("update-ref", "--create-reflog", f"{PATCHED_REFS}{tip}", tip,
                    env=PATCH_IDENTITY)  # fmt: skip
        except InfraError as exc:
            raise InfraError(f"cannot keep the patched commit in {git.repo}: {exc}") from exc
    return tip, used


def store_patch(patch: Patch, cache: Path) -> str:
    """A job's fixup, kept in the cache the build hosts share (as a --config is); its path."""
    return job_inputs.keep(patch.diff, cache, "patch")


def stored_patch(path: str, source: str) -> Patch:
    """A job's stored fixup; InfraError when this build host cannot see it."""
    return Patch(source, source, job_inputs.read_kept(path, f"--fixup {source}"))
