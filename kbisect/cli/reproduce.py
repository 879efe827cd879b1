"""`kbisect reproduce ID DIR`: a finished bisection's answer as a folder that reproduces it
without kbisect (kbisect.reports.reproducer says what goes in it)."""

import argparse
import os
from pathlib import Path

from kbisect.cli.job_service import no_start, with_client
from kbisect.cli.output import note, out
from kbisect.contract import INVESTIGATION_WORKFLOW, SWEEP_WORKFLOW, WORKFLOW
from kbisect.errors import UserError
from kbisect.jobs.client import JobClient, check_job_id, check_kind
from kbisect.reports import reproducer
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests


def checked_dir(path: Path, force: bool) -> Path:
    """DIR, before any service is asked: a folder that is empty or not there yet, or with
    --force any folder (its files of the same names are replaced)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise UserError(f"{path} is not a folder: give a new or empty folder for the files")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise UserError(
            f"{path} is not empty: give a new or empty folder, or --force to write there"
        )
    return path


async def find(client: JobClient, job_id: str) -> reproducer.Found:
    """The job's bisection, finished with a culprit, and what the files are made of."""
    kind = (await client.describe(job_id)).workflow_type
    if kind == SWEEP_WORKFLOW:
        raise UserError(
            f"not yet: {job_id} is a sweep; reproduce the bisection of a pair it changed "
            "('kbisect sweep --bisect', or 'kbisect bisect' of the pair)"
        )
    check_kind(job_id, kind, (WORKFLOW, INVESTIGATION_WORKFLOW))
    job = await client.bisection_of(job_id)  # an investigation's: its bisection
    result = await client.result(job)  # "still running" and "failed" are one line each
    culprit = reproducer.culprit_of(result, job)
    if (await client.bisection_request(job)).config:
        raise UserError(
            f"not yet: {job} built its kernels over your --config (localmodconfig, modules); "
            "'kbisect try' each commit reproduces it with kbisect"
        )
    parent = reproducer.parent_of(result.repo, culprit)
    commits = {"culprit": culprit, "parent": parent}
    manifest = manifests.load(result.testcase, Path(result.repo))  # a kselftest's: its tree
    configs = reproducer.job_configs(result.repo, commits, manifest)
    return reproducer.Found(result, job, culprit, parent, configs, manifest)


def write(folder: Path, files: dict[str, tuple[bytes, int]]) -> None:
    for name, (data, mode) in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # --force: never write through a link left there
        path.write_bytes(data)
        os.chmod(path, mode)


def cmd_reproduce(args: argparse.Namespace, settings: Settings) -> int:
    check_job_id(args.id)
    folder = checked_dir(Path(args.dir), args.force)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        found = await find(client, args.id)
        files = reproducer.files(found, settings)
        folder.mkdir(parents=True, exist_ok=True)
        write(folder, files)
        if len(found.configs) < 2:
            note("this host's cache lacks the job's builds: the script makes the .config from "
                 "kbisect's fragments (tinyconfig, the fragments, olddefconfig)")  # fmt: skip
        out(f"wrote {len(files)} files to {folder}: run {folder / 'reproduce.sh'} LINUX "
            f"(see {folder / 'README.md'})")  # fmt: skip
        return 0

    return with_client(settings, args, go)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    r = sub.add_parser(
        "reproduce",
        help="write a folder that reproduces a bisection's culprit against its parent "
        "without kbisect (a bash script, the kernel configs, the guest, a README)",
    )
    r.add_argument("id", help="the job id: a bisection's, or an investigation's (its bisection)")
    r.add_argument("dir", help="the folder to write, new or empty")
    r.add_argument("--force", action="store_true", help="write into DIR though it is not empty")
    no_start(r)
    r.set_defaults(func=cmd_reproduce)
