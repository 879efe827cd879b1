"""The `kbisect` program: the CLI's commands and the doors' (chat, gitlab), one error
handler for all. It sits above both front doors, which never import each other.

Every command gets the settings read once at its start; a KbisectError from anywhere
becomes one line on stderr and the exit code of its kind (2 bad input, 3 does not build,
4 does not boot, 5 testcase failed, 6 host problem, 7 cannot test), never a traceback.
"""

import argparse
import os
import sys
from collections.abc import Callable

from kbisect.errors import (
    BootError,
    CannotTestError,
    InfraError,
    KbisectError,
    KernelBuildError,
    TestcaseFailedError,
    UserError,
)
from kbisect.settings import Settings

# Exit codes: one per kind of failure, so scripts can tell them apart (the first kind
# that matches: a CannotTestError is a UserError too).
EXIT_CODES: list[tuple[type[KbisectError], int]] = [
    (CannotTestError, 7),
    (UserError, 2),
    (KernelBuildError, 3),
    (BootError, 4),
    (TestcaseFailedError, 5),
    (InfraError, 6),
]

Command = Callable[[argparse.Namespace, Settings], int]


def exit_code(exc: KbisectError) -> int:
    return next((c for t, c in EXIT_CODES if isinstance(exc, t)), 1)


def error_line(exc: KbisectError) -> str:
    where = getattr(exc, "log_path", "") or getattr(exc, "console_path", "")
    suffix = f" (log: {where})" if where else ""
    return " ".join(f"kbisect: error: {exc}{suffix}".split())


def run_command(func: Command, args: argparse.Namespace) -> int:
    """The one place errors become exit codes: the settings are read here, once."""
    try:
        return func(args, Settings.from_env())
    except KbisectError as exc:
        print(error_line(exc), file=sys.stderr, flush=True)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head` stopped reading: quiet, as git is
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 141


def build_parser() -> argparse.ArgumentParser:
    from kbisect.cli import (
        backport,
        explain,
        gc,
        help_pages,
        jobs,
        lab,
        reproduce,
        series,
        service,
        sweep,
        testcases,
        trees,
        trial,
    )
    from kbisect.doors import commands as doors

    parser = argparse.ArgumentParser(
        prog="kbisect",
        description="Kernel bisection: build, boot and score kernels until one commit is named.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (
        lab,
        trial,
        testcases,
        service,
        jobs,
        sweep,
        explain,
        backport,
        reproduce,
        series,
        gc,
        trees,
        doors,
    ):
        group.add_commands(sub)
    help_pages.describe(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code = run_command(args.func, args)
    from kbisect.jobs import client

    if client.used and argv is None:  # a real process, not a test calling main()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
