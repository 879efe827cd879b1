"""The libvirt machine for real: a lab kernel booted as a transient domain under libvirtd
with TCG runs the seed's testcase on NVMe disks passed through the qemu namespace, and a
host-userland testcase over the 9p <filesystem> (slow)."""

import html
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kbisect.builders.kernel_build import KernelBuilder
from kbisect.infra.git import Git
from kbisect.infra.libvirt_machine import LibvirtMachine
from kbisect.model import Artifact
from kbisect.settings import Settings
from kbisect.testcases import manifest as manifests
from kbisect.testcases.runner import build_spec, run_testcase
from tests.e2e.service import SEED
from tests.libvirt_daemon import libvirt_daemon

pytestmark = pytest.mark.e2e
URI = os.environ.get("KBISECT_LIBVIRT_URI", "qemu:///session")


@pytest.fixture(scope="session")
def libvirt_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The daemon behind URI (tests/libvirt_daemon.py)."""
    with libvirt_daemon(URI, tmp_path_factory.mktemp("libvirtd")) as up:
        if not up:
            pytest.fail(f"libvirt at {URI} does not answer: see infra/install.sh")
        yield URI


def _kernel(lab: Path, testcase: str) -> Artifact:
    settings = Settings.from_env()
    commit = Git(lab).commit_info("lab-good").hash
    spec = build_spec(manifests.load(testcase))
    return KernelBuilder(settings.jobs).build(lab, commit, spec, lambda _: None)


def _domains(uri: str) -> list[str]:
    out = subprocess.run(
        ["virsh", "-c", uri, "list", "--all", "--name"], capture_output=True, text=True, check=True
    )
    return [line for line in out.stdout.splitlines() if line.strip()]


def test_the_seeds_testcase_runs_in_a_libvirt_domain_that_is_gone_after(
    real_lab: tuple[Path, dict[str, object]], libvirt_uri: str
) -> None:
    lab, _ = real_lab
    artifact = _kernel(lab, SEED)
    manifest = manifests.load(SEED)
    machine = LibvirtMachine(uri=libvirt_uri, accel="tcg")
    result = run_testcase(manifest, artifact, machine, "ebs-gp2", repetitions=1)
    run_dir = Path(result.run.console).parent
    assert result.run.accel == "tcg" and result.run.outcome.value == "success"
    # The good kernel merges reads: the seed's counter, as under direct QEMU.
    assert result.score.metrics["avg_read_sectors"].value >= 256
    assert result.score.metrics["throughput"].value > 0
    xml = (run_dir / "domain.xml").read_text()
    assert '"driver":"nvme","serial":"kb-origin","drive":"origin"' in html.unescape(xml)
    assert "throttling.iops-total=3000" in xml
    name = f"kbisect-{run_dir.name}"
    assert name not in _domains(libvirt_uri)  # destroyed, and transient: no trace left
    assert not list(run_dir.glob("*.img"))  # scratch disks removed


def test_a_host_userland_testcase_reads_the_host_root_over_the_libvirt_filesystem(
    real_lab: tuple[Path, dict[str, object]], libvirt_uri: str
) -> None:
    lab, _ = real_lab
    artifact = _kernel(lab, "fio-read-latency")
    manifest = manifests.load("fio-read-latency")
    machine = LibvirtMachine(uri=libvirt_uri, accel="tcg")
    result = run_testcase(manifest, artifact, machine, repetitions=1, exact=True)
    assert result.score.metrics["read_lat_p99"].value > 0
    assert '<target dir="kbhost" />' in (Path(result.run.console).parent / "domain.xml").read_text()
