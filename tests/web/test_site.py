"""The results pages against a stand-in for the job client (no Temporal): what a request
costs the host, the policy on every response, the token, and what has no picture."""

import asyncio
import base64
import hashlib
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from temporalio.client import WorkflowExecutionStatus

from kbisect.contract import EXPLAIN_WORKFLOW, WORKFLOW
from kbisect.doors.web import app, pages
from kbisect.doors.web.html import PAGE_CSP
from kbisect.errors import UserError
from kbisect.infra import http_errors
from kbisect.infra.temporal_server import LOOPBACK_NAMES
from kbisect.jobs.client import JobClient, JobSummary
from kbisect.settings import Settings
from kbisect.workflows.bisect_types import BisectResult, Progress, Step
from kbisect.workflows.explain_types import ExplainResult

RUNNING, ENDED = 25, 25  # bisections on the list (LIST_LIMIT: 50)


class StandIn:
    """The JobClient calls the pages make, each counted: every one is a call to Temporal."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        now = datetime.now(UTC)
        self.listed = [
            JobSummary(f"bisect-t-{i}", "running" if i < RUNNING else "completed", "bisecting",
                       "t", "", now, kind="bisect")
            for i in range(RUNNING + ENDED)
        ]  # fmt: skip
        self.steps = [Step("a" * 40, "s", "good", "test", value=1.0, boots=1)]
        self.types = {"bisect-t-0-explain": EXPLAIN_WORKFLOW}

    async def jobs(self, limit: int = 20, errors: bool = True) -> list[JobSummary]:
        self.calls["jobs"] += 1
        return self.listed[:limit]

    async def describe(self, job_id: str) -> SimpleNamespace:
        self.calls["describe"] += 1
        if job_id == "bisect-boom":
            raise RuntimeError("the stand-in breaks")  # a handler's bug: aiohttp's own 500
        if job_id.startswith("bisect-missing"):
            raise UserError(f"no job {job_id} on this Temporal service")
        running = job_id == "bisect-t-0"
        status = WorkflowExecutionStatus.RUNNING if running else WorkflowExecutionStatus.COMPLETED

        async def static_summary() -> str:
            return "bisect t"

        kind = self.types.get(job_id, WORKFLOW)
        return SimpleNamespace(workflow_type=kind, status=status, static_summary=static_summary)

    async def running(self, job_id: str) -> bool:
        return (await self.describe(job_id)).status == WorkflowExecutionStatus.RUNNING

    async def progress(self, job_id: str) -> Progress:
        self.calls["progress"] += 1
        return Progress(status="bisecting", testcase="t", metric="x", steps=list(self.steps),
                        boots=len(self.steps))  # fmt: skip

    async def result(self, job_id: str) -> BisectResult:
        self.calls["result"] += 1
        if job_id.endswith("-explain"):  # an explain job's result is no bisection's
            raise TypeError("cannot convert ExplainResult to BisectResult")
        return BisectResult("found", "regression", "t", "", ["a" * 40], "b" * 40, None, [],
                            [], "m", boots=3)  # fmt: skip

    async def explain_result(self, job_id: str) -> ExplainResult:
        self.calls["explain_result"] += 1
        return ExplainResult("explained", "", "t", "x", "s", "lower", "a", "b", ["p", "c"])


@pytest.fixture
def temporal(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    stand_in = StandIn()

    async def connect(cls: type, settings: Settings) -> StandIn:
        return stand_in

    monkeypatch.setattr(JobClient, "connect", classmethod(connect))
    yield stand_in


def _client(token: str = "") -> TestClient[Any, Any]:
    return TestClient(TestServer(app.standalone(Settings.from_env(), LOOPBACK_NAMES, token)))


async def test_a_request_asks_temporal_once_not_about_every_listed_job(temporal: StandIn) -> None:
    async with _client() as http:
        first = await http.get("/kbisect/api/jobs")
        assert first.status == 200 and len(await first.json()) == RUNNING + ENDED
        cost = sum(temporal.calls.values())
        assert cost >= 1 + (RUNNING + ENDED) * 2  # the listing, and each job's summary, boots
        temporal.calls.clear()
        again = await (await http.get("/kbisect/")).text()
        assert "bisect-t-49" in again and ">3<" in again  # an ended job's boots, as first read
        assert temporal.calls == {"jobs": 1}, temporal.calls


async def test_a_plot_is_drawn_again_only_when_its_job_changed(
    temporal: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[object] = []
    monkeypatch.setattr(app, "_svg", lambda result: drawn.append(result) or b"<svg/>")
    async with _client() as http:
        for _ in range(3):
            plot = await http.get("/kbisect/jobs/bisect-t-0/plot.svg")
            assert plot.status == 200 and await plot.read() == b"<svg/>"
        assert len(drawn) == 1
        temporal.steps.append(Step("b" * 40, "s", "bad", "test", value=9.0, boots=1))
        assert (await http.get("/kbisect/jobs/bisect-t-0/plot.svg")).status == 200
        assert len(drawn) == 2


async def test_every_response_has_the_policy_aiohttp_s_errors_too(temporal: StandIn) -> None:
    async with _client() as http:
        page = await http.get("/kbisect/")
        svg = await http.get("/kbisect/jobs/bisect-t-0/plot.svg")
        no_route = await http.get("/kbisect/no/such/page")
        broken = await http.get("/kbisect/jobs/bisect-boom")  # a handler's bug
        assert (page.status, svg.status, no_route.status, broken.status) == (200, 200, 404, 500)
        for r in (page, no_route, broken):
            assert r.headers["Content-Security-Policy"] == PAGE_CSP, r.url
            assert r.headers["X-Content-Type-Options"] == "nosniff", r.url
        assert "default-src 'none'" in PAGE_CSP and "unsafe-inline" not in PAGE_CSP
        assert svg.headers["Content-Security-Policy"] == app.SVG_CSP
        assert svg.headers["X-Content-Type-Options"] == "nosniff"


async def test_every_error_is_kbisect_s_page_and_echoes_nothing(temporal: StandIn) -> None:
    long_id = "bisect-missing-" + "x" * 6000
    async with _client() as http:
        no_route = await http.get("/kbisect/no/such/page")
        broken = await http.get("/kbisect/jobs/bisect-boom")  # a handler's bug
        write = await http.post("/kbisect/")
        long = await http.get(f"/kbisect/jobs/{long_id}")
        for r, words in (
            (no_route, "No such page"),
            (broken, "kbisect failed on this page"),
            (write, "read-only"),
        ):
            text = await r.text()
            assert r.content_type == "text/html" and words in text, (r.status, text)
            assert "<header><a href='/kbisect/'>kbisect</a>" in text  # the pages' frame
        assert (no_route.status, broken.status, write.status) == (404, 500, 405)
        assert "no/such/page" not in await no_route.text()
        assert long.status == 404 and "x" * 200 not in await long.text()
        assert len(await long.text()) < len(await no_route.text()) + 1000
        for r in (no_route, broken, write, long):
            assert r.headers["Server"] == "kbisect", r.headers


async def test_a_request_aiohttp_cannot_parse_gets_kbisect_s_page_not_its_text() -> None:
    """A request line over 8 KB is refused before any application sees it: aiohttp's text
    echoed it, and its Server header named aiohttp's version."""
    runner = http_errors.Runner(app.standalone(Settings.from_env(), LOOPBACK_NAMES))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /kbisect/" + b"q" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await writer.drain()
        answer = (await asyncio.wait_for(reader.read(), 10)).decode()
        writer.close()
    finally:
        await runner.cleanup()
    head, _, body = answer.partition("\r\n\r\n")
    assert head.split(" ", 2)[1] == "400" and "Server: kbisect\r\n" in head, head
    assert "could not be read" in body and "qqqq" not in answer and "aiohttp" not in answer
    assert "<header><a href='/kbisect/'>kbisect</a>" in body  # the results pages' own


async def test_an_explain_job_has_no_plot_and_one_without_samples_no_flame_graph(
    temporal: StandIn,
) -> None:
    async with _client() as http:
        plot = await http.get("/kbisect/jobs/bisect-t-0-explain/plot.svg")
        assert plot.status == 404 and "explain job" in await plot.text()
        flame = await http.get("/kbisect/jobs/bisect-t-0/flame.svg")
        assert flame.status == 404 and "no CPU samples" in await flame.text()


async def test_with_a_token_a_request_without_it_is_refused(temporal: StandIn) -> None:
    basic = base64.b64encode(b"anyone:s3cret").decode()
    async with _client(token="s3cret") as http:
        bare = await http.get("/kbisect/")
        assert bare.status == 401 and bare.headers["WWW-Authenticate"].startswith("Basic ")
        assert bare.headers["Content-Security-Policy"] == PAGE_CSP
        for wrong in ("Bearer s3cre", "Bearer s3cret2", "Basic !!", "s3cret"):
            assert (await http.get("/kbisect/", headers={"Authorization": wrong})).status == 401
        home = await http.get(
            "/", headers={"Authorization": "Bearer s3cret"}, allow_redirects=False
        )
        assert home.status == 302
        page = await http.get("/kbisect/", headers={"Authorization": f"Basic {basic}"})
        assert page.ok and page.headers["Cache-Control"] == "no-store"  # no proxy keeps it
        assert temporal.calls["jobs"] == 1  # the refused asked nothing of Temporal
    async with _client() as http:  # no token: none asked for
        page = await http.get("/kbisect/")
        assert page.status == 200 and "Cache-Control" not in page.headers


def test_the_pages_carry_no_style_or_script_but_the_ones_the_policy_names() -> None:
    """One <style> and one <script>, allowed by their hashes; no style attribute, which no
    hash allows (the posterior's bars are <progress>, the list's card a class)."""
    p = Progress(status="bisecting", likeliest={"a" * 40: 0.6, "": 0.4})
    live = pages.bisect_page(pages.BisectView("j", p, False, "/t"), "/kbisect")
    listed = pages.jobs_page([], "/kbisect")
    for text in (live, listed):
        assert "style=" not in text and text.count("<style") == text.count("<script") == 1
        for tag in ("style", "script"):
            inline = re.search(f"<{tag}>(.*?)</{tag}>", text, re.S)
            assert inline is not None
            digest = base64.b64encode(hashlib.sha256(inline[1].encode()).digest()).decode()
            assert f"{tag}-src 'sha256-{digest}'" in PAGE_CSP
