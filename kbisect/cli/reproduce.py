"""`kbisect reproduce ID DIR`: a finished bisection's answer (or a sweep's changed pair) as
a folder that reproduces it without kbisect (kbisect.reports.reproducer says what goes in
it)."""

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


async def find(client: JobClient, job_id: str, pair: int | None = None) -> reproducer.Found:
    """The job's bisection, finished with a culprit (or the sweep's changed pair: `pair`,
    the new kernel's place in the series, where it changed more than one), and what the
    files are made of."""
    kind = (await client.describe(job_id)).workflow_type
    if kind == SWEEP_WORKFLOW:
        return await _sweep_pair(client, job_id, pair)
    check_kind(job_id, kind, (WORKFLOW, INVESTIGATION_WORKFLOW))
    if pair is not None:
        raise UserError(f"--pair takes a sweep's pair: {job_id} is no sweep; drop --pair")
    job = await client.bisection_of(job_id)  # an investigation's: its bisection
    result = await client.result(job)  # "still running" and "failed" are one line each
    culprit = reproducer.culprit_of(result, job)
    if (await client.bisection_request(job)).config:
        raise UserError(_OWN_CONFIG.format(job=job))
    parent = reproducer.parent_of(result.repo, culprit)
    manifest = manifests.load(result.testcase, Path(result.repo))  # a kselftest's: its tree
    configs = reproducer.job_configs(result.repo, {"culprit": culprit, "parent": parent}, manifest)
    return reproducer.of_bisection(result, job, parent, configs, manifest)


_OWN_CONFIG = (
    "not yet: {job} built its kernels over your --config (localmodconfig, modules); "
    "'kbisect try' each commit reproduces it with kbisect"
)


async def _sweep_pair(client: JobClient, job: str, pair: int | None) -> reproducer.Found:
    result = await client.sweep_result(job)  # "still running" and "failed": one line each
    changed = reproducer.changed_pair(result, job, pair)
    req = await client.sweep_request(job)
    if req is not None and req.config:
        raise UserError(_OWN_CONFIG.format(job=job))
    old, new = reproducer.sweep_commits(result, job, changed)
    manifest = manifests.load(changed.testcase, Path(result.repo))
    adjacent = reproducer.first_parent(result.repo, new) == old
    configs = reproducer.job_configs(result.repo, {"new": new, "old": old}, manifest)
    return reproducer.of_sweep(result, job, changed, configs, manifest, adjacent)


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
        found = await find(client, args.id, args.pair)
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
        help="write a folder that reproduces a bisection's culprit against its parent, or a "
        "sweep's changed pair, without kbisect (a bash script, the kernel configs, the guest, "
        "a README)",
    )
    r.add_argument(
        "id",
        help="the job id: a bisection's, an investigation's (its bisection) or a sweep's (its "
        "changed pair)",
    )
    r.add_argument(
        "--pair",
        type=int,
        metavar="N",
        help="a sweep that changed more than one pair: the pair that ends at its Nth kernel",
    )
    r.add_argument("dir", help="the folder to write, new or empty")
    r.add_argument("--force", action="store_true", help="write into DIR though it is not empty")
    no_start(r)
    r.set_defaults(func=cmd_reproduce)
