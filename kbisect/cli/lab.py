"""The reproduction lab: `kbisect lab create`."""

import argparse
from pathlib import Path

from kbisect.cli.output import out, stages
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.settings import Settings


def cmd_lab_create(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.infra.lab import LabOptions, create_lab, truth_path
    from kbisect.infra.lab_culprits import Culprit
    from kbisect.infra.lab_plan import PlanError, Span

    if args.culprit and args.culprit_patch:
        raise UserError("give --culprit or --culprit-patch, not both")
    try:
        options = LabOptions(
            commits=args.commits,
            mode=args.mode,
            culprit_at=args.culprit_at,
            culprit_patch=Path(args.culprit_patch) if args.culprit_patch else None,
            culprit=Culprit.parse(args.culprit or "nomerges"),
            merges=args.merges,
            broken_build=tuple(Span.parse(s) for s in args.broken_build),
            broken_boot=tuple(Span.parse(s) for s in args.broken_boot),
            seed=args.seed,
            replace=args.replace,
            distro=args.distro,
            fix_needs_prereq=args.fix_needs_prereq,
        )
        with stages(not args.quiet) as say:
            truth = create_lab(Path(args.dir), options, say)
    except PlanError as exc:
        raise UserError(str(exc)) from exc
    distro = truth.get("distro")
    tip = f", distro tip {distro['tip'][:12]} (tag lab-distro)" if isinstance(distro, dict) else ""
    out(
        f"lab {Path(args.dir).resolve()}: {args.commits} commits ({args.mode} mode), "
        f"good {str(truth['good'])[:12]}, bad {str(truth['bad'])[:12]}{tip}; "
        f"truth in {truth_path(Path(args.dir))} (keep it away from the bisector)"
    )
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    lab = sub.add_parser("lab", help="the reproduction lab").add_subparsers(
        dest="lab_command", required=True, metavar="COMMAND"
    )
    create = lab.add_parser("create", help="make a kernel git history with a known culprit")
    create.add_argument("dir", help="where the lab repository goes (a new or empty directory)")
    create.add_argument("--commits", type=int, default=64, help="commits after lab-good (64)")
    create.add_argument("--culprit-at", type=int, help="position of the culprit (default: random)")
    create.add_argument(
        "--mode",
        choices=tuple(Mode),
        default=Mode.REGRESSION.value,
        help="regression: the culprit brings the bug; fix: it removes it",
    )
    create.add_argument(
        "--culprit",
        metavar="KIND",
        help="what the culprit does: nomerges (the seed's bug, the default: counters show "
        "it), slowdown:P (read throughput about P%% lower, counters unchanged), "
        "writelock (buffered block device writes lock the inode exclusively: reads wait "
        "for a throttled writer, testcase fio-read-latency) or wbt (writeback "
        "throttling's 75 ms target for SSDs too; no effect under TCG); for pass/fail "
        "bisections: panic (every boot panics: testcase boots), fails (NVMe reads get "
        "I/O errors: testcase disk-read) or flaky:P (they do in P%% of boots: --flaky)",
    )
    create.add_argument(
        "--culprit-patch", help="make this patch the culprit instead of the seed's bug"
    )
    create.add_argument("--merges", type=int, default=0, help="side branches merged back")
    create.add_argument(
        "--broken-build",
        action="append",
        default=[],
        metavar="POS[:LEN]",
        help="a commit that does not compile; +N/-N is relative to the culprit",
    )
    create.add_argument(
        "--broken-boot",
        action="append",
        default=[],
        metavar="POS[:LEN]",
        help="a commit that panics at boot; +N/-N is relative to the culprit",
    )
    create.add_argument(
        "--distro",
        type=int,
        default=0,
        metavar="N",
        help="with --mode fix: also a distro branch (tag lab-distro) forked from the old "
        "endpoint with N commits of its own: SAUCE changes, a config annotation and "
        "cherry-picks of later upstream commits with stable's provenance line",
    )
    create.add_argument(
        "--fix-needs-prereq",
        action="store_true",
        help="with --distro: an earlier upstream commit refactors the fix's context, so "
        "the fix applies to the distro branch only after it",
    )
    create.add_argument("--seed", type=int, help="random seed (default: random)")
    create.add_argument("--replace", action="store_true", help="replace an existing lab there")
    create.add_argument("--quiet", action="store_true", help="no progress on stderr")
    create.set_defaults(func=cmd_lab_create)
