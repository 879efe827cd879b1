"""`kbisect try`: build, boot and score one revision, here and now (no service)."""

import argparse
import json
from pathlib import Path

from kbisect.cli import output
from kbisect.cli.output import out, stages
from kbisect.settings import Settings


def cmd_try(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.pipeline import try_commit
    from kbisect.report_try import render_try, try_lines, try_to_json

    live = output.interactive()
    with stages(not args.json) as say:
        stage = [""]

        def on_stage(text: str) -> None:
            stage[0] = text
            say(text)

        def on_detail(text: str) -> None:
            if live:  # piped: the stages only, not every line of make
                say(f"{stage[0]}: {text}")

        result = try_commit(
            Path(args.repo),
            args.rev,
            args.testcase,
            args.profile,
            args.repetitions,
            on_stage=on_stage,
            on_detail=on_detail,
            settings=settings,
            trace=args.trace,
        )
    if args.json:
        out(json.dumps(try_to_json(result), indent=2))
    elif live:
        render_try(result, output.stdout_console())
    else:
        for line in try_lines(result):
            out(line)
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    t = sub.add_parser("try", help="build, boot and score one revision")
    t.add_argument("rev", help="the revision to try")
    t.add_argument("--repo", required=True, help="the kernel git repository (a path)")
    t.add_argument("--testcase", required=True, help="a testcase name ('kbisect testcases')")
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
