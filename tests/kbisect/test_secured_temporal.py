"""TLS, client certificates and an API key to Temporal, for real: the dev server has no
TLS, so nginx's gRPC proxy fronts it, taking TLS only, checking the client's certificate
against the test's CA and the bearer token. The CLI and a real worker connect through it;
a client that lacks any of the three is refused with one line that names the setting."""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.infra.lab import LabOptions, create_lab
from kbisect.infra.temporal_server import listening, server_argv
from tests.tls_front import Certs, make_certs, secured_env, tls_front


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory, server: None) -> Iterator[tuple[str, Certs]]:
    """A plaintext dev server on 127.0.0.1 and nginx's TLS front: (front's address, certs)."""
    folder = tmp_path_factory.mktemp("secured")
    certs = make_certs(folder / "certs")
    port, ui = free_port(), free_port()
    server = subprocess.Popen(
        server_argv("127.0.0.1", port, ui, folder / "temporal.db"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not listening("127.0.0.1", port):
            assert server.poll() is None and time.monotonic() < deadline, "no dev server"
            time.sleep(0.1)
        with tls_front(folder / "nginx", f"127.0.0.1:{port}", certs) as address:
            yield address, certs
    finally:
        server.terminate()
        server.wait(30)


def _env(address: str, certs: Certs, drop: tuple[str, ...] = (), **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBISECT_TEMPORAL_")}
    env.update(secured_env(address, certs, **extra))
    for name in drop:
        env.pop(name)
    return env


def _kbisect(
    env: dict[str, str], *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbisect", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_status_goes_through_tls_with_a_certificate_and_the_key(
    front: tuple[str, Certs], tmp_path: Path
) -> None:
    address, certs = front
    proc = _kbisect(_env(address, certs), "status", "--no-start")
    assert proc.returncode == 0, proc.stderr
    assert "no bisection jobs yet" in proc.stdout


@pytest.mark.parametrize(
    ("drop", "extra", "names"),
    [
        (
            ("KBISECT_TEMPORAL_TLS_CERT", "KBISECT_TEMPORAL_TLS_KEY"),
            {},
            "KBISECT_TEMPORAL_TLS_CERT",
        ),
        ((), {"stranger": "1"}, "KBISECT_TEMPORAL_TLS_CERT"),
        ((), {"expired": "1"}, "KBISECT_TEMPORAL_TLS_CERT"),
        (("KBISECT_TEMPORAL_API_KEY",), {}, "KBISECT_TEMPORAL_API_KEY"),
        (("KBISECT_TEMPORAL_TLS_CA",), {}, "KBISECT_TEMPORAL_TLS_CA"),
        (
            (
                "KBISECT_TEMPORAL_TLS_CA",
                "KBISECT_TEMPORAL_TLS_CERT",
                "KBISECT_TEMPORAL_TLS_KEY",
                "KBISECT_TEMPORAL_API_KEY",
            ),
            {},
            "KBISECT_TEMPORAL_TLS=yes",
        ),
    ],
)
def test_a_client_short_of_a_setting_is_refused_in_one_line(
    front: tuple[str, Certs],
    tmp_path: Path,
    drop: tuple[str, ...],
    extra: dict[str, str],
    names: str,
) -> None:
    address, certs = front
    env = _env(address, certs, drop)
    for which in ("stranger", "expired"):
        if extra.get(which):
            cert, key = getattr(certs, which)
            env["KBISECT_TEMPORAL_TLS_CERT"], env["KBISECT_TEMPORAL_TLS_KEY"] = str(cert), str(key)
    proc = _kbisect(env, "status", "--no-start")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kbisect: error")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr
    assert names in errors[0], errors[0]


def test_a_worker_and_a_job_go_through_tls(
    front: tuple[str, Certs], tmp_path: Path, tiny_tarball: Path
) -> None:
    # A real worker (workflows and a build slot) and 'kbisect bisect', both through the
    # front: the job is validated on the worker and ends at once, its one line back.
    address, certs = front
    create_lab(tmp_path / "lab", LabOptions(commits=6, seed=3))
    queue = f"q-{uuid.uuid4().hex[:6]}"
    queues = {f"KBISECT_{k}_QUEUE": queue for k in ("CONTROL", "BUILD", "VM")}
    env = _env(address, certs, **queues)
    worker = subprocess.Popen(
        [sys.executable, "-m", "kbisect", "worker", "--builds", "1", "--vms", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        args = ["--repo", str(tmp_path / "lab"), "--good", "lab-bad", "--bad", "lab-good"]
        proc = _kbisect(env, "bisect", "--no-start", *args, "--testcase", "nvme-snapshot-read")
    finally:
        worker.terminate()
        _, worker_err = worker.communicate(timeout=60)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kbisect: error")]
    assert proc.returncode == 2 and len(errors) == 1, (proc.stderr, worker_err)
    assert "is not an ancestor of bad" in errors[0] and "failed" in errors[0], errors[0]
    # without a certificate, the worker stops at once with one line
    env = _env(
        address,
        certs,
        ("KBISECT_TEMPORAL_TLS_CERT", "KBISECT_TEMPORAL_TLS_KEY"),
        **queues,
    )
    refused = _kbisect(env, "worker", "--builds", "1", "--vms", "0", timeout=60)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("kbisect: error")]
    assert refused.returncode != 0 and len(errors) == 1, refused.stderr
    assert "KBISECT_TEMPORAL_TLS_CERT" in errors[0], errors[0]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"KBISECT_TEMPORAL_TLS_CERT": "c.pem"},
            "TLS_CERT is set without KBISECT_TEMPORAL_TLS_KEY",
        ),
        ({"KBISECT_TEMPORAL_TLS_KEY": "k.pem"}, "TLS_KEY is set without KBISECT_TEMPORAL_TLS_CERT"),
        (
            {"KBISECT_TEMPORAL_TLS_CA": "/nonexistent/ca.pem"},
            "KBISECT_TEMPORAL_TLS_CA=/nonexistent",
        ),
        ({"KBISECT_TEMPORAL_TLS_CA": "{tmp}/not-pem"}, "is not a PEM file"),
        # A FIFO would block the read for good, /dev/zero would fill the memory.
        ({"KBISECT_TEMPORAL_TLS_CA": "{tmp}/fifo"}, "cannot read it (not a regular file)"),
        ({"KBISECT_TEMPORAL_TLS_CA": "/dev/zero"}, "cannot read it (not a regular file)"),
        ({"KBISECT_TEMPORAL_TLS_CA": "{tmp}/huge"}, "cannot read it (over 1024 KiB"),
    ],
)
def test_a_tls_setting_that_cannot_be_used_is_one_line(
    tmp_path: Path, settings: dict[str, str], expected: str
) -> None:
    (tmp_path / "not-pem").write_text("hello")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "huge").write_bytes(b"-----BEGIN " + b"x" * (2 << 20))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBISECT_TEMPORAL_")}
    env.update({k: v.format(tmp=tmp_path) for k, v in settings.items()})
    env["KBISECT_TEMPORAL_ADDRESS"] = f"127.0.0.1:{free_port()}"
    proc = _kbisect(env, "status", "--no-start", timeout=60)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kbisect: error")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert expected in errors[0], errors[0]


def test_a_door_s_password_or_token_file_is_read_as_a_small_regular_file(tmp_path: Path) -> None:
    from kbisect.doors.commands import read_secret
    from kbisect.errors import UserError

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "token").write_text("s3cret\n")
    assert read_secret(str(tmp_path / "token"), "token") == "s3cret"
    for path, words in [(tmp_path / "fifo", "not a regular file"), ("/dev/zero", "not a regular")]:
        with pytest.raises(UserError, match=f"cannot read the token file {path}: {words}"):
            read_secret(str(path), "token")


def test_a_server_whose_certificate_expired_is_named_as_such(
    front: tuple[str, Certs], tmp_path: Path
) -> None:
    import dataclasses

    _, certs = front
    upstream = front[0]  # any address: the handshake fails before a byte reaches it
    stale = dataclasses.replace(certs, server=certs.expired_server)
    with tls_front(tmp_path / "nginx", upstream, stale) as address:
        proc = _kbisect(_env(address, certs), "status", "--no-start")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kbisect: error")]
    assert proc.returncode != 0 and len(errors) == 1, proc.stderr
    assert "its certificate has expired" in errors[0] and "TLS_CA" not in errors[0], errors[0]


@pytest.mark.parametrize(
    ("error", "names"),
    [
        # A server that checks client certificates in its own TLS sends an alert.
        ("transport error: received fatal alert: CertificateExpired", "_TLS_CERT and _KEY"),
        ("transport error: received fatal alert: UnknownCA", "_TLS_CERT and _KEY"),
        ("transport error: received fatal alert: CertificateRequired", "_TLS_CERT and _KEY"),
        # ...and an alert that is not about it does not blame it.
        ("transport error: received fatal alert: UnrecognisedName", "cannot connect"),
        # nginx's answer (tested for real above: missing, foreign and expired certificates)
        ("h2 protocol error: http2 error: response with status: 400 Bad Request", "_TLS_CERT"),
        # This client checks the server's certificate.
        ("invalid peer certificate: InvalidCertificate(UnknownIssuer)", "_TLS_CA"),
        ("invalid peer certificate: InvalidCertificate(Expired)", "the server needs a new one"),
    ],
)
def test_each_tls_refusal_names_the_setting_to_look_at(error: str, names: str) -> None:
    from kbisect.jobs.connection import refused
    from kbisect.settings import Endpoint, Tls

    line = refused(Endpoint(address="t:7233", tls=Tls()), error)
    assert names in line and "\n" not in line, line
