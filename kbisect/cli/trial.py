"""`kbisect try`: build, boot and score one revision, here and now (no service)."""

import argparse
from pathlib import Path

from kbisect.cli import output
from kbisect.cli.output import out, stages
from kbisect.contract import strict_json
from kbisect.errors import UserError
from kbisect.settings import Settings


def cmd_try(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.jobs.try_pipeline import TryOptions, try_commit, try_kernel
    from kbisect.reports.try_report import render_try, try_lines, try_to_json

    _check_try(args)

    live = output.interactive()
    with stages(not args.json) as say:
        stage = [""]

        def on_stage(text: str) -> None:
            stage[0] = text
            say(text)

        def on_detail(text: str) -> None:
            if live:  # piped: the stages only, not every line of make
                say(f"{stage[0]}: {text}")

        opts = TryOptions(args.profile, args.repetitions, args.trace, on_stage, on_detail, settings,
                          selftests_from=args.selftests_from or "")  # fmt: skip
        if args.kernel:
            modules = Path(args.modules) if args.modules else None
            result = try_kernel(args.kernel, args.testcase, opts, modules)
        else:
            result = try_commit(
                Path(args.repo), args.rev, args.testcase, opts, args.config, args.patch
            )
    if args.json:
        out(strict_json(try_to_json(result), indent=2))
    elif live:
        render_try(result, output.stdout_console())
    else:
        for line in try_lines(result):
            out(line)
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    t = sub.add_parser(
        "try", help="build, boot and score one revision (or boot a prebuilt kernel: --kernel)"
    )
    t.add_argument("rev", nargs="?", help="the revision to try (with --repo)")
    t.add_argument("--repo", help="the kernel git repository (a path)")
    t.add_argument(
        "--kernel",
        help="a prebuilt kernel instead of a build: a Debian package name "
        "(linux-image-6.1.0-47-cloud-amd64, fetched with apt), a .deb file, or a vmlinuz",
    )
    t.add_argument(
        "--modules",
        help="with --kernel FILE: its modules folder "
        "(default: /lib/modules/RELEASE for vmlinuz-RELEASE)",
    )
    t.add_argument(
        "--config",
        metavar="FILE",
        help="build from this kernel config (a distro's, e.g. /boot/config-*) trimmed by "
        "localmodconfig to the testcase's modules, instead of tinyconfig",
    )
    t.add_argument(
        "--patch",
        metavar="FILE",
        action="append",
        help="apply this patch to the revision before the build (repeatable, in order): a diff "
        "or a git format-patch mail or mbox; committed beside the revision, never in its work tree",
    )
    t.add_argument("--testcase", required=True, help="a testcase name ('kbisect testcases')")
    t.add_argument(
        "--selftests-from",
        metavar="REV",
        help="a kselftest:TARGET[:TEST] testcase's selftests from this revision of the repository "
        "(default: the revision tried)",
    )
    t.add_argument("--profile", help="device profile: fast or ebs-gp2 (default: the testcase's)")
    t.add_argument(
        "--repetitions", type=int, help="runs of the testcase in the boot (default: the testcase's)"
    )
    t.add_argument(
        "--trace",
        action="store_true",
        help="boot once more with blktrace on the testcase's disks and summarize it "
        "(Q2C, D2C, Q2G, I2D, merges, request sizes)",
    )
    t.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    t.set_defaults(func=cmd_try)


def _check_try(args: argparse.Namespace) -> None:
    if args.kernel and (args.rev or args.repo):
        raise UserError("give either a revision with --repo, or --kernel, not both")
    if not args.kernel and not (args.rev and args.repo):
        raise UserError("give a revision and --repo DIR, or --kernel PACKAGE_OR_FILE")
    if args.modules and not args.kernel:
        raise UserError("--modules goes with --kernel")
    if args.selftests_from and args.kernel:
        raise UserError("--selftests-from takes the selftests from --repo: not with --kernel")
    if args.patch and args.kernel:
        raise UserError("--patch applies to a revision's source: it does not go with --kernel")
    if args.config and args.kernel:
        raise UserError("--config builds a revision: it does not go with --kernel")
