"""CLI commands that talk to the bisection service (Temporal)."""

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError

from kbisect import service, settings
from kbisect.contract import BisectRequest, BisectResult, Progress
from kbisect.errors import InfraError, UserError
from kbisect.git import Git
from kbisect.report import bisect_log, markdown, to_json
from kbisect.sru import sru_note

console = Console()
err_console = Console(stderr=True)
RUNNING = "running"


def _pidfile() -> Path:
    return settings.data_dir() / "service.pid"


# --- server and workers --------------------------------------------------------------
def cmd_server(args: argparse.Namespace) -> int:
    from kbisect.infra import temporal_server

    # Until the dev server is up, a SIGTERM interrupts the wait (and start() kills it).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        proc = temporal_server.start(port=args.port, ui_port=args.ui_port)
    except KeyboardInterrupt:
        return 0
    console.print(
        f"Temporal dev server on 127.0.0.1:{args.port}, Web UI http://127.0.0.1:{args.ui_port}"
    )

    def stop(*_: object) -> None:  # Ctrl-C or SIGTERM: take the dev server down too
        proc.terminate()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    code = proc.wait()
    return 0 if code in (0, -signal.SIGTERM) else code


def cmd_worker(args: argparse.Namespace) -> int:
    asyncio.run(_workers(args))
    return 0


async def _workers(args: argparse.Namespace) -> None:
    """Run until SIGINT or SIGTERM, then shut the workers down cleanly."""
    from kbisect.workers.worker import make_workers, run_workers

    q = settings.Settings.from_env().queues
    queues = settings.Queues(
        control=args.control_queue or q.control,
        build=args.build_queue or q.build,
        vm=args.vm_queue or q.vm,
    )
    client = await service.connect(settings.Settings.from_env().endpoint)
    workers = make_workers(client, queues, args.builds, args.vms, workflows=not args.no_workflows)
    err_console.print(
        f"workers: workflows on {queues.control if not args.no_workflows else '-'}, "
        f"{args.builds} build(s) on {queues.build}, {args.vms} VM(s) on {queues.vm}"
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    running = asyncio.create_task(run_workers(workers))
    await asyncio.wait(
        [running, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    # An activity cut short here is retried by Temporal on another (or the next) worker.
    await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
    running.cancel()


def cmd_up(args: argparse.Namespace) -> int:
    """Server and workers together, for one machine; SIGTERM (kbisect down) stops both."""
    from kbisect.infra import temporal_server

    proc = temporal_server.start(port=args.port, ui_port=args.ui_port)
    _pidfile().write_text(str(os.getpid()))
    err_console.print(
        f"kbisect service up: Web UI http://127.0.0.1:{args.ui_port} (pid {os.getpid()})"
    )
    try:
        asyncio.run(_workers(args))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        _pidfile().unlink(missing_ok=True)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    pidfile = _pidfile()
    if not pidfile.exists():
        console.print("no kbisect service started by 'kbisect up' is running")
        return 0
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pidfile.unlink()
        console.print("the service had already stopped")
        return 0
    deadline = time.monotonic() + 60
    while pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if pidfile.exists():
        raise InfraError(f"the service (pid {pid}) did not stop within 60 s: kill {pid}")
    console.print(f"stopped the kbisect service (pid {pid})")
    return 0


def ensure_local_service(endpoint: settings.Endpoint, parallel: int = 1) -> None:
    """With the default local address and nothing there, start `kbisect up` in the background
    (with room for `parallel` builds and VMs at once)."""
    from kbisect.infra import temporal_server

    host, _, port = endpoint.address.partition(":")
    if host not in ("127.0.0.1", "localhost") or temporal_server.listening(host, int(port)):
        return
    log = settings.data_dir() / "service.log"
    with open(log, "ab") as out:
        subprocess.Popen(
            [
                *(sys.executable, "-m", "kbisect.cli", "up"),
                *("--builds", str(parallel), "--vms", str(parallel)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )
    err_console.print(
        f"started the local kbisect service in the background (log {log}; "
        "stop it with 'kbisect down')"
    )
    deadline = time.monotonic() + 90
    while not temporal_server.listening(host, int(port)):
        if time.monotonic() > deadline:
            raise InfraError(f"the local service did not come up in 90 s: see {log}")
        time.sleep(0.5)
    asyncio.run(_search_attributes_ready(endpoint, deadline))


async def _search_attributes_ready(endpoint: settings.Endpoint, deadline: float) -> None:
    """The dev server registers our search attributes a moment after it starts listening."""
    client = await service.connect(endpoint)
    while not await service.has_search_attributes(client, endpoint.namespace):
        if time.monotonic() > deadline:
            return  # jobs still run, without the search attributes
        await asyncio.sleep(0.5)


# --- jobs ----------------------------------------------------------------------------
def cmd_bisect(args: argparse.Namespace) -> int:
    repo = Path(args.repo).resolve()
    git = Git(repo)
    git.check_repo()
    # Resolve here too, so a typo fails before anything starts (the job resolves again).
    good = [git.resolve(g) for g in args.good]
    bad = git.resolve(args.bad)
    endpoint = settings.Settings.from_env().endpoint
    if args.parallel < 1:
        raise UserError("--parallel takes a number of commits, 1 or more")
    if not args.no_start:
        ensure_local_service(endpoint, args.parallel)
    queues = settings.Settings.from_env().queues
    req = BisectRequest(
        repo=str(repo),
        good=good,
        bad=bad,
        testcase=args.testcase,
        mode=args.mode,
        profile=args.profile,
        repetitions=args.repetitions,
        verify=not args.no_verify,
        parallel=args.parallel,
        build_queue=queues.build,
        vm_queue=queues.vm,
    )
    return asyncio.run(_start_and_follow(endpoint, req, queues.control, args))


async def _start_and_follow(
    endpoint: settings.Endpoint, req: BisectRequest, control_queue: str, args: argparse.Namespace
) -> int:
    client = await service.connect(endpoint)
    job_id = await service.start_job(client, endpoint, req, control_queue)
    err_console.print(f"job {job_id}\nWeb UI: {endpoint.job_url(job_id)}")
    if args.detach:
        print(job_id)
        return 0
    return await _follow(client, job_id, args.json)


def cmd_watch(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        return await _follow(client, args.id, args.json)

    return asyncio.run(go())


async def _follow(client: Client, job_id: str, as_json: bool) -> int:
    """Live progress until the job ends; Ctrl-C stops watching, not the job."""
    handle = service.handle(client, job_id)
    try:
        with Live(console=err_console, refresh_per_second=2, transient=False) as live:
            while True:
                desc = await handle.describe()
                if desc.status != WorkflowExecutionStatus.RUNNING:
                    break
                try:
                    live.update(_progress_view(await service.progress(client, job_id)))
                except InfraError:
                    pass  # no worker answered the query yet
                await asyncio.sleep(2)
    except (KeyboardInterrupt, asyncio.CancelledError):
        err_console.print(f"stopped watching; the job goes on: kbisect watch {job_id}")
        return 130
    return await _print_outcome(client, job_id, as_json)


async def _result(client: Client, job_id: str) -> BisectResult:
    handle = client.get_workflow_handle(job_id, result_type=BisectResult)
    desc = await service.describe(client, job_id)
    if desc.status == WorkflowExecutionStatus.RUNNING:
        raise UserError(f"job {job_id} is still running: follow it with 'kbisect watch {job_id}'")
    try:
        result: BisectResult = await handle.result()
        return result
    except WorkflowFailureError as exc:
        cause = exc.cause
        message = getattr(cause, "message", None) or str(cause)
        raise UserError(f"job {job_id} failed: {message}") from exc


async def _print_outcome(client: Client, job_id: str, as_json: bool) -> int:
    result = await _result(client, job_id)
    if as_json:
        print(json.dumps(to_json(result), indent=2))
    elif result.culprit:
        word = "fixed by" if result.mode == "fix" else "first bad commit"
        console.print(
            f"{word}: {result.culprit} {result.subjects.get(result.culprit, '')}", highlight=False
        )
        if result.verification:
            v = result.verification
            console.print(f"verification ({v.kind}): {v.status}, {v.message}", highlight=False)
    else:
        console.print(result.message, highlight=False)
        for c in result.candidates:
            console.print(f"  candidate {c} {result.subjects.get(c, '')}", highlight=False)
    return 0 if result.status in ("found", "ambiguous") else 1


def _progress_view(p: Progress) -> Group:
    header = Text.assemble(
        (p.status, "bold"),
        f"  {p.testcase} ({p.mode})  ",
        f"{p.candidates} candidates, {len(p.steps)} steps done, ~{p.steps_left} to go",
    )
    table = Table(expand=False)
    for col in ("#", "commit", "subject", "verdict", f"{p.metric} ({p.unit})", "how"):
        table.add_column(col)
    for i, s in enumerate(p.steps, 1):
        colour = {"good": "green", "bad": "red"}.get(s.verdict, "yellow")
        table.add_row(
            str(i),
            s.commit[:12],
            s.subject[:48],
            f"[{colour}]{s.verdict}[/]",
            "" if s.value is None else f"{s.value:g}",
            s.source,
        )
    now = Text("testing " + ", ".join(c[:12] for c in p.current)) if p.current else Text(p.message)
    return Group(header, table, now)


def _first(attrs: object, key: str) -> str:
    values = attrs.get(key) if isinstance(attrs, dict) else None
    return str(values[0]) if values else ""


def cmd_status(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        table = Table()
        for col in ("job", "state", "status", "testcase", "culprit", "started"):
            table.add_column(col)
        count = 0
        async for wf in client.list_workflows(
            f'WorkflowType="{service.WORKFLOW}"', limit=args.limit
        ):
            sa = wf.search_attributes
            table.add_row(
                wf.id,
                wf.status.name.lower() if wf.status else "?",
                _first(sa, "KbisectStatus"),
                _first(sa, "KbisectTestcase"),
                _first(sa, "KbisectCulprit")[:12],
                wf.start_time.strftime("%Y-%m-%d %H:%M"),
            )
            count += 1
        console.print(table if count else "no bisection jobs yet")
        return 0

    return asyncio.run(go())


def cmd_cancel(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        desc = await service.describe(client, args.id)  # a clear error for an unknown id
        if desc.status != WorkflowExecutionStatus.RUNNING:
            state = desc.status.name.lower() if desc.status else "ended"
            raise UserError(f"job {args.id} has already ended ({state})")
        await service.handle(client, args.id).cancel()
        console.print(f"asked {args.id} to stop")
        return 0

    return asyncio.run(go())


def cmd_report(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        result = await _result(client, args.id)
        if args.json:
            print(json.dumps(to_json(result), indent=2))
            return 0
        if args.sru:
            print(sru_note(result, args.id))
            return 0
        if args.bisect_log:
            Path(args.bisect_log).write_text(bisect_log(result))
        text = markdown(result, args.id)
        if args.plot:
            from kbisect.plot import plot_scores

            png = plot_scores(result, Path(args.plot))
            text += f"\n![scores across commits]({png})\n"
        print(text)
        return 0

    return asyncio.run(go())


def cmd_mark(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        progress = await service.progress(client, args.id)
        commit = Git(Path(progress.repo)).resolve(args.rev)
        console.print(await service.mark(client, args.id, commit, args.verdict))
        return 0

    return asyncio.run(go())


def cmd_resume(args: argparse.Namespace) -> int:
    async def go() -> int:
        client = await service.connect(settings.Settings.from_env().endpoint)
        console.print(await service.resume(client, args.id))
        return 0

    return asyncio.run(go())


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    s = sub.add_parser("server", help="run the Temporal dev server (persistent, Web UI on 8233)")
    s.add_argument("--port", type=int, default=7233)
    s.add_argument("--ui-port", type=int, default=8233)
    s.set_defaults(func=cmd_server)

    for name, helptext in (("worker", "run workers"), ("up", "run server and workers together")):
        w = sub.add_parser(name, help=helptext)
        w.add_argument("--builds", type=int, default=1, help="kernel builds at once (0: none)")
        w.add_argument("--vms", type=int, default=1, help="VMs at once (0: none)")
        w.add_argument("--no-workflows", action="store_true", help="activities only")
        w.add_argument("--control-queue")
        w.add_argument("--build-queue")
        w.add_argument("--vm-queue")
        if name == "up":
            w.add_argument("--port", type=int, default=7233)
            w.add_argument("--ui-port", type=int, default=8233)
        w.set_defaults(func=cmd_worker if name == "worker" else cmd_up)

    sub.add_parser("down", help="stop the service started by 'kbisect up'").set_defaults(
        func=cmd_down
    )

    b = sub.add_parser("bisect", help="start a bisection job and follow it")
    b.add_argument("--repo", required=True)
    b.add_argument("--good", required=True, action="append", help="repeatable")
    b.add_argument("--bad", required=True)
    b.add_argument("--testcase", required=True)
    b.add_argument("--mode", choices=("regression", "fix"), default="regression")
    b.add_argument("--profile")
    b.add_argument("--repetitions", type=int)
    b.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="K",
        help="test K commits at once, cutting the range in K+1 parts per round: fewer "
        "rounds, more builds; needs workers with room for K builds and VMs",
    )
    b.add_argument(
        "--no-verify",
        action="store_true",
        help="do not test the named commit reverted on (in fix mode: applied to) --bad",
    )
    b.add_argument("--detach", action="store_true", help="print the job id and return")
    b.add_argument("--no-start", action="store_true", help="never start a local service")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bisect)

    w = sub.add_parser("watch", help="follow a job")
    w.add_argument("id")
    w.add_argument("--json", action="store_true")
    w.set_defaults(func=cmd_watch)

    st = sub.add_parser("status", help="list jobs")
    st.add_argument("--limit", type=int, default=20)
    st.set_defaults(func=cmd_status)

    c = sub.add_parser("cancel", help="stop a job")
    c.add_argument("id")
    c.set_defaults(func=cmd_cancel)

    r = sub.add_parser("report", help="a finished job as markdown (or --json)")
    r.add_argument("id")
    r.add_argument("--json", action="store_true")
    r.add_argument("--plot", help="also write the scores across commits to this PNG")
    r.add_argument("--bisect-log", help="also write the git bisect log to this file")
    r.add_argument("--sru", action="store_true", help="a draft Ubuntu SRU justification")
    r.set_defaults(func=cmd_report)

    m = sub.add_parser("mark", help="tell a running job that a commit is good, bad or skip")
    m.add_argument("id")
    m.add_argument("rev")
    m.add_argument("verdict", choices=("good", "bad", "skip"))
    m.set_defaults(func=cmd_mark)

    rs = sub.add_parser("resume", help="go on with a job blocked on a host problem, once fixed")
    rs.add_argument("id")
    rs.set_defaults(func=cmd_resume)
