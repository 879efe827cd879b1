"""Three hosts that share no files: a build host and two VM hosts, each a worker process
with its own cache and lock folders, kernels handed over through a real WebDAV store
(nginx). A real lab job runs through them on the exact metric (two guests side by side
cannot change a request size), and one VM host is killed mid-boot: the job still names
the culprit."""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from benchmarks import nginx
from benchmarks.nginx import free_port
from kbisect.infra import temporal_server
from tests.e2e.service import SEED, watch_job

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("whole_host")]
KBISECT = [sys.executable, "-m", "kbisect"]
STARTED = "test "  # a VM host's log line when a boot's activity starts


def _host(env: dict[str, str], folder: Path, *args: str) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    own = {
        **env,
        "KBISECT_LOCK_DIR": str(folder / "locks"),
        "KBISECT_DATA": str(folder / "data"),
    }
    if "--no-workflows" in args:  # a VM host: a cache of its own, empty, and its name
        own["KBISECT_CACHE"] = str(folder / "cache")
        own["KBISECT_HOST_NAME"] = folder.name
    with open(folder / "worker.log", "ab") as out:
        return subprocess.Popen(
            [*KBISECT, "worker", *args],
            env=own,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def _booting(folder: Path) -> bool:
    log = folder / "worker.log"
    return log.exists() and "repetitions on" in log.read_text()


def test_a_job_runs_over_hosts_that_share_no_files_through_a_vm_host_kill(
    real_lab: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    lab, truth = real_lab
    port, ui_port = free_port(), free_port()
    server = temporal_server.start(port=port, ui_port=ui_port, db=tmp_path / "t.db")
    tag = uuid.uuid4().hex[:6]
    hosts: dict[str, subprocess.Popen[bytes]] = {}
    key = tmp_path / "store.key"  # every host signs and checks the store's entries with it
    key.write_text(uuid.uuid4().hex * 2 + "\n")
    with nginx.webdav(tmp_path / "store") as store:
        env = {
            **os.environ,
            "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
            "KBISECT_CONTROL_QUEUE": f"kb-{tag}",
            "KBISECT_BUILD_QUEUE": f"kb-build-{tag}",
            "KBISECT_VM_QUEUE": f"kb-vm-{tag}",
            "KBISECT_STORE": store,
            "KBISECT_STORE_KEY_FILE": str(key),
        }
        try:
            hosts["build"] = _host(env, tmp_path / "build", "--builds", "1", "--vms", "0")
            for name in ("vm-a", "vm-b"):
                hosts[name] = _host(
                    env, tmp_path / name, "--builds", "0", "--vms", "1", "--no-workflows"
                )
            args = ["--repo", str(lab), "--good", "lab-good", "--bad", "lab-bad"]
            args += ["--testcase", SEED, "--metric", "avg_read_sectors"]
            started = subprocess.run(
                [*KBISECT, "bisect", *args, "--repetitions", "1", "--detach", "--no-start"],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            job_id = started.stdout.strip()
            # Kill the first VM host that starts a boot, in the middle of it.
            deadline = time.monotonic() + 1500
            while not (booting := [n for n in ("vm-a", "vm-b") if _booting(tmp_path / n)]):
                assert time.monotonic() < deadline, "no VM host started a boot"
                time.sleep(1)
            killed, survivor = booting[0], ({"vm-a", "vm-b"} - {booting[0]}).pop()
            time.sleep(3)
            os.killpg(hosts[killed].pid, signal.SIGKILL)
            hosts[killed].wait()
            result = watch_job(env, job_id)
        finally:
            for proc in hosts.values():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            server.terminate()
            server.wait(timeout=30)
        methods = nginx.methods(tmp_path / "store")
    assert result["culprit"] == truth["culprit"], result["message"]
    # The kernels went through the store: put by the build host, fetched and checked by
    # the VM hosts, each into its own cache.
    assert {"PUT", "GET"} <= methods, methods
    assert "put in the store http://" in (tmp_path / "build" / "worker.log").read_text()
    survived = (tmp_path / survivor / "worker.log").read_text()
    assert "fetched from the store, sha256 checked" in survived
    assert list((tmp_path / survivor / "cache" / "artifacts").glob("*/bzImage"))
    assert not (tmp_path / "build" / "cache").exists()  # the build host used its own
    # The report says which host ran each boot: the killed one's boot was never finished.
    hosts = {h for s in result["steps"] for h in s["hosts"]}  # type: ignore[attr-defined]
    assert hosts == {survivor}, hosts
