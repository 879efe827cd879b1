"""`kbisect series watch|list|show|check|remove`: series watches. A watch looks for new
kernels on a schedule (a named tree's tags or head, or Debian packages in apt), sweeps
each against the last one measured, and keeps what it finds; `kbisect chat matrix
--series NAME` posts its alerts."""

import argparse
import re
from dataclasses import asdict
from datetime import timedelta

from kbisect.builders.new_kernels import check_source
from kbisect.builders.trees import Trees
from kbisect.cli.job_service import no_start, with_client
from kbisect.cli.output import note, out
from kbisect.cli.sweep import checked_measure, measure_options
from kbisect.contract import DEFAULT_SERIES_EVERY_MINUTES, strict_json
from kbisect.errors import UserError
from kbisect.jobs import series_client
from kbisect.jobs.client import JobClient
from kbisect.reports.lines import columns
from kbisect.reports.sweep_report import alert_line
from kbisect.settings import Settings
from kbisect.workflows.series_types import SeriesWatch
from kbisect.workflows.sweep_types import PairWord

_EVERY_RE = re.compile(r"^(\d{1,6})([mhd])$")
_UNIT = {"m": 60, "h": 3600, "d": 86400}


def every(text: str) -> timedelta:
    """30m, 6h, 1d: how often a watch looks."""
    match = _EVERY_RE.match(text)
    if not match or int(match[1]) == 0:
        raise UserError(f"--every {text!r}: give minutes, hours or days, e.g. 30m, 6h or 1d")
    return timedelta(seconds=int(match[1]) * _UNIT[match[2]])


def watch_of(args: argparse.Namespace, settings: Settings) -> SeriesWatch:
    series_client.check_name(args.name)
    watch = SeriesWatch(
        name=args.name,
        testcases=list(args.testcase),
        tree=args.tree or "",
        tags=args.tags or "",
        apt=args.apt or "",
        metric=args.metric,
        profile=args.profile,
        boots=args.boots,
        min_effect=checked_measure(args),
        trace=args.trace,
        max_boots=args.max_boots,
    )
    check_source(watch)
    if watch.tree:
        Trees(settings).get(watch.tree)  # "no tree NAME: add it with ..."
    return watch


def _source(w: SeriesWatch) -> str:
    if w.apt:
        return f"apt {w.apt}"
    return f"tree {w.tree} " + (f"tags {w.tags}" if w.tags else "head")


def cmd_watch(args: argparse.Namespace, settings: Settings) -> int:
    watch = watch_of(args, settings)
    period = every(args.every)

    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await client.require_workers(client.needs())
        sid = await series_client.create(client, watch, period)
        if args.json:
            out(strict_json({"schedule": sid, **asdict(watch)}, indent=2))
            return 0
        out(f"watch {watch.name} ({sid}): {_source(watch)}, every {args.every}")
        note("the first look takes the newest kernel as the baseline; newer ones are swept")
        note(f"see it with 'kbisect series show {watch.name}'")
        return 0

    return with_client(settings, args, go)


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    async def go(client: JobClient, args: argparse.Namespace) -> int:
        found = await series_client.watches(client)
        if args.json:
            out(strict_json([w.to_json() for w in found], indent=2))
        elif not found:
            out("no watches yet: make one with 'kbisect series watch NAME ...'")
        else:
            rows = [
                (
                    w.watch.name,
                    _source(w.watch),
                    ",".join(w.watch.testcases),
                    str(w.every or "-"),
                    w.next_run.isoformat(timespec="seconds") if w.next_run else "-",
                    w.last_tick or "-",
                )
                for w in found
            ]
            header = ("WATCH", "SOURCE", "TESTCASES", "EVERY", "NEXT", "LAST TICK")
            out(columns(header, rows))
        return 0

    return with_client(settings, args, go)


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    async def go(client: JobClient, args: argparse.Namespace) -> int:
        summary = await series_client.describe(client, args.name)
        ticks = await series_client.ticks(client, args.name)
        if args.json:
            out(strict_json(_show_json(summary, ticks), indent=2))
            return 0
        out(f"watch {args.name}: {_source(summary.watch)}, every {summary.every}")
        for t in ticks:
            when = t.started.isoformat(timespec="seconds") if t.started else "-"
            what = t.result.message if t.result else t.error
            out(f"tick {t.id} {t.state} {when}: {what}".rstrip(": "))
            for alert in t.result.alerts if t.result else []:
                undecided = alert.pair.verdict == PairWord.CANNOT_TELL
                out(f"{'undecided' if undecided else 'alert'} {alert_line(alert)}")
        kept = next((t.result.kept for t in ticks if t.result and t.result.kept), None)
        for kernel, figures in (kept or {}).items():
            boots = ", ".join(f"{tc} {n}" for tc, n in figures.items()) or "baseline, no boots"
            out(f"kept {kernel}: {boots}")
        return 0

    return with_client(settings, args, go)


def _show_json(
    summary: series_client.WatchSummary, ticks: list[series_client.Tick]
) -> dict[str, object]:
    return {
        "watch": summary.to_json(),
        "ticks": [
            {
                "id": t.id,
                "state": t.state,
                "started": t.started.isoformat() if t.started else None,
                "error": t.error,
                **(asdict(t.result) if t.result else {}),
            }
            for t in ticks
        ],
    }


def cmd_check(args: argparse.Namespace, settings: Settings) -> int:
    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await series_client.trigger(client, args.name)
        out(f"watch {args.name}: looking now (after the look under way, if one is)")
        return 0

    return with_client(settings, args, go)


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    async def go(client: JobClient, args: argparse.Namespace) -> int:
        await series_client.remove(client, args.name)
        out(f"removed watch {args.name} (what it measured is kept on the build host)")
        return 0

    return with_client(settings, args, go)


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("series", help="series watches: sweep each new kernel on a schedule")
    ssub = s.add_subparsers(dest="series_command", required=True, metavar="ACTION")

    w = ssub.add_parser("watch", help="look for new kernels on a schedule and sweep each")
    w.add_argument("name", help="the watch's name (lower case, digits, . _ -)")
    w.add_argument("--tree", help="a named tree ('kbisect tree add'): its tags, or its head")
    w.add_argument("--tags", metavar="GLOB", help="the tree's tags matching this, e.g. 'v6.*'")
    w.add_argument(
        "--apt",
        metavar="GLOB",
        help="Debian packages whose names match, e.g. 'linux-image-6.1.0-*-cloud-amd64'",
    )
    measure_options(w)
    w.add_argument(
        "--every",
        default=f"{DEFAULT_SERIES_EVERY_MINUTES // 60}h",
        help=f"how often to look: 30m, 6h, 1d ({DEFAULT_SERIES_EVERY_MINUTES // 60}h)",
    )
    w.add_argument("--json", action="store_true", help="the watch as JSON on stdout")
    no_start(w)
    w.set_defaults(func=cmd_watch)

    ls = ssub.add_parser("list", help="the watches, their sources and next looks")
    ls.add_argument("--json", action="store_true", help="a JSON list on stdout")
    no_start(ls)
    ls.set_defaults(func=cmd_list)

    sh = ssub.add_parser("show", help="a watch's looks, alerts and what it kept")
    sh.add_argument("name", help="the watch's name")
    sh.add_argument("--json", action="store_true", help="the watch and its ticks as JSON")
    no_start(sh)
    sh.set_defaults(func=cmd_show)

    c = ssub.add_parser("check", help="look for new kernels now")
    c.add_argument("name", help="the watch's name")
    no_start(c)
    c.set_defaults(func=cmd_check)

    r = ssub.add_parser("remove", help="stop a watch (what it measured stays kept)")
    r.add_argument("name", help="the watch's name")
    no_start(r)
    r.set_defaults(func=cmd_remove)
