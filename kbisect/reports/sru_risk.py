"""[Where problems could occur] for an SRU: what the patch changes (its functions and files),
the subsystems and maintainers the tree's MAINTAINERS gives for it (through the tree's
own scripts/get_maintainer.pl where it runs), and what kbisect measured. The SRU rules
want a real risk statement: this text never calls the risk "none" or "low"."""

import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kbisect.contract import Mode
from kbisect.errors import KbisectError
from kbisect.infra.git import Git, git_argv, git_env
from kbisect.workflows.bisect_types import BisectResult, StepSource

# A hunk header's context: the function the hunk sits in, as git's funcname rule finds it.
HUNK_FUNCTION = re.compile(r"^@@ [^@]+ @@.*?\b([A-Za-z_]\w*)\s*\(", re.M)
# A function defined or declared on a changed line.
LINE_FUNCTION = re.compile(r"^[+-](?:[\w\s\*]+?)\b([A-Za-z_]\w*)\s*\([^;]*$", re.M)
ROLE = re.compile(r"^(.*?) \((.*)\)$")


@dataclass
class Owners:
    subsystems: list[str] = field(default_factory=list)
    maintainers: list[str] = field(default_factory=list)  # "Name <mail> (role)"
    lists: list[str] = field(default_factory=list)


def changed_functions(git: Git, commit: str) -> list[str]:
    diff = git.run("diff-tree", "-p", "-U0", "--no-color", f"{commit}^1", commit, "--")
    names = HUNK_FUNCTION.findall(diff) + LINE_FUNCTION.findall(diff)
    keywords = {"if", "for", "while", "switch", "return", "sizeof", "defined"}
    return list(dict.fromkeys(n for n in names if n not in keywords))


def changed_files(git: Git, commit: str) -> list[str]:
    out = git.run("diff-tree", "--no-commit-id", "--name-only", "-r", f"{commit}^1", commit)
    return [line for line in out.splitlines() if line]


def owners(git: Git, rev: str, patch: bytes) -> Owners:
    """get_maintainer.pl of the tree at rev on the patch, run on an extract of just the
    script and MAINTAINERS (it reads the patch's file names, not the files)."""
    with tempfile.TemporaryDirectory(prefix="kbisect-maint-") as tmp:
        try:
            files = ("MAINTAINERS", "scripts/get_maintainer.pl")
            archive = subprocess.run(
                git_argv(git.repo, "archive", rev, "--", *files),
                env=git_env(),
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True, capture_output=True)
            (Path(tmp) / "change.patch").write_bytes(patch)
            out = subprocess.run(
                [
                    "perl",
                    "scripts/get_maintainer.pl",
                    "--no-tree",
                    "--no-git",
                    "--no-git-fallback",
                    "--rolestats",
                    "--subsystem",
                    "change.patch",
                ],
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
        except (subprocess.SubprocessError, OSError):
            return Owners()  # not a kernel tree, or no perl: the text says less
    found = Owners()
    for line in out.splitlines():
        m = ROLE.match(line)
        if m is None:
            if line.strip() and line.strip() != "THE REST":
                found.subsystems.append(line.strip())
        elif "list" in m.group(2):
            found.lists.append(m.group(1))
        elif "maintainer" in m.group(2) or "supporter" in m.group(2) or "reviewer" in m.group(2):
            found.maintainers.append(line.strip())
    return found


def where_problems(result: BisectResult, patch: bytes | None = None) -> list[str]:
    """The risk section: concrete, from the change itself and from what was measured."""
    c = result.culprit or ""
    git = Git(Path(result.repo))
    try:
        functions, files = changed_functions(git, c), changed_files(git, c)
        if patch is None:
            patch = git.run("format-patch", "-1", "--stdout", c).encode()
        found = owners(git, c, patch)
    except KbisectError:  # the repository is not readable here: say what is known
        functions, files, found = [], [], Owners()
    action = "reverts" if result.mode == Mode.REGRESSION else "backports"
    what = f"The patch {action} commit {c[:12]} ({result.subjects.get(c, '')!r})"
    where = f", which changes {', '.join(functions[:8])}()" if functions else ""
    in_files = f" in {', '.join(files[:8])}" if files else ""
    lines = [f"{what}{where}{in_files}."]
    if found.subsystems:
        lines.append(
            f"It belongs to {', '.join(found.subsystems)}: a mistake would show as a "
            "regression there, in any workload that goes through this code, not only the one "
            "measured below."
        )
    else:
        lines.append(
            "A mistake would show as a regression in the code these files belong to, in any "
            "workload that goes through it, not only the one measured below."
        )
    if found.maintainers:
        lines.append("Maintainers: " + "; ".join(found.maintainers) + ".")
    if found.lists:
        lines.append("Lists: " + ", ".join(found.lists) + ".")
    profile = f", device profile {result.profile}" if result.profile else ""
    lines.append(
        f"kbisect ran one testcase, {result.testcase} (metric {result.metric}{profile}), on "
        f"{booted_kernels(result)}; other workloads were not measured. Run the "
        "subsystem's usual regression tests before release."
    )
    return lines


def kernels_booted(result: BisectResult) -> int:
    """Kernels booted for the answer, the verification's own included."""
    booted = sum(s.boots > 0 for s in result.steps)
    return booted + bool(result.verification and result.verification.boots)


def booted_kernels(result: BisectResult) -> str:
    """'7 kernels (21 more commits share one of their kernels)': what was booted, not the
    commits that took a booted kernel's verdict."""
    booted = kernels_booted(result)
    shared = sum(s.source == StepSource.SAME_KERNEL for s in result.steps)
    text = f"{booted} kernel{'s' if booted != 1 else ''}"
    return f"{text} ({shared} more commits share one of their kernels)" if shared else text
