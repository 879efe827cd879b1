"""A web page can neither start nor cancel jobs through the service `kbisect up` starts:
not by a cross-origin POST to its HTTP API, nor through its Web UI by DNS rebinding. The
Web UI still shows the jobs to a person on this machine."""

import asyncio
import http.client
import json
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from benchmarks.nginx import free_port
from kbisect.infra.processes import process_tree
from kbisect.infra.temporal_server import (
    UI_SETTINGS_PATH,
    UI_WRITE_SWITCHES,
    listening,
    read_only_settings,
)
from tests.kbisect.test_up_down import _listening, _start_up

# The Fetch standard's "bad ports": no browser connects to them, for any page.
BROWSER_BLOCKED = {
    *(1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95),
    *(101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161),
    *(179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563),
    *(587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060),
    *(5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080),
}

Reply = tuple[int, http.client.HTTPMessage, bytes]


def _request(port: int, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    """One HTTP/1.1 request as a browser sends it (headers given, Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def _try(port: int, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> int:
    """The status, or 0 if that port does not answer HTTP/1.1 (gRPC, membership)."""
    try:
        return _request(port, method, path, headers, body)[0]
    except (OSError, http.client.HTTPException):
        return 0


def _cross_origin_post(port: int, path: str, body: bytes) -> int:
    """What fetch(url, {method: "POST", mode: "no-cors", body}) on evil.example sends: a
    simple request, no preflight."""
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Origin": "http://evil.example",
        "Content-Type": "text/plain;charset=UTF-8",
    }
    return _try(port, "POST", path, headers, body)


def _rebound_post(port: int, path: str, body: bytes) -> int:
    """A page on evil.example:PORT whose name now resolves to 127.0.0.1: it is same-origin
    with whatever listens there, reads the _csrf cookie and sends it back as the header."""
    host = f"evil.example:{port}"
    token = ""
    try:
        _, headers, _ = _request(port, "GET", "/", {"Host": host}, b"")
        for cookie in headers.get_all("Set-Cookie") or []:
            name, _, rest = cookie.partition("=")
            if name.strip() == "_csrf":
                token = rest.split(";")[0]
    except (OSError, http.client.HTTPException):
        pass
    post = {
        "Host": host,
        "Origin": f"http://{host}",
        "Content-Type": "application/json",
        "Cookie": f"_csrf={token}",
        "X-CSRF-Token": token,
    }
    return _try(port, "POST", path, post, body)


async def _job_state(address: str, victim: str, evil: list[str]) -> tuple[object, bool, list[str]]:
    """The victim's status, whether a cancel was requested, and which evil ids exist."""
    client = await Client.connect(address)
    handle = client.get_workflow_handle(victim)
    status = (await handle.describe()).status
    history = await handle.fetch_history()
    cancel = any(
        e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
        for e in history.events
    )
    started = []
    for wid in evil:
        try:
            await client.get_workflow_handle(wid).describe()
            started.append(wid)
        except RPCError as err:
            assert err.status == RPCStatusCode.NOT_FOUND, err
    return status, cancel, started


async def _start_victim(address: str, victim: str) -> None:
    """A running job (on a queue nobody polls, so it stays running) for the page to cancel."""
    client = await Client.connect(address)
    await client.start_workflow("Victim", id=victim, task_queue=f"nobody-{victim}")


@pytest.mark.server
def test_a_web_page_cannot_start_or_cancel_jobs_but_the_ui_shows_them(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    address = f"127.0.0.1:{port}"
    env, cli, up = _start_up(tmp_path, port, ui, address)
    try:
        deadline = time.monotonic() + 90
        while not (listening("127.0.0.1", ui) and (tmp_path / "service.pid").exists()):
            assert up.poll() is None, up.stderr.read().decode() if up.stderr else ""
            assert time.monotonic() < deadline, "kbisect up did not come up"
            time.sleep(0.3)
        victim = f"victim-{uuid.uuid4().hex[:8]}"
        asyncio.run(_start_victim(address, victim))
        # Every port of the service that a browser can reach gets both attacks.
        ports = sorted(
            int(a.rsplit(":", 1)[1])
            for a in _listening(process_tree(up.pid))
            if int(a.rsplit(":", 1)[1]) not in BROWSER_BLOCKED
        )
        assert port in ports and ui in ports
        evil, answers = [], {}
        api = "/api/v1/namespaces/default/workflows"
        for p in ports:
            for how, attack in (("cross-origin", _cross_origin_post), ("rebound", _rebound_post)):
                wid = f"evil-{how}-{p}"
                evil.append(wid)
                start = {"workflowType": {"name": "Evil"}, "taskQueue": {"name": "nobody"}}
                answers[wid] = attack(p, f"{api}/{wid}", json.dumps(start).encode())
                answers[f"cancel {how} {p}"] = attack(p, f"{api}/{victim}/cancel", b"{}")
                answers[f"terminate {how} {p}"] = attack(p, f"{api}/{victim}/terminate", b"{}")
        status, cancelled, started = asyncio.run(_job_state(address, victim, evil))
        assert started == [], f"a web page started jobs {started} (answers {answers})"
        assert not cancelled, f"a web page asked to cancel {victim} (answers {answers})"
        assert status == WorkflowExecutionStatus.RUNNING, f"{victim} is {status} ({answers})"
        # A rebound page cannot read the jobs either.
        rebound = _try(ui, "GET", f"{api}?query=", {"Host": f"evil.example:{ui}"})
        assert rebound == 403, f"the Web UI answered {rebound} to Host evil.example"
        # A person on this machine still watches the jobs in the Web UI.
        for host in (f"127.0.0.1:{ui}", f"localhost:{ui}"):
            code, headers, _ = _request(ui, "GET", "/", {"Host": host}, b"")
            assert code == 200 and "text/html" in headers.get("Content-Type", ""), (host, code)
            # The list comes from the dev server's visibility store, which may answer 503
            # for a moment under the load above: a person reloads, and so does this test.
            deadline = time.monotonic() + 30
            while True:
                code, _, listed = _request(ui, "GET", f"{api}?query=", {"Host": host}, b"")
                if code != 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert code == 200 and victim.encode() in listed, (host, code, listed[:300])
            code, _, described = _request(ui, "GET", f"{api}/{victim}", {"Host": host}, b"")
            assert code == 200 and b"WORKFLOW_EXECUTION_STATUS_RUNNING" in described, code
            # kbisect's results pages, in the same front, under the same rules
            code, headers, page = _request(ui, "GET", "/kbisect/", {"Host": host}, b"")
            assert code == 200 and b"<h1>Jobs</h1>" in page, (code, page[:300])
        assert _try(ui, "GET", "/kbisect/", {"Host": f"evil.example:{ui}"}) == 403
        assert _try(ui, "GET", "/kbisect", {"Host": f"127.0.0.1:{ui}"}) == 302
        assert _cross_origin_post(ui, "/kbisect/", b"{}") == 403
        # The UI is told it is read-only: it hides or disables the buttons the front refuses.
        code, _, raw = _request(ui, "GET", UI_SETTINGS_PATH, {"Host": f"localhost:{ui}"}, b"")
        ui_settings = json.loads(raw)
        assert code == 200 and all(ui_settings[k] is True for k in UI_WRITE_SWITCHES), raw
        assert "DefaultNamespace" in ui_settings  # the rest as the dev server's UI said it
        # Its errors are kbisect's pages, echo nothing and name no server software: one
        # of no route, and one aiohttp answers before any application (a line over 8 KB).
        code, headers, page = _request(ui, "GET", "/kbisect/foo", {"Host": f"localhost:{ui}"}, b"")
        assert code == 404 and b"No such page" in page and b"foo" not in page, page[:300]
        assert headers.get("Server") == "kbisect", headers
        with socket.create_connection(("127.0.0.1", ui), timeout=10) as conn:
            conn.sendall(b"GET /" + b"q" * 9000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answer = b"".join(iter(lambda: conn.recv(65536), b""))
        assert answer.split(b" ", 2)[1] == b"400" and b"Server: kbisect\r\n" in answer, answer[:300]
        assert b"could not be read" in answer and b"qqqq" not in answer and b"aiohttp" not in answer
    finally:
        down = subprocess.run([*cli, "down"], env=env, capture_output=True, text=True, timeout=90)
        if up.poll() is None:
            up.kill()
    assert down.returncode == 0, down.stderr
    assert up.wait(timeout=30) == 0


def test_the_ui_settings_are_read_only_and_anything_else_passes_as_it_is() -> None:
    said = json.dumps({"DisableWriteActions": False, "Version": "2.4"}).encode()
    assert json.loads(read_only_settings(said)) == {
        **dict.fromkeys(UI_WRITE_SWITCHES, True),
        "Version": "2.4",
    }
    for other in (b"\x1f\x8b gzip", b"[1]", b""):
        assert read_only_settings(other) == other


def test_the_front_passes_reads_and_queries_from_this_machine_only() -> None:
    from kbisect.infra.temporal_server import refusal

    wf = "/api/v1/namespaces/default/workflows/bisect-1"
    # Names no page can rebind; any port (an SSH tunnel to another local port).
    for host in ("127.0.0.1:8233", "LOCALHOST:8233", "localhost:9000", "[::1]:8233", "localhost"):
        assert refusal("GET", wf, host, None) is None, host
        assert refusal("GET", wf, host, f"http://{host}") is None, host
        # A query (the job's progress) is a read, sent as a POST by the UI itself.
        assert refusal("POST", f"{wf}/query/progress", host, f"http://{host}") is None
    local, here = "127.0.0.1:8233", "http://127.0.0.1:8233"
    for method, path, host, origin in (
        ("GET", wf, "evil.example:8233", None),  # DNS rebinding
        ("GET", wf, "127.0.0.1.evil.example:8233", None),
        ("GET", wf, "", None),
        ("GET", wf, local, "http://evil.example"),  # a cross-origin read
        ("GET", wf, local, "http://localhost:3000"),  # another local site
        ("GET", wf, local, "null"),
        ("POST", f"{wf}/query/progress", local, "http://evil.example"),
        ("POST", f"{wf}/cancel", local, here),  # writes: with kbisect only
        ("POST", f"{wf}/terminate", local, here),
        ("POST", f"{wf}/query/progress/../../cancel", local, here),
        ("POST", f"{wf}/../x/query/progress", local, here),
        ("POST", "/api/v1/namespaces/default/workflows/new", local, here),
        ("DELETE", wf, local, here),
    ):
        assert refusal(method, path, host, origin) is not None, (method, path, host, origin)
