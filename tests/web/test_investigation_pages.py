"""An investigation on the results pages: its page lists its stages in order, each a link
to that stage job's own page, and shows the investigation's report; the job list and the
JSON have it. Served from a real dev server's jobs (fake activities); the page as text
escapes what it shows."""

import asyncio
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.doors.web import pages
from kbisect.doors.web.app import standalone
from kbisect.infra.temporal_server import LOOPBACK_NAMES
from kbisect.workflows.investigation_types import InvestigationResult, Stage
from tests.web.jobs import CHAIN, investigation, serving
from tests.workflows.fakes import Scenario

BASE = "/kbisect"


@pytest.mark.asyncio(loop_scope="module")
async def test_an_investigations_page_lists_its_stages_and_shows_its_report(
    env: WorkflowEnvironment,
) -> None:
    async with serving(env, *CHAIN) as jobs:
        scenario = Scenario(graph=linear(16), culprit="c9", timing=True, test_delay=0.05)
        req = investigation(scenario, jobs.queues.build, explain=True)
        inv = await jobs.start_investigation(req, by="tester@web")
        app = standalone(jobs.settings, LOOPBACK_NAMES)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            running = ""
            for _ in range(100):  # while it runs: its stages so far, and the live part's URL
                running = await (await http.get(f"/kbisect/jobs/{inv}")).text()
                if f"{inv}-check" in running:
                    break
                await asyncio.sleep(0.1)
            assert f"data-url='/kbisect/jobs/{inv}/live'" in running, running
            live = await http.get(f"/kbisect/jobs/{inv}/live")
            assert live.status == 200 and f"href='/kbisect/jobs/{inv}-check'" in await live.text()
            handle = jobs.temporal.get_workflow_handle(inv, result_type=InvestigationResult)
            result = await handle.result()
            page = await http.get(f"/kbisect/jobs/{inv}")
            html = await page.text()
            assert page.status == 200 and page.headers["Content-Security-Policy"]
            stages = [f"{inv}-check", f"{inv}-bisect", f"{inv}-bisect-explain"]
            assert [s.job for s in result.stages] == stages
            link = r"<a class='hash job' title='[^']+' href='/kbisect/jobs/([^']+)'>"
            linked = re.findall(link, html)
            assert linked == stages, linked  # in their order, each to its own page
            assert f"title='{inv}-bisect-explain' href=" in html and ">bisect-explain</a>" in html
            assert "data-done='1'" in html and "data-url=''" in html  # ended: no live part
            assert "<h2>Report</h2>" in html and f"Bisect: {inv}-bisect" in html
            assert "first bad commit <code>c9</code>" in html and "explained" in html
            # the answer at a glance, in parts, as its bisection's page has it
            assert "first bad commit: <code class='culprit'>c9</code>" in html
            assert "<dt>certainty</dt>" in html.split("<h2>Stages</h2>")[0]
            assert f"src='/kbisect/jobs/{inv}-bisect/plot.svg'" in html
            for stage in stages:  # each stage job's own page
                own = await http.get(f"/kbisect/jobs/{stage}")
                assert own.status == 200, (stage, await own.text())
            data = await (await http.get(f"/kbisect/api/jobs/{inv}")).json()
            assert data["kind"] == "investigation" and data["bisection"] == f"{inv}-bisect"
            assert [s["job"] for s in data["stages"]] == stages
            row: dict[str, object] = {}
            for _ in range(50):  # the visibility store lists a new job within moments
                rows = await (await http.get("/kbisect/api/jobs")).json()
                row = next((r for r in rows if r["id"] == inv), {})
                if row:
                    break
                await asyncio.sleep(0.2)
            assert row["kind"] == "inv" and str(row["summary"]).startswith("investigate: ")
            listed = await (await http.get("/kbisect/")).text()
            assert f"href='/kbisect/jobs/{inv}'" in listed


def test_an_investigations_page_shows_its_words_as_text() -> None:
    """A stage's line and the investigation's message hold a guest's or a repository's
    words: text, never markup; the report's markdown draws no picture."""
    evil = "<script>alert(1)</script> ![p](http://127.0.0.2:9/t.png)"
    stages = [Stage("check", "inv-t-1-check", "kbisect-sweep", "refused", evil)]
    v = pages.InvestigationView(
        "inv-t-1", "refused", evil, stages, True, "/t", report=f"# r\n\n{evil}\n"
    )
    html = pages.investigation_page(v, BASE)
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img" not in html  # no plot without a bisection, and none from the report
    assert "href='/kbisect/jobs/inv-t-1-check'" in html
