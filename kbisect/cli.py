"""The `kbisect` command."""

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kbisect.errors import (
    BootError,
    InfraError,
    KbisectError,
    KernelBuildError,
    TestcaseFailedError,
    UserError,
)

# Exit codes: one per kind of failure, so scripts can tell them apart.
EXIT_CODES: list[tuple[type[KbisectError], int]] = [
    (UserError, 2),
    (KernelBuildError, 3),
    (BootError, 4),
    (TestcaseFailedError, 5),
    (InfraError, 6),
]

err_console = Console(stderr=True)


@contextmanager
def progress_display(enabled: bool) -> Iterator[Callable[[str], None]]:
    """A spinner with the current step; yields a function that updates it."""
    if not enabled:
        yield lambda _: None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task("starting", total=None)
        yield lambda text: progress.update(task, description=text[:110])


def _lab_create(args: argparse.Namespace) -> int:
    from kbisect.infra.lab import LabOptions, create_lab, truth_path
    from kbisect.infra.lab_plan import PlanError, Span

    try:
        options = LabOptions(
            commits=args.commits,
            mode=args.mode,
            culprit_at=args.culprit_at,
            culprit_patch=Path(args.culprit_patch) if args.culprit_patch else None,
            merges=args.merges,
            broken_build=tuple(Span.parse(s) for s in args.broken_build),
            broken_boot=tuple(Span.parse(s) for s in args.broken_boot),
            seed=args.seed,
            replace=args.replace,
        )
        with progress_display(not args.quiet) as say:
            truth = create_lab(Path(args.dir), options, say)
    except PlanError as exc:
        raise UserError(str(exc)) from exc
    print(
        f"lab {Path(args.dir).resolve()}: {args.commits} commits ({args.mode} mode), "
        f"good {str(truth['good'])[:12]}, bad {str(truth['bad'])[:12]}; "
        f"truth in {truth_path(Path(args.dir))} (keep it away from the bisector)"
    )
    return 0


def _try(args: argparse.Namespace) -> int:
    from kbisect.pipeline import try_commit
    from kbisect.report_try import render_try, try_to_json

    with progress_display(not args.json) as say:
        stage = [""]

        def on_stage(text: str) -> None:
            stage[0] = text
            say(text)

        def on_detail(text: str) -> None:
            say(f"{stage[0]}: {text}")

        result = try_commit(
            Path(args.repo),
            args.rev,
            args.testcase,
            args.profile,
            args.repetitions,
            on_stage=on_stage,
            on_detail=on_detail,
        )
    if args.json:
        print(json.dumps(try_to_json(result), indent=2))
    else:
        render_try(result, Console())
    return 0


def _testcases(args: argparse.Namespace) -> int:
    from kbisect.testcases import manifest

    for name in manifest.available():
        m = manifest.load(name)
        print(f"{name}: {m.description} (primary: {m.primary}, profile: {m.profile})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbisect", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    lab = sub.add_parser("lab", help="the reproduction lab").add_subparsers(
        dest="lab_command", required=True
    )
    create = lab.add_parser("create", help="make a kernel git history with a known culprit")
    create.add_argument("dir")
    create.add_argument("--commits", type=int, default=64)
    create.add_argument("--culprit-at", type=int, help="position of the culprit (default: random)")
    create.add_argument("--mode", choices=("regression", "fix"), default="regression")
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
    create.add_argument("--seed", type=int, help="random seed (default: random)")
    create.add_argument("--replace", action="store_true", help="replace an existing lab there")
    create.add_argument("--quiet", action="store_true")
    create.set_defaults(func=_lab_create)

    t = sub.add_parser("try", help="build, boot and score one revision")
    t.add_argument("rev")
    t.add_argument("--repo", required=True)
    t.add_argument("--testcase", required=True)
    t.add_argument("--profile", help="device profile: fast or ebs-gp2 (default: the testcase's)")
    t.add_argument("--repetitions", type=int)
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=_try)

    tc = sub.add_parser("testcases", help="list the testcase library")
    tc.set_defaults(func=_testcases)

    from kbisect.cli_service import add_commands

    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    from kbisect import service

    if service.used and argv is None:  # a real process, not a test calling main()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except KbisectError as exc:
        code = next(c for t, c in EXIT_CODES if isinstance(exc, t))
        where = getattr(exc, "log_path", "") or getattr(exc, "console_path", "")
        suffix = f" (log: {where})" if where else ""
        err_console.print(
            f"kbisect: error: {exc}{suffix}", markup=False, highlight=False, soft_wrap=True
        )
        return code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
