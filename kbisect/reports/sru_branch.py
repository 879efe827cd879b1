"""The SRU commit kbisect built and tested, pushed to a GitLab project as a branch and a
merge request: the files it changes go up byte for byte, through the commits API."""

import base64
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gitlab

from kbisect.errors import UserError
from kbisect.infra.git import Git, git_argv, git_env
from kbisect.reports.sru_patch import SruCommit


@dataclass(frozen=True)
class Change:
    """One file the tested commit changes, as the commits API's actions write it."""

    path: str
    old_blob: str | None  # None: the file is new
    old_mode: str  # "000000" when it is new
    new_mode: str  # "000000" when it is deleted
    content: bytes | None  # None when it is deleted
    mode_only: bool = False

    def actions(self) -> list[dict[str, Any]]:
        if self.content is None:
            return [{"action": "delete", "file_path": self.path}]
        executable = self.new_mode == "100755"
        was = "100644" if self.old_blob is None else self.old_mode
        acts: list[dict[str, Any]] = []
        if not self.mode_only:
            acts.append(
                {
                    "action": "create" if self.old_blob is None else "update",
                    "file_path": self.path,
                    "content": base64.b64encode(self.content).decode(),
                    "encoding": "base64",
                }
            )
        if was != self.new_mode:  # the API sets the mode only with chmod
            acts.append({"action": "chmod", "file_path": self.path, "execute_filemode": executable})
        return acts


def tested_changes(git: Git, made: SruCommit) -> list[Change]:
    """The files the SRU commit changes against the endpoint it was tested on."""
    raw = git.run("diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", made.onto, made.commit)
    fields = raw.split("\0")
    changes = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(":"):
            continue
        old_mode, new_mode, old_blob, new_blob, status = meta[1:].split(" ")
        if {old_mode, new_mode} & {"120000", "160000"}:
            raise UserError(
                f"the tested change touches a symlink or submodule ({path}): the commits API "
                "cannot write it; send the patch ('kbisect report JOB --sru-patch DIR')"
            )
        if status == "D":
            changes.append(Change(path, old_blob, old_mode, new_mode, None))
            continue
        blob = subprocess.run(
            git_argv(git.repo, "cat-file", "blob", new_blob),
            env=git_env(),
            capture_output=True,
            check=True,
        ).stdout
        changes.append(
            Change(
                path,
                None if status == "A" else old_blob,
                old_mode,
                new_mode,
                blob,
                mode_only=status == "M" and old_blob == new_blob,
            )
        )
    if not changes:
        raise UserError("the tested commit changes no file: nothing to push")
    return changes


def _blob_at(project: Any, path: str, ref: str) -> str | None:
    """The blob id of path at ref in the GitLab project (HEAD on the files API), or None."""
    try:
        headers = project.files.head(path, ref=ref)
    except gitlab.GitlabHeadError as exc:
        if exc.response_code == 404:
            return None
        raise
    return str(headers.get("X-Gitlab-Blob-Id", "")) or None


def push_sru_branch(
    project: Any,
    target: str,
    branch: str,
    made: SruCommit,
    changes: list[Change],
    job: str,
    description: str,
    quote: Callable[[str], str],
) -> Any:
    """The tested commit on a new branch from `target`, through the commits API, and a merge
    request of it (returned), its title and description made inert by `quote` (the door's:
    a subject may carry a mention). Refused when the target's copies of the files are not
    the ones the tested commit started from: the change would not be what was tested."""
    base = str(project.branches.get(target).commit["id"])
    differ = [c.path for c in changes if _blob_at(project, c.path, base) != c.old_blob]
    if differ:
        raise UserError(
            f"`{target}` ({base[:12]}) has other versions of {', '.join(differ)} "
            f"than {made.onto[:12]}, where kbisect tested the change: it would not be "
            f"the tested change; send the patch ('kbisect report {job} --sru-patch DIR', "
            "then git am) or ask on a merge request into the branch it was tested on"
        )
    project.commits.create(
        {
            "branch": branch,
            "start_sha": base,
            "commit_message": made.message,
            "author_name": made.author[0],
            "author_email": made.author[1],
            "actions": [a for c in changes for a in c.actions()],
        }
    )
    return project.mergerequests.create(
        {
            "source_branch": branch,
            "target_branch": target,
            "title": quote(made.message.split("\n", 1)[0]),
            "description": quote(description),
        }
    )
