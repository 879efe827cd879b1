"""The results pages in a real browser: Debian's Chromium, headless, driven by its
chromedriver through Selenium (nothing downloaded). The jobs list, then a running job's
page, where a new step appears without a reload; an ended job whose subjects hold
markdown, whose page loads nothing from elsewhere, and a boot's console one click away."""

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from temporalio.testing import WorkflowEnvironment

from benchmarks.dags import linear
from kbisect.doors.web.app import standalone
from kbisect.infra.temporal_server import LOOPBACK_NAMES
from kbisect.workflows.bisect_types import Progress
from tests.web.browser import chromium, missing
from tests.web.jobs import serving, start
from tests.workflows.fakes import Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _browser() -> WebDriver:
    if why := missing():
        pytest.fail(why)
    return chromium()


def _until(
    what: str, cond: Callable[[], bool], timeout: float = 60, seen: Callable[[], str] = str
) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {seen()[-3000:]}")
        time.sleep(0.2)


async def test_a_running_job_s_page_shows_a_new_step_without_a_reload(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    async with serving(env) as jobs:
        # slow boots: the job runs for a while after its first steps
        job = await start(jobs, Scenario(graph=linear(64), culprit="c40", test_delay=4.0))
        handle = jobs.temporal.get_workflow_handle(job)
        server = TestServer(standalone(jobs.settings, LOOPBACK_NAMES))
        await server.start_server()
        base = f"http://127.0.0.1:{server.port}"
        driver = await asyncio.to_thread(_browser)
        try:

            def page() -> str:
                return str(driver.page_source)

            def steps_now() -> int:
                rows = driver.find_elements("css selector", "#live tbody tr")
                return len(rows)

            def browse() -> tuple[int, int]:
                driver.get(f"{base}/kbisect/")
                _until("the job in the list", lambda: job in driver.page_source)
                # the id is cut to fit in the list: its link has it whole as its title
                driver.find_element(By.CSS_SELECTOR, f"a.job[title='{job}']").click()
                _until("the job's page", lambda: "Steps" in driver.page_source, seen=page)
                driver.execute_script("window.kbisectNoReload = 1")
                first = steps_now()
                _until("a new step", lambda: steps_now() > first, timeout=90)
                kept = driver.execute_script("return window.kbisectNoReload")
                driver.save_screenshot(str(tmp_path / "job.png"))
                return first, int(kept or 0)

            while not (await handle.query("progress", result_type=Progress)).steps:
                await asyncio.sleep(0.2)
            first, kept = await asyncio.to_thread(browse)
        finally:
            await asyncio.to_thread(driver.quit)
            await server.close()
        assert kept == 1, "the page was reloaded: the step came by a reload, not the script"
        assert first >= 1
        await handle.terminate()


async def test_a_subject_s_image_is_text_and_the_page_loads_nothing_from_elsewhere(
    env: WorkflowEnvironment,
) -> None:
    asked: list[str] = []  # connections to the image's host, from anything

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append((await reader.readline()).decode(errors="replace"))
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        writer.close()

    elsewhere = await asyncio.start_server(answer, "127.0.0.2", 0)
    port = elsewhere.sockets[0].getsockname()[1]
    markup = f"![p](http://127.0.0.2:{port}/t.png) $math$ **bold**"
    graph = linear(16)
    subjects = {c: f"{markup} {c}" for c in graph.order}
    async with serving(env) as jobs, elsewhere:
        job = await start(jobs, Scenario(graph=graph, culprit="c9", subjects=subjects))
        await jobs.temporal.get_workflow_handle(job).result()
        server = TestServer(standalone(jobs.settings, LOOPBACK_NAMES))
        await server.start_server()
        driver = await asyncio.to_thread(_browser)
        try:

            def browse() -> tuple[str, int, str]:
                driver.get(f"http://127.0.0.1:{server.port}/kbisect/jobs/{job}")
                _until("the report", lambda: "Bisect log" in driver.page_source)
                plot = driver.find_element(By.CSS_SELECTOR, "img.plot")
                _until(
                    "the plot", lambda: driver.execute_script("return arguments[0].complete", plot)
                )
                time.sleep(0.5)  # a late fetch of anything else would be in by now
                report = driver.find_element(By.CSS_SELECTOR, ".report").text
                width = driver.execute_script("return arguments[0].naturalWidth", plot)
                header = driver.execute_script(
                    "return getComputedStyle(document.querySelector('header')).backgroundColor"
                )
                # one click from the page to a boot's console, as the VM worker kept it
                boot = driver.find_element(By.CSS_SELECTOR, "a.boot")
                path = str(boot.get_attribute("href")).split("/files/", 1)[1]
                kept = jobs.settings.cache_dir() / path
                kept.parent.mkdir(parents=True)
                kept.write_text("[    0.000000] Linux version 6.1.0-lab\n")
                boot.click()
                _until("the console", lambda: "Linux version 6.1.0-lab" in driver.page_source)
                return str(report), int(width), str(header)

            report, width, header = await asyncio.to_thread(browse)
        finally:
            await asyncio.to_thread(driver.quit)
            await server.close()
    assert not asked, f"the page made the browser fetch {asked}"
    assert f"{markup} c9" in report  # as the subject was written, not its image
    assert width > 0, "the plot (its culprit's subject with $math$ in the title) did not load"
    assert header == "rgb(29, 35, 48)", "the page's own style was refused"
