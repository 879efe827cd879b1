"""The results pages as a web application, read-only: GET and HEAD only, for the Host
names it serves and same-origin requests. The local service's Web UI front mounts it at
/kbisect/ (`results_app`, named to the front as a string: infra imports no door); `kbisect
web --listen ADDR` serves it on its own, for a deployment whose Temporal is not local."""

import asyncio
import dataclasses
import json
import tempfile
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import web

from kbisect.contract import (
    BACKPORT_WORKFLOW,
    EXPLAIN_WORKFLOW,
    RESULTS_PATH,
    SWEEP_WORKFLOW,
    BackportProgress,
    BisectResult,
    ExplainProgress,
    Progress,
    SweepProgress,
)
from kbisect.doors.web import pages
from kbisect.errors import KbisectError
from kbisect.jobs import explain_job, series_client
from kbisect.jobs.client import JobClient
from kbisect.reports import backport_report, explain_report, job_report, sweep_report
from kbisect.settings import Settings
from kbisect.testcases.manifest import PASSED

BASE = RESULTS_PATH
READS = ("GET", "HEAD")
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
LIST_LIMIT = 50  # jobs on the list page
LIST_LOOK_SECONDS = 2.0  # a running job's boots on the list: no worker, no wait


def refusal(method: str, host: str, origin: str | None, hosts: Iterable[str]) -> str | None:
    """Why a request is refused (None: served): a write, a Host the pages are not served
    as (a DNS-rebinding page), or another site's Origin."""
    if method not in READS:
        return "kbisect's results pages are read-only"
    name = host.lower().rsplit(":", 1)[0] if not host.startswith("[") else host.split("]")[0] + "]"
    if name not in {h.lower() for h in hosts}:
        return f"kbisect's results pages answer as {', '.join(hosts)} only"
    if origin is not None and origin.lower() not in (
        f"http://{host.lower()}",
        f"https://{host.lower()}",
    ):
        return "kbisect's results pages refuse requests from other sites"
    return None


def _guard(hosts: tuple[str, ...]) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        why = refusal(request.method, request.host, request.headers.get("Origin"), hosts)
        if why is not None:
            return web.Response(status=405 if request.method not in READS else 403, text=why + "\n")
        return await handler(request)

    return guard


def results_app(
    settings: Settings | None = None,
    address: str = "",
    hosts: tuple[str, ...] = LOOPBACK,
    temporal_ui: str = "",
) -> web.Application:
    """The pages at BASE of whatever app mounts this one. `address`: the Temporal server
    (default: the settings'); `temporal_ui`: where job links point ("": the same origin,
    as when the Web UI front mounts it)."""
    settings = settings or Settings.from_env()
    if address:
        settings = dataclasses.replace(
            settings, endpoint=dataclasses.replace(settings.endpoint, address=address)
        )
    site = Site(settings, temporal_ui)
    app = web.Application(middlewares=[_guard(hosts)])
    app.router.add_get("/", site.jobs)
    app.router.add_get("/jobs/{id}", site.job)
    app.router.add_get("/jobs/{id}/live", site.live)
    app.router.add_get("/jobs/{id}/plot.svg", site.plot)
    app.router.add_get("/jobs/{id}/flame.svg", site.flame)
    app.router.add_get("/series", site.series_list)
    app.router.add_get("/series/{name}", site.series)
    app.router.add_get("/api/jobs", site.api_jobs)
    app.router.add_get("/api/jobs/{id}", site.api_job)
    return app


def standalone(settings: Settings, host: str, hosts: tuple[str, ...]) -> web.Application:
    """`kbisect web`: the pages at BASE, and / sends a browser there."""
    root = web.Application(middlewares=[_guard(hosts)])

    async def home(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{BASE}/")

    root.router.add_get("/", home)
    root.add_subapp(
        f"{BASE}/", results_app(settings, hosts=hosts, temporal_ui=settings.endpoint.ui)
    )
    return root


class Site:
    """The pages' data: read from Temporal through kbisect's JobClient."""

    def __init__(self, settings: Settings, temporal_ui: str) -> None:
        self.settings = settings
        self.temporal_ui = temporal_ui
        self._client: JobClient | None = None
        self._lock = asyncio.Lock()
        self._done: dict[str, BisectResult] = {}  # ended jobs' results: they never change

    async def client(self) -> JobClient:
        async with self._lock:
            if self._client is None:
                self._client = await JobClient.connect(self.settings)
            return self._client

    def temporal_url(self, job_id: str) -> str:
        return (
            f"{self.temporal_ui}/namespaces/{self.settings.endpoint.namespace}/workflows/{job_id}"
        )

    # --- the jobs ---------------------------------------------------------------------
    async def rows(self) -> list[pages.JobRow]:
        client = await self.client()
        found = await client.jobs(LIST_LIMIT)

        async def row(j: Any) -> pages.JobRow:
            r = pages.JobRow(j.id, j.state, j.status, j.testcase, j.culprit, j.started)
            try:
                r.summary = await (await client.describe(j.id)).static_summary() or ""
                if r.kind == "bisect" and j.state in ("running", "completed"):
                    looked = await asyncio.wait_for(self._bisect(j.id), LIST_LOOK_SECONDS)
                    r.boots = looked[0].boots
            except (KbisectError, TimeoutError):
                pass  # no worker answers for it now: its row without the boots
            return r

        return list(await asyncio.gather(*(row(j) for j in found)))

    async def jobs(self, request: web.Request) -> web.StreamResponse:
        rows = await self.rows()
        return _html(pages.jobs_page(rows, BASE, request.query.get("q", "")))

    async def api_jobs(self, request: web.Request) -> web.StreamResponse:
        rows = await self.rows()
        return web.json_response(
            [
                {**dataclasses.asdict(r), "started": r.started.isoformat(), "kind": r.kind}
                for r in rows
            ]
        )

    async def _kind(self, job_id: str) -> tuple[str, bool]:
        """The job's workflow type, and whether it has ended."""
        desc = await (await self.client()).describe(job_id)
        return desc.workflow_type, desc.status is not None and desc.status.name != "RUNNING"

    async def _bisect(self, job_id: str) -> tuple[Progress, BisectResult | None, str]:
        """A bisection's progress (its result's, once it ended), its result and, for a
        failed job, why."""
        client = await self.client()
        if job_id in self._done:
            result = self._done[job_id]
            return _as_progress(result), result, ""
        if await client.running(job_id):
            return await client.progress(job_id), None, ""
        try:
            result = await client.result(job_id)
        except KbisectError as exc:  # failed, cancelled: its last progress, and why
            return await _last_progress(client, job_id), None, str(exc)
        self._done[job_id] = result
        return _as_progress(result), result, ""

    async def _view(self, job_id: str) -> pages.BisectView:
        progress, result, failed = await self._bisect(job_id)
        v = pages.BisectView(
            job_id,
            progress,
            done=result is not None or bool(failed),
            temporal_url=self.temporal_url(job_id),
            answer=failed,
        )
        if result is not None:
            v.answer = result.message
            v.report = job_report.markdown(result, job_id)
            v.sru = await asyncio.to_thread(_sru, result, job_id)
            v.explain, v.flame = await self._explained(job_id)
        return v

    async def _explained(self, job_id: str) -> tuple[list[str] | None, bool]:
        client = await self.client()
        eid = explain_job.explain_id(job_id)
        try:
            r = await client.explain_result(eid)
        except KbisectError:
            return None, False  # never explained, or not yet
        return explain_report.outcome_lines(r), any(r.stacks.values())

    async def job(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            kind, _ = await self._kind(job_id)
            if kind in (SWEEP_WORKFLOW, EXPLAIN_WORKFLOW, BACKPORT_WORKFLOW):
                status, text = await self._other(job_id, kind)
                return _html(
                    pages.other_page(
                        job_id, _word(kind), status, text, BASE, self.temporal_url(job_id)
                    )
                )
            return _html(pages.bisect_page(await self._view(job_id), BASE))
        except KbisectError as exc:
            return _html(pages.error_page(job_id, str(exc), BASE), status=404)

    async def live(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            kind, _ = await self._kind(job_id)
            if kind in (SWEEP_WORKFLOW, EXPLAIN_WORKFLOW, BACKPORT_WORKFLOW):
                status, text = await self._other(job_id, kind)
                return _html(pages.other_live(status, text, status not in RUNNING_WORDS))
            return _html(pages.bisect_live(await self._view(job_id), BASE))
        except KbisectError as exc:
            return web.Response(status=404, text=str(exc))

    async def _other(self, job_id: str, kind: str) -> tuple[str, str]:
        """A sweep's, explain or backport job's status word and its words (markdown)."""
        client = await self.client()
        if await client.running(job_id):
            p: SweepProgress | ExplainProgress | BackportProgress
            if kind == SWEEP_WORKFLOW:
                p = await client.sweep_progress(job_id)
            elif kind == EXPLAIN_WORKFLOW:
                p = await client.explain_progress(job_id)
            else:
                p = await client.backport_progress(job_id)
            return p.status, f"{p.status}: {getattr(p, 'message', '')}"
        try:
            if kind == SWEEP_WORKFLOW:
                s = await client.sweep_result(job_id)
                return "done", sweep_report.markdown(s)
            if kind == EXPLAIN_WORKFLOW:
                e = await client.explain_result(job_id)
                return e.status, "\n\n".join(explain_report.outcome_lines(e))
            b = await client.backport_result(job_id)
            return b.word, "\n\n".join(backport_report.outcome_lines(b))
        except KbisectError as exc:
            return "failed", str(exc)

    # --- pictures ---------------------------------------------------------------------
    async def plot(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            kind, _ = await self._kind(job_id)
            if kind == SWEEP_WORKFLOW:
                result: object = await (await self.client()).sweep_result(job_id)
            else:
                progress, done, _ = await self._bisect(job_id)
                result = done or _as_result(progress)
        except KbisectError as exc:
            return web.Response(status=404, text=str(exc))
        svg = await asyncio.to_thread(_svg, result)
        return web.Response(body=svg, content_type="image/svg+xml")

    async def flame(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            r = await (await self.client()).explain_result(explain_job.explain_id(job_id))
        except KbisectError as exc:
            return web.Response(status=404, text=str(exc))
        svg = await asyncio.to_thread(explain_report.flame_svg, r)
        return web.Response(text=svg, content_type="image/svg+xml")

    # --- series watches ---------------------------------------------------------------
    async def series_list(self, request: web.Request) -> web.StreamResponse:
        watches = await series_client.watches(await self.client())
        rows = [(w.watch.name, _watching(w)) for w in watches]
        return _html(pages.series_list_page(rows, BASE))

    async def series(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        client = await self.client()
        try:
            w = await series_client.describe(client, name)
            ticks = await series_client.ticks(client, name, limit=10)
        except KbisectError as exc:
            return _html(pages.error_page(name, str(exc), BASE), status=404)
        alerts = [sweep_report.alert_line(a) for t in ticks if t.result for a in t.result.alerts]
        sweeps = [(t.result.sweep, t.result.message) for t in ticks if t.result and t.result.sweep]
        return _html(pages.series_page(pages.SeriesView(name, _watching(w), alerts, sweeps), BASE))

    # --- JSON -------------------------------------------------------------------------
    async def api_job(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        client = await self.client()
        try:
            kind, _ = await self._kind(job_id)
            if kind == SWEEP_WORKFLOW and not await client.running(job_id):
                data: object = sweep_report.to_json(await client.sweep_result(job_id), job_id)
            elif kind in (SWEEP_WORKFLOW, EXPLAIN_WORKFLOW, BACKPORT_WORKFLOW):
                status, text = await self._other(job_id, kind)
                data = {"id": job_id, "status": status, "text": text}
            else:
                progress, result, failed = await self._bisect(job_id)
                data = (
                    job_report.to_json(result)
                    if result is not None
                    else {**dataclasses.asdict(progress), "failed": failed}
                )
        except KbisectError as exc:
            return web.json_response({"error": str(exc)}, status=404)
        return web.Response(text=json.dumps(data, default=str), content_type="application/json")


RUNNING_WORDS = (
    "validating",
    "building",
    "measuring",
    "booting",
    "tracing",
    "comparing",
    "planning",
)


def _word(kind: str) -> str:
    return {SWEEP_WORKFLOW: "sweep", EXPLAIN_WORKFLOW: "explain", BACKPORT_WORKFLOW: "backport"}[
        kind
    ]


def _watching(w: series_client.WatchSummary) -> str:
    watch = w.watch
    what = f"tree {watch.tree} tags {watch.tags}" if watch.tree else f"apt {watch.apt}"
    every = f", every {w.every}" if w.every else ""
    return f"{', '.join(watch.testcases)} on {what}{every}"


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", status=status)


def _as_progress(r: BisectResult) -> Progress:
    return Progress(
        status=r.status,
        repo=r.repo,
        testcase=r.testcase,
        mode=r.mode,
        metric=r.metric,
        unit=r.unit,
        old=r.old,
        new=r.new,
        candidates=len(r.candidates),
        steps=r.steps,
        message=r.message,
        verification=r.verification,
        boots=r.boots,
    )


def _as_result(p: Progress) -> BisectResult:
    return BisectResult(
        status=p.status,
        mode=p.mode,
        testcase=p.testcase,
        repo=p.repo,
        old=p.old,
        new=p.new,
        culprit=None,
        candidates=[],
        steps=p.steps,
        message=p.message,
        metric=p.metric,
        unit=p.unit,
        verification=p.verification,
        pass_fail=p.metric == PASSED,
    )


async def _last_progress(client: JobClient, job_id: str) -> Progress:
    try:
        return await client.progress(job_id)  # a closed workflow's query, from its history
    except KbisectError:
        return Progress(status="failed")


def _sru(result: BisectResult, job_id: str) -> str:
    from kbisect.reports.sru_note import sru_note

    if not result.culprit:
        return ""
    try:
        return sru_note(result, job_id)
    except (KbisectError, OSError):
        return ""  # the repository moved, or git cannot read it here: the page goes on


def _svg(result: object) -> bytes:
    from kbisect.reports.plot import plot_scores
    from kbisect.reports.sweep_plot import plot_sweep

    with tempfile.TemporaryDirectory(prefix="kbisect-web-") as tmp:
        out = Path(tmp) / "plot.svg"
        if isinstance(result, BisectResult):
            plot_scores(result, out)
        else:
            plot_sweep(result, out)  # type: ignore[arg-type]
        return out.read_bytes()
