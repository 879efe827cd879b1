"""`kbisect bisect --from-report MAIL`: an Intel 0-day/LKP report's fields as the
bisection's options, one printed line a field with the mail's lines it came from. An
option given on the command line wins over the report's; a field neither gives is one
line that says what is missing. The mail is read as text (kbisect.reports.lkp_report);
the fields are chosen as every door chooses them (kbisect.reports.lkp_job)."""

import argparse

from kbisect.builders.trees import Trees
from kbisect.errors import UserError
from kbisect.reports import lkp_job, lkp_report
from kbisect.settings import Settings


def fill(args: argparse.Namespace, settings: Settings) -> list[str]:
    """Set the bisection's options in `args` from the report in args.from_report (what the
    command line gives stays); the lines that say each field and where it came from."""
    if args.kernels:
        raise UserError("--from-report bisects the report's commits: drop --kernels")
    report = lkp_report.parse(lkp_report.read_mail(args.from_report))
    given = lkp_job.Given(
        testcase=args.testcase,
        metric=args.metric,
        good=tuple(args.good or ()),
        bad=args.bad,
        mode=args.mode,
        tree=args.tree,
        repo=args.repo,
    )
    filled = lkp_job.fill(report, given, Trees(settings).all())
    args.mode, args.testcase, args.metric = filled.mode, filled.testcase, filled.metric
    args.good, args.bad = filled.good, filled.bad
    if not args.repo:
        args.tree = filled.tree
    return filled.lines
