"""The results pages served from a real dev server's jobs: the list, a job's page, its
plot and JSON; reads only, for this machine's names."""

import asyncio
import re
import uuid

import pytest
from aiohttp.test_utils import TestClient, TestServer
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.doors.web.app import standalone
from kbisect.infra.temporal_server import LOOPBACK_NAMES
from kbisect.settings import Settings
from kbisect.workflows.search_attributes import SA_SUMMARY
from kbisect.workflows.sweep_types import SweepRequest
from kbisect.workflows.sweep_workflow import SweepWorkflow
from tests.conftest import one_queue_env
from tests.web.jobs import serving, start
from tests.workflows import fakes
from tests.workflows.fakes import SCENARIOS, Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_the_pages_show_a_finished_bisection(env: WorkflowEnvironment) -> None:
    async with serving(env) as jobs:
        job = await start(jobs, Scenario(graph=linear(16), culprit="c9"))
        handle = jobs.temporal.get_workflow_handle(job)
        await handle.result()
        # the summary a search attribute too: a column the Web UI's list can show
        summary = (await handle.describe()).typed_search_attributes.get(SA_SUMMARY)
        assert summary and summary.startswith("bisect nvme-snapshot-read (regression) root..tip in")
        app = standalone(jobs.settings, LOOPBACK_NAMES)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            listed = ""
            for _ in range(50):  # the visibility store lists a new job within moments
                listed = await (await http.get("/kbisect/")).text()
                if job in listed:
                    break
                await asyncio.sleep(0.2)
            assert job in listed and "bisect nvme-snapshot-read (regression) root..tip" in listed
            page = await http.get(f"/kbisect/jobs/{job}")
            html = await page.text()
            assert page.status == 200 and "first bad commit: <code class='culprit'>c9<" in html
            assert "<h2>Report</h2>" in html and "/namespaces/default/workflows/" in html
            plot = await http.get(f"/kbisect/jobs/{job}/plot.svg")
            assert plot.content_type == "image/svg+xml" and b"<svg" in await plot.read()
            data = await (await http.get(f"/kbisect/api/jobs/{job}")).json()
            assert data["culprit"] == "c9"
            rows = await (await http.get("/kbisect/api/jobs")).json()
            assert any(r["id"] == job and r["boots"] for r in rows), rows
            # reads only, and only as this machine's names, never for another site's page
            posted = await http.post("/kbisect/")
            assert posted.status == 405 and posted.headers["Allow"] == "GET, HEAD"
            fetched = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
            assert (await http.get(f"/kbisect/jobs/{job}/plot.svg", headers=fetched)).status == 403
            followed = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}
            assert (await http.get(f"/kbisect/jobs/{job}", headers=followed)).status == 200
            assert page.headers["X-Content-Type-Options"] == "nosniff"
            rebound = await http.get("/kbisect/", headers={"Host": "evil.example"})
            assert rebound.status == 403
            other = await http.get("/kbisect/", headers={"Origin": "http://evil.example"})
            assert other.status == 403
            missing = await http.get("/kbisect/jobs/bisect-nothing-00000000")
            assert missing.status == 404
            watches = await (await http.get("/kbisect/series")).text()
            assert "No series watch yet" in watches
            home = await http.get("/", allow_redirects=False)
            assert home.status == 302 and home.headers["Location"] == "/kbisect/"


async def test_the_list_counts_an_ended_sweeps_boots_with_no_worker_left(
    env: WorkflowEnvironment,
) -> None:
    key, queue = f"scenario-{uuid.uuid4().hex[:8]}", f"web-{uuid.uuid4().hex[:8]}"
    SCENARIOS[key] = Scenario(graph=linear(16), culprit="c9", slow=fakes.FAST * 0.7)
    req = SweepRequest(
        repo=key, kernels=["c2", "c9"], testcases=["nvme-snapshot-read"],
        build_queue=queue, vm_queue=queue,
    )  # fmt: skip
    async with fakes.fake_worker(env.client, queue, SweepWorkflow):
        handle = await env.client.start_workflow(
            SweepWorkflow.run, req, id=f"sweep-{key}", task_queue=queue
        )
        result = await handle.result()
    app = standalone(Settings.from_env(one_queue_env(env, queue)), LOOPBACK_NAMES)
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        row: dict[str, object] = {}
        for _ in range(50):  # the visibility store lists a new job within moments
            rows = await (await http.get("/kbisect/api/jobs")).json()
            row = next((r for r in rows if r["id"] == handle.id), {})
            if row:
                break
            await asyncio.sleep(0.2)
        assert row["kind"] == "sweep" and row["boots"] == len(result.boots) > 0, row


async def test_a_boot_s_console_and_its_kernel_s_build_log_are_served_as_text(
    env: WorkflowEnvironment,
) -> None:
    async with serving(env) as jobs:
        job = await start(jobs, Scenario(graph=linear(16), culprit="c9"))
        await jobs.temporal.get_workflow_handle(job).result()
        app = standalone(jobs.settings, LOOPBACK_NAMES)
        async with TestClient(TestServer(app, host="127.0.0.1")) as http:
            html = await (await http.get(f"/kbisect/jobs/{job}")).text()
            files = f"href='/kbisect/jobs/{job}/files/"
            consoles = re.findall(files + r"(runs/[^']+/console.log)'", html)
            logs = re.findall(files + r"(artifacts/[^']+/build.log)'", html)
            assert len(consoles) >= 4 and logs, html  # a link for each boot, each kernel
            cache = jobs.settings.cache_dir()
            (cache / consoles[0]).parent.mkdir(parents=True)
            (cache / consoles[0]).write_text("Linux version 6.1 <script>x</script>\n")
            got = await http.get(f"/kbisect/jobs/{job}/files/{consoles[0]}")
            assert got.status == 200 and got.content_type == "text/plain"
            assert await got.text() == "Linux version 6.1 <script>x</script>\n"
            assert got.headers["X-Content-Type-Options"] == "nosniff"
            # a link planted where a console goes leads nowhere
            (cache / consoles[1]).parent.mkdir(parents=True)
            (cache / consoles[1]).symlink_to("/etc/hostname")
            linked = await http.get(f"/kbisect/jobs/{job}/files/{consoles[1]}")
            assert linked.status == 404 and "kbisect gc prunes" in await linked.text()
            # a file the job names but this host's cache has not; one it does not name
            gone = await http.get(f"/kbisect/jobs/{job}/files/{logs[0]}")
            assert gone.status == 404 and "kbisect gc prunes" in await gone.text()
            unlisted = (
                "runs/20261207-000000-00000000/console.log",  # well formed, not the job's
                "artifacts/0123-4567/build.log",
                "runs%2F..%2F..%2F..%2Fetc%2Fpasswd",  # reaches the route as one segment
                f"{consoles[0].rsplit('/', 1)[0]}/qemu.argv",  # a run's, but not shown
            )
            for path in unlisted:
                other = await http.get(f"/kbisect/jobs/{job}/files/{path}")
                said = await other.text()
                assert other.status == 404 and "is not a file of" in said, (path, said[-300:])
