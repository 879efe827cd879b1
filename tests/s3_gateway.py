"""A real S3 endpoint on 127.0.0.1 for the store's tests: versitygw (Versity's S3 gateway,
Apache-2.0, a Go program that infra/install.sh builds from the Go module proxy into
.venv/bin) over a posix folder, where each top folder is a bucket."""

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.nginx import free_port
from kbisect.infra.temporal_server import listening

GATEWAY = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "versitygw"


@dataclass(frozen=True)
class S3:
    root: Path  # the gateway's folder: <root>/<bucket>/<key>
    env: dict[str, str]  # the AWS_* settings a client of it needs


def gateway_or_skip() -> Path:
    """The gateway; a skip only where no Go toolchain could build it."""
    if GATEWAY.exists():
        return GATEWAY
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain here to build versitygw, the tests' S3 server")
    pytest.fail("versitygw is not built: run infra/install.sh --tests")


@contextmanager
def s3_gateway(folder: Path, bucket: str) -> Iterator[S3]:
    binary = gateway_or_skip()
    root = folder / "root"
    (root / bucket).mkdir(parents=True)
    port = free_port()
    key, secret = "kbisect-test", secrets.token_hex(16)  # made here, for this gateway only
    env = {**os.environ, "ROOT_ACCESS_KEY_ID": key, "ROOT_SECRET_ACCESS_KEY": secret}
    with open(folder / "versitygw.log", "wb") as log:
        proc = subprocess.Popen(
            [str(binary), "--port", f"127.0.0.1:{port}", "--quiet", "posix", str(root)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 20
        while not listening("127.0.0.1", port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log_text = (folder / "versitygw.log").read_text()
                raise RuntimeError(f"versitygw did not start: {log_text}")
            time.sleep(0.05)
        yield S3(
            root,
            {
                "AWS_ACCESS_KEY_ID": key,
                "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                "AWS_ALLOW_HTTP": "true",
                "AWS_REGION": "us-east-1",
            },
        )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
