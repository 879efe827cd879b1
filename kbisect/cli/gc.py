"""`kbisect gc`: prune old VM runs, unused artifacts, guest images and job configs, slots
of gone repositories and old verify refs."""

import argparse
import math
from pathlib import Path

from kbisect.cli.output import out
from kbisect.contract import GC_DAYS, strict_json
from kbisect.errors import UserError
from kbisect.settings import Settings


def cmd_gc(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.builders.cache_gc import collect
    from kbisect.infra.git import Git

    for repo in args.repo:  # a folder that is no git repository has no refs to prune
        Git(Path(repo)).check_repo()
    report = collect(
        settings,
        _days(args.older_than),
        args.dry_run,
        artifacts=not args.keep_artifacts,
        repos=[Path(r) for r in args.repo],
    )
    removed = [
        *(("run", str(p)) for p in report.runs),
        *(("slot", str(p)) for p in report.slots),
        *(("artifact", str(p)) for p in report.artifacts),
        *(("image", str(p)) for p in report.images),
        *((p.suffix.lstrip("."), str(p)) for p in report.configs),  # a config or a patch
        *(("ref", f"{repo}:{ref}") for repo, ref in report.refs),
    ]
    if args.json:
        rows = [{"kind": k, "what": w} for k, w in removed]
        data = {"dry_run": report.dry_run, "removed": rows, "kept": report.kept}
        out(strict_json({**data, "bytes_freed": report.bytes_freed}, indent=2))
        return 0
    verb = "would remove" if report.dry_run else "removed"
    for kind, what in removed:
        out(f"{verb} {kind} {what}")
    for why in report.kept:
        out(f"kept {why}")
    out(f"{verb} {len(removed)} item(s), {report.bytes_freed / 2**20:.1f} MiB")
    return 0


def _days(value: float) -> float:
    # float() takes nan and inf: nan would compare false to every age and remove nothing.
    if not math.isfinite(value) or value < 0:
        raise UserError(f"--older-than {value:g}: give a number of days, 0 or more")
    return value


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    g = sub.add_parser(
        "gc", help="prune old runs, unused artifacts, guest images, configs and build slots"
    )
    g.add_argument(
        "--older-than",
        type=float,
        default=GC_DAYS,
        metavar="DAYS",
        help=f"remove what was last used this many days ago or more (default {GC_DAYS:g})",
    )
    g.add_argument("--dry-run", action="store_true", help="list what would go; remove nothing")
    g.add_argument(
        "--keep-artifacts", action="store_true", help="keep built kernels whatever their age"
    )
    g.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="DIR",
        help="also prune old refs/kbisect/verify/, backport/ and patched/ refs in this "
        "repository (repeatable); the build slots' repositories are always included",
    )
    g.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    g.set_defaults(func=cmd_gc)
