"""The results pages as a web application, read-only: GET and HEAD only, for the Host
names it serves, same-origin, and never fetched by another site's page. The local
service's Web UI front mounts it at /kbisect/ (`results_app`, named to the front as a
string: infra imports no door); `kbisect web --listen ADDR` serves it on its own, for a
deployment whose Temporal is not local, optionally to holders of a token only. What a page
shows is kept by its job's state, so no client makes this host ask Temporal about every
listed job or draw a plot again at each request."""

import asyncio
import base64
import binascii
import dataclasses
import hashlib
import hmac
import logging
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from aiohttp import web
from aiohttp.typedefs import Middleware

from kbisect import evidence
from kbisect.builders.trees import Trees
from kbisect.contract import (
    EVIDENCE_FILE_BYTES,
    EXPLAIN_WORKFLOW,
    INVESTIGATION_WORKFLOW,
    RESULTS_PATH,
    SWEEP_WORKFLOW,
    WORKFLOW,
    strict_json,
)
from kbisect.doors.web import pages
from kbisect.doors.web.html import PAGE_CSP
from kbisect.errors import KbisectError, UserError
from kbisect.infra import http_errors
from kbisect.infra.http_errors import ERROR_PAGE, styled
from kbisect.infra.qemu import read_tail
from kbisect.infra.temporal_server import LOOPBACK_NAMES, foreign
from kbisect.jobs import explain_job, investigation, series_client
from kbisect.jobs.client import JOB_KINDS, JobClient, JobSummary, kind_name
from kbisect.reports import (
    backport_report,
    explain_report,
    investigation_report,
    job_report,
    sweep_report,
)
from kbisect.reports.answer import Answer
from kbisect.settings import Settings
from kbisect.testcases.manifest import PASSED
from kbisect.workflows.bisect_types import BisectResult, Progress
from kbisect.workflows.investigation_types import Stage
from kbisect.workflows.sweep_types import SweepResult

log = logging.getLogger(__name__)
BASE = RESULTS_PATH
READS = ("GET", "HEAD")
LIST_LIMIT = 50  # jobs on the list page
LIST_LOOK_SECONDS = 2.0  # a running job's boots on the list: no worker, no wait
LIST_FRESH_SECONDS = 10.0  # a running job's row on the list is read again after this
PLOTS_KEPT = 64  # drawn plots kept, the last one of each job
_PLOTTING = threading.Lock()  # pyplot is not thread-safe: one figure at a time
# A plot is matplotlib's SVG, which styles itself inline; nothing else in it runs or loads.
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'"
SIGN_IN = {"WWW-Authenticate": 'Basic realm="kbisect", charset="UTF-8"'}


def refusal(request: web.Request, hosts: Iterable[str], token: str = "") -> tuple[int, str] | None:
    """Why a request is refused (status, text), or None: a write; a Host the pages are not
    served as (a DNS-rebinding page) or another site's Origin; another site's page
    fetching one (an <img>, a script) rather than a person following a link, which would
    have this host run git and plots for any page its user opens; or, when the pages have
    a token, a request that does not carry it."""
    if request.method not in READS:
        return 405, "kbisect's results pages are read-only"
    headers = request.headers
    why = foreign(headers.get("Host", ""), headers.get("Origin"), hosts, ("http", "https"))
    if why is not None:
        return 403, f"kbisect's results pages {why}"
    cross = headers.get("Sec-Fetch-Site") == "cross-site"
    if cross and headers.get("Sec-Fetch-Mode") != "navigate":
        return 403, "kbisect's results pages are not for other sites' pages to fetch"
    if token and not carries(request, token):
        return 401, "kbisect's results pages need their token (the password; any user name)"
    return None


def carries(request: web.Request, token: str) -> bool:
    """Whether the request holds the token: as a bearer token, or as HTTP Basic's password
    (a browser asks for it once, then sends it with every page, plot and live update)."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            value = base64.b64decode(value, validate=True).decode().partition(":")[2]
        except (binascii.Error, UnicodeDecodeError):
            return False
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.encode(), token.encode())


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guard(hosts: Iterable[str], token: str = "") -> Middleware:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        refused = refusal(request, hosts, token)
        if refused is None:
            return await handler(request)
        status, text = refused
        headers = {405: {"Allow": ", ".join(READS)}, 401: SIGN_IN}.get(status, {})
        return web.Response(status=status, text=text + "\n", headers=headers)

    return guard


async def _secure(request: web.Request, response: web.StreamResponse) -> None:
    """Every response's policy, aiohttp's own (a 404 of no route, a 500) as much as the
    pages': as it is prepared, which no handler or middleware error goes around."""
    svg = response.content_type == "image/svg+xml"
    response.headers["Content-Security-Policy"] = SVG_CSP if svg else PAGE_CSP
    response.headers["X-Content-Type-Options"] = "nosniff"


async def _private(request: web.Request, response: web.StreamResponse) -> None:
    """Pages behind a token are for its holders: no cache between (a proxy) keeps them."""
    response.headers["Cache-Control"] = "no-store"


def _app(hosts: Iterable[str], token: str = "") -> web.Application:
    app = web.Application(middlewares=[_guard(tuple(hosts), token)])
    app[ERROR_PAGE] = pages.status_page  # what the front and http_errors.Runner answer with
    app.on_response_prepare.append(styled(pages.status_page))
    app.on_response_prepare.append(_secure)
    if token:
        app.on_response_prepare.append(_private)
    return app


def results_app(
    settings: Settings | None = None,
    address: str = "",
    hosts: Iterable[str] = LOOPBACK_NAMES,
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
    app = _app(hosts)
    app.router.add_get("/", site.jobs)
    app.router.add_get("/jobs/{id}", site.job)
    app.router.add_get("/jobs/{id}/live", site.live)
    app.router.add_get("/jobs/{id}/plot.svg", site.plot)
    app.router.add_get("/jobs/{id}/flame.svg", site.flame)
    app.router.add_get("/jobs/{id}/files/{path:.+}", site.evidence_file)
    app.router.add_get("/series", site.series_list)
    app.router.add_get("/series/{name}", site.series)
    app.router.add_get("/api/jobs", site.api_jobs)
    app.router.add_get("/api/jobs/{id}", site.api_job)
    return app


def standalone(settings: Settings, hosts: Iterable[str], token: str = "") -> web.Application:
    """`kbisect web`: the pages at BASE, and / sends a browser there; with a token, only
    to requests that carry it (the root's guard stands before the pages' own)."""
    root = _app(hosts, token)

    async def home(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"{BASE}/")

    root.router.add_get("/", home)
    pages_app = results_app(settings, hosts=hosts, temporal_ui=settings.endpoint.ui)
    root.add_subapp(f"{BASE}/", pages_app)
    return root


@dataclasses.dataclass
class Row:
    """A job's row on the list, as the listing showed the job when it was read."""

    job: JobSummary
    row: pages.JobRow
    read: float  # time.monotonic()
    whole: bool  # an ended job's, every part read: it never changes


@dataclasses.dataclass
class Investigated:
    """An ended investigation's page and JSON, which never change again."""

    view: pages.InvestigationView
    data: dict[str, object]


@dataclasses.dataclass
class Ended:
    """A finished bisection's parts that never change again."""

    result: BisectResult
    report: str
    sru: str
    answer: Answer | None = None  # its parts, when it names a commit


class Site:
    """The pages' data: read from Temporal through kbisect's JobClient."""

    def __init__(self, settings: Settings, temporal_ui: str) -> None:
        self.settings = settings
        self.temporal_ui = temporal_ui
        self._client: JobClient | None = None
        self._webs: dict[str, str] = {}  # a repository's commit web view (_web)
        self._lock = asyncio.Lock()
        self._ended: dict[str, Ended] = {}  # by job id
        self._investigated: dict[str, Investigated] = {}  # ended investigations, by id
        self._rows: dict[str, Row] = {}  # the listed jobs' rows, by job id
        self._listing = asyncio.Lock()  # one reading of the list at a time, the rest wait
        self._plots: dict[str, tuple[str, bytes]] = {}  # by job id: (what it drew, the SVG)

    async def client(self) -> JobClient:
        async with self._lock:
            if self._client is None:
                self._client = await JobClient.connect(self.settings)
            return self._client

    def temporal_url(self, job_id: str) -> str:
        namespace = self.settings.endpoint.namespace
        return f"{self.temporal_ui}/namespaces/{namespace}/workflows/{job_id}"

    # --- the jobs ---------------------------------------------------------------------
    async def rows(self) -> list[pages.JobRow]:
        """The newest jobs: one listing, and a job read again only when the listing shows
        it changed (a running one's boots: once LIST_FRESH_SECONDS passed)."""
        async with self._listing:
            found = await (await self.client()).jobs(LIST_LIMIT, errors=False)
            now = time.monotonic()

            async def row(j: JobSummary) -> Row:
                kept = self._rows.get(j.id)
                if kept is None or kept.job.started != j.started:  # new, or its id run again
                    return await self._row(j, "")
                if kept.job == j and (kept.whole or now - kept.read < LIST_FRESH_SECONDS):
                    return kept
                return await self._row(j, kept.row.summary)  # a job's summary never changes

            self._rows = {r.job.id: r for r in await asyncio.gather(*(row(j) for j in found))}
        return [self._rows[j.id].row for j in found]

    async def _row(self, j: JobSummary, summary: str) -> Row:
        client = await self.client()
        r = pages.JobRow(j.id, j.kind, j.state, j.status, j.testcase, j.culprit, j.started)
        whole = j.state != "running"
        try:
            r.summary = summary or await (await client.describe(j.id)).static_summary() or ""
            r.boots = await asyncio.wait_for(self._boots(j), LIST_LOOK_SECONDS)
        except (KbisectError, TimeoutError):
            whole = False  # no worker answers for it now: its row without the boots
        except Exception:  # one job the server cannot tell about: the others are shown
            log.exception("results pages: job %s", j.id)
            whole = False
        return Row(j, r, time.monotonic(), whole)

    async def _boots(self, j: JobSummary) -> int | None:
        """A bisection's or a sweep's boots so far. An ended job's from its result alone
        (its report's git work made the first look at the list miss the 2 s); a running
        one's from its worker."""
        client = await self.client()
        if j.state == "completed":
            if j.kind == "bisect":
                return (await client.result(j.id)).boots
            if j.kind == "sweep":
                return len((await client.sweep_result(j.id)).boots)
        if j.state != "running":
            return None
        if j.kind == "bisect":
            return (await client.progress(j.id)).boots
        if j.kind == "sweep":
            return len((await client.sweep_progress(j.id)).boots)
        return None

    async def jobs(self, request: web.Request) -> web.StreamResponse:
        rows = await self.rows()
        return _html(pages.jobs_page(rows, BASE, request.query.get("q", "")))

    async def api_jobs(self, request: web.Request) -> web.StreamResponse:
        rows = await self.rows()
        return web.json_response(
            [{**dataclasses.asdict(r), "started": r.started.isoformat()} for r in rows]
        )

    async def _kind(self, job_id: str) -> tuple[str, bool]:
        """The job's workflow type, and whether it has ended."""
        if job_id in self._ended:  # a bisection's id is never used again
            return WORKFLOW, True
        if job_id in self._investigated:  # nor an investigation's
            return INVESTIGATION_WORKFLOW, True
        desc = await (await self.client()).describe(job_id)
        return desc.workflow_type, desc.status is not None and desc.status.name != "RUNNING"

    async def _bisect(self, job_id: str, over: bool) -> tuple[Progress, Ended | None, str]:
        """A bisection's progress (its result's, once it ended: `over`), its ended parts
        and, for a failed job, why."""
        if job_id in self._ended:
            ended = self._ended[job_id]
            return _as_progress(ended.result), ended, ""
        client = await self.client()
        if not over:
            return await client.progress(job_id), None, ""
        try:
            result = await client.result(job_id)
        except KbisectError as exc:  # failed, cancelled: its last progress, and why
            return await _last_progress(client, job_id), None, str(exc)
        # git (the report's commit lines, the SRU draft's patch): off the event loop
        report = await asyncio.to_thread(job_report.markdown, result, job_id, True)
        ended = Ended(result, report, await asyncio.to_thread(_sru, result, job_id))
        ended.answer = await asyncio.to_thread(job_report.answer_parts, result)  # git too
        self._ended[job_id] = ended
        return _as_progress(result), ended, ""

    async def _view(self, job_id: str, over: bool) -> pages.BisectView:
        progress, ended, failed = await self._bisect(job_id, over)
        v = pages.BisectView(
            job_id,
            progress,
            done=ended is not None or bool(failed),
            temporal_url=self.temporal_url(job_id),
            answer=failed,
        )
        if ended is not None:
            v.answer, v.report, v.sru = ended.result.message, ended.report, ended.sru
            v.parts = ended.answer
            v.explain, v.flame = await self._explained(job_id)  # it may come later
        v.web = await self._web(progress.repo)
        return v

    async def _web(self, repo: str) -> str:
        """The web view template of the named tree the job's repository is ("": none);
        looked up once a repository (a live page asks every few seconds)."""
        if repo not in self._webs:
            tree = await asyncio.to_thread(Trees(self.settings).of_mirror, repo)
            self._webs[repo] = (tree.web or "") if tree else ""
        return self._webs[repo]

    async def _explained(self, job_id: str) -> tuple[list[str] | None, bool]:
        client = await self.client()
        try:
            r = await client.explain_result(explain_job.explain_id(job_id))
        except KbisectError:
            return None, False  # never explained, or not yet
        return explain_report.outcome_lines(r), any(r.stacks.values())

    async def job(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            kind, ended = await self._kind(job_id)
            if kind == INVESTIGATION_WORKFLOW:
                view = (await self._investigation(job_id, ended)).view
                return _html(pages.investigation_page(view, BASE))
            if kind in OTHERS:
                words = await self._other(job_id, kind, ended)
                url = self.temporal_url(job_id)
                return _html(pages.other_page(job_id, OTHERS[kind], words, ended, BASE, url))
            return _html(pages.bisect_page(await self._view(job_id, ended), BASE))
        except KbisectError as exc:
            return _html(pages.error_page(job_id, str(exc), BASE), status=404)

    async def live(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            kind, ended = await self._kind(job_id)
            if kind == INVESTIGATION_WORKFLOW:
                view = (await self._investigation(job_id, ended)).view
                return _html(pages.investigation_live(view, BASE))
            if kind in OTHERS:
                return _html(pages.other_live(await self._other(job_id, kind, ended), ended))
            return _html(pages.bisect_live(await self._view(job_id, ended), BASE))
        except KbisectError as exc:
            return _not_found(str(exc))

    async def _investigation(self, job_id: str, over: bool) -> Investigated:
        """An investigation's page and JSON: its stages as its progress says while it
        runs; once it ended, its result's, with its report (each stage job's answer read,
        git for the commits and the SRU draft: off the event loop), kept."""
        if job_id in self._investigated:
            return self._investigated[job_id]
        client = await self.client()
        url = self.temporal_url(job_id)
        if not over:
            p = await client.investigation_progress(job_id)
            view = pages.InvestigationView(job_id, p.status, p.message, p.stages, False, url)
            return Investigated(view, _stages_json(job_id, view))
        try:
            found = await investigation.answers(client, job_id)
        except KbisectError as exc:  # failed or cancelled: its last stages, and why
            last = await _last_stages(client, job_id)
            view = pages.InvestigationView(job_id, "failed", str(exc), last, True, url)
            return Investigated(view, _stages_json(job_id, view))
        r = found.result
        sru = await asyncio.to_thread(_investigation_sru, found, job_id)
        report = await asyncio.to_thread(investigation_report.markdown, job_id, found, sru)
        bisected = found.by_job.get(r.bisection)
        parts = (  # its bisection's answer in parts (git: off the event loop)
            await asyncio.to_thread(job_report.answer_parts, bisected)
            if isinstance(bisected, BisectResult)
            else None
        )
        view = pages.InvestigationView(
            job_id, r.status, r.message, r.stages, True, url, testcase=r.testcase,
            report=report, bisection=r.bisection if r.bisection in found.by_job else "",
            parts=parts,
        )  # fmt: skip
        data = await asyncio.to_thread(investigation_report.to_json, job_id, found)  # git
        done = Investigated(view, data)
        self._investigated[job_id] = done
        return done

    async def _other(self, job_id: str, kind: str, ended: bool) -> pages.Words:
        """A sweep's, explain or backport job's status and its words."""
        client = await self.client()
        if not ended:
            p = await (
                client.sweep_progress(job_id)
                if kind == SWEEP_WORKFLOW
                else client.explain_progress(job_id)
                if kind == EXPLAIN_WORKFLOW
                else client.backport_progress(job_id)
            )
            return pages.Words(p.status, [getattr(p, "message", "")])
        try:
            if kind == SWEEP_WORKFLOW:
                markdown = sweep_report.markdown(await client.sweep_result(job_id))
                return pages.Words("done", markdown=markdown)
            if kind == EXPLAIN_WORKFLOW:
                e = await client.explain_result(job_id)
                flame = any(e.stacks.values())
                return pages.Words(
                    e.status, explain_report.outcome_lines(e, notes=False), of=e.job,
                    flame=flame, notes=e.notes,
                )  # fmt: skip
            b = await client.backport_result(job_id)
            return pages.Words(b.word, backport_report.outcome_lines(b), of=b.job)
        except KbisectError as exc:
            return pages.Words("failed", [str(exc)])

    # --- pictures ---------------------------------------------------------------------
    async def plot(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        result: BisectResult | SweepResult
        try:
            kind, ended = await self._kind(job_id)
            if kind == SWEEP_WORKFLOW:
                result = await (await self.client()).sweep_result(job_id)
            elif kind == WORKFLOW:
                progress, done, _ = await self._bisect(job_id, ended)
                result = done.result if done else _as_result(progress)
            else:
                raise UserError(f"{job_id} is {kind_name(kind)}: it has no plot")
        except KbisectError as exc:
            return _not_found(str(exc))
        return web.Response(body=await self._drawn(job_id, result), content_type="image/svg+xml")

    async def _drawn(self, job_id: str, result: BisectResult | SweepResult) -> bytes:
        """The job's plot, drawn again only when what it draws changed."""
        what = hashlib.sha256(repr(result).encode()).hexdigest()
        kept = self._plots.pop(job_id, None)  # put back last: the oldest drawn go first
        svg = kept[1] if kept and kept[0] == what else await asyncio.to_thread(_svg, result)
        self._plots[job_id] = (what, svg)
        while len(self._plots) > PLOTS_KEPT:
            del self._plots[next(iter(self._plots))]
        return svg

    async def flame(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        try:
            r = await (await self.client()).explain_result(explain_job.explain_id(job_id))
        except KbisectError as exc:
            return _not_found(str(exc))
        if not any(r.stacks.values()):
            return _not_found(f"{job_id}'s explain job took no CPU samples")
        svg = await asyncio.to_thread(explain_report.flame_svg, r)
        return web.Response(text=svg, content_type="image/svg+xml")

    async def evidence_file(self, request: web.Request) -> web.StreamResponse:
        """A boot's console or result file, or its kernel's build log, as plain text: only
        a file the job's steps name (kbisect.evidence), read from this host's cache."""
        job_id, path = request.match_info["id"], request.match_info["path"]
        try:
            kind, ended = await self._kind(job_id)
            if kind != WORKFLOW:
                return _not_found(f"{job_id} is no bisection: its boots have no files here")
            progress, _, _ = await self._bisect(job_id, ended)
        except KbisectError as exc:
            return _not_found(str(exc))
        if path not in evidence.files_of(progress.steps):
            return _not_found(f"{path} is not a file of {job_id}'s boots or builds")
        cache = self.settings.cache_dir()
        file = cache / path
        # a link planted in the cache (a run folder is written by QEMU) leads nowhere here
        if not file.is_file() or not file.resolve().is_relative_to(cache.resolve()):
            return _not_found(evidence.gone(path))
        text, cut = await asyncio.to_thread(read_tail, file, EVIDENCE_FILE_BYTES)
        head = f"[the first part left out: the last {EVIDENCE_FILE_BYTES >> 20} MiB follow]\n"
        return web.Response(text=(head if cut else "") + text, content_type="text/plain")

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
        done = [t.result for t in ticks if t.result]
        alerts = [sweep_report.alert_line(a) for r in done for a in r.alerts]
        sweeps = [(r.sweep, r.message) for r in done if r.sweep]
        return _html(pages.series_page(pages.SeriesView(name, _watching(w), alerts, sweeps), BASE))

    # --- JSON -------------------------------------------------------------------------
    async def api_job(self, request: web.Request) -> web.StreamResponse:
        job_id = request.match_info["id"]
        client = await self.client()
        try:
            kind, ended = await self._kind(job_id)
            if kind == INVESTIGATION_WORKFLOW:
                data: object = (await self._investigation(job_id, ended)).data
            elif kind == SWEEP_WORKFLOW and ended:
                data = sweep_report.to_json(await client.sweep_result(job_id), job_id)
            elif kind in OTHERS:
                words = await self._other(job_id, kind, ended)
                data = {"id": job_id, **dataclasses.asdict(words)}
            else:
                progress, done, failed = await self._bisect(job_id, ended)
                data = (
                    await asyncio.to_thread(job_report.to_json, done.result)  # git
                    if done is not None
                    else {**dataclasses.asdict(progress), "failed": failed}
                )
        except KbisectError as exc:
            return web.json_response({"error": str(exc)}, status=404)
        return web.Response(text=strict_json(data, default=str), content_type="application/json")


# neither a bisection nor an investigation: a sweep, explain or backport job
OTHERS = {
    kind: word for kind, word in JOB_KINDS.items() if kind not in (WORKFLOW, INVESTIGATION_WORKFLOW)
}


def _watching(w: series_client.WatchSummary) -> str:
    watch = w.watch
    what = f"tree {watch.tree} tags {watch.tags}" if watch.tree else f"apt {watch.apt}"
    every = f", every {w.every}" if w.every else ""
    return f"{', '.join(watch.testcases)} on {what}{every}"


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, content_type="text/html", status=status)


def _not_found(why: str) -> web.Response:
    return _html(pages.error_page(http_errors.title(404), why, BASE), status=404)


def _as_progress(r: BisectResult) -> Progress:
    """A finished job as its page shows a running one."""
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
    """A running job as the plot draws a finished one (no culprit yet)."""
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


def _stages_json(job_id: str, v: pages.InvestigationView) -> dict[str, object]:
    """A running (or failed) investigation's JSON: its word and its stages so far."""
    stages = [dataclasses.asdict(s) for s in v.stages]
    return {"id": job_id, "kind": "investigation", "status": v.status, "message": v.message,
            "stages": stages}  # fmt: skip


async def _last_stages(client: JobClient, job_id: str) -> list[Stage]:
    """A failed or cancelled investigation's stages, from its last progress (none if no
    worker answers for it)."""
    try:
        return (await client.investigation_progress(job_id)).stages
    except KbisectError:
        return []


def _investigation_sru(found: investigation_report.Answers, job_id: str) -> str:
    try:
        return investigation_report.sru_draft(found, job_id)
    except Exception as exc:  # the repository moved, or git cannot read it here: no draft
        log.info("results pages: no SRU draft for %s: %s", job_id, exc)
        return ""


def _sru(result: BisectResult, job_id: str) -> str:
    from kbisect.reports.sru_note import sru_note

    if not result.culprit:
        return ""
    try:
        return sru_note(result, job_id)
    except Exception as exc:  # the repository moved, or git cannot read it here: no draft
        log.info("results pages: no SRU draft for %s: %s", job_id, exc)
        return ""


def _svg(result: BisectResult | SweepResult) -> bytes:
    from kbisect.reports.plot import plot_scores
    from kbisect.reports.sweep_plot import plot_sweep

    with _PLOTTING, tempfile.TemporaryDirectory(prefix="kbisect-web-") as tmp:
        out = Path(tmp) / "plot.svg"
        if isinstance(result, BisectResult):
            plot_scores(result, out)
        else:
            plot_sweep(result, out)
        return out.read_bytes()
