"""Kernels shared through an object store, host to host with no shared folder: a file://
store, a real WebDAV one (nginx's dav module on 127.0.0.1) and a real S3 one (versitygw on
127.0.0.1), each started by the test."""

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from benchmarks import nginx
from kbisect.builders import artifact_cache, kernel_list
from kbisect.builders.artifact_store import LISTING, ArtifactStore
from kbisect.contract import BuildRequest
from kbisect.errors import InfraError
from kbisect.model import Artifact, BuildSpec
from kbisect.settings import Settings
from kbisect.workers.activities import BuildActivities, VmActivities
from tests.builders.test_prebuilt import make_deb
from tests.s3_gateway import s3_gateway

TREE, CFG = "b" * 40, "d" * 64
IMAGE = b"\x7fkernel image " * 1000


class _NoCompiler:
    """A kernel list never compiles: the test fails if the builder is asked to."""

    def build(
        self, repo: Path, commit: str, spec: BuildSpec, progress: Callable[[str], None]
    ) -> Artifact:
        raise AssertionError(f"compiled {commit}")


def _built(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Artifact:
    """A build host's cache entry: image, config, log, and a modules folder kept from what
    `make modules_install` leaves (its `build` symlink left out)."""
    monkeypatch.setenv("KBISECT_CACHE", str(cache))
    adir = artifact_cache.entry_dir(TREE, CFG)
    installed = cache / "install" / "6.1.999"
    (installed / "kernel" / "drivers").mkdir(parents=True)
    (installed / "kernel" / "drivers" / "dm-snapshot.ko").write_bytes(b"\0module" * 100)
    (installed / "modules.builtin").write_text("kernel/drivers/nvme/host/nvme.ko\n")
    os.symlink("/build/host/only/linux", installed / "build")
    mods = Path(artifact_cache.keep_tree(installed, adir, artifact_cache.MODULES))
    assert not (mods / "build").exists() and not (mods / "build").is_symlink()
    (adir / "bzImage").write_bytes(IMAGE)
    (adir / "config").write_text("CONFIG_NVME=y\n")
    (adir / "build.log").write_text("make: done\n")
    art = Artifact(
        commit="1" * 40,
        tree=TREE,
        config_hash=CFG,
        kernel=str(adir / "bzImage"),
        config=str(adir / "config"),
        build_log=str(adir / "build.log"),
        image_sha256=hashlib.sha256(IMAGE).hexdigest(),
        modules=str(mods),
    )
    artifact_cache.store(adir, art)
    return art


def _hand_over(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Artifact:
    """Build host puts, VM host (another cache) fetches: the VM host's artifact."""
    art = _built(tmp_path / "build-host", monkeypatch)
    assert ArtifactStore(url).publish(art)
    assert not ArtifactStore(url).publish(art)  # already there: nothing put again
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    assert artifact_cache.lookup(TREE, CFG, art.commit) is None
    here = ArtifactStore(url).fetch(art)
    assert here is not None
    return here


def _same_entry(here: Artifact, tmp_path: Path) -> None:
    assert here.kernel.startswith(str(tmp_path / "vm-host"))
    assert Path(here.kernel).read_bytes() == IMAGE
    mods = Path(here.modules)
    assert (mods / "kernel" / "drivers" / "dm-snapshot.ko").read_bytes() == b"\0module" * 100
    artifact_cache.check_before_boot(here)  # the sha256 a boot checks


def test_a_kernel_goes_from_a_build_host_to_a_vm_host_through_a_file_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _hand_over(f"file://{tmp_path / 'store'}", tmp_path, monkeypatch)
    _same_entry(here, tmp_path)
    assert ArtifactStore(f"file://{tmp_path / 'store'}").fetch(here) == here  # a local hit


def _published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Artifact, Path]:
    """A file store holding a build host's entry, seen from a VM host: (url, artifact,
    the entry's folder in the store)."""
    url = f"file://{tmp_path / 'store'}"
    art = _built(tmp_path / "build-host", monkeypatch)
    ArtifactStore(url).publish(art)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    return url, art, next((tmp_path / "store").iterdir())


def test_a_kernel_damaged_in_the_store_is_refused_never_booted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, art, entry = _published(tmp_path, monkeypatch)
    (entry / "bzImage").write_bytes(IMAGE[:-1] + b"!")
    with pytest.raises(InfraError, match="not the file listed"):
        ArtifactStore(url).fetch(art)
    assert artifact_cache.lookup(TREE, CFG, art.commit) is None


def test_a_listing_that_leaves_its_entry_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, art, entry = _published(tmp_path, monkeypatch)
    (entry / LISTING).write_text(json.dumps({"files": ["../../escape"], "links": {}}))
    with pytest.raises(InfraError, match="torn or foreign"):
        ArtifactStore(url).fetch(art)
    assert not (tmp_path / "escape").exists()


def test_a_kernel_the_store_lacks_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    art = _built(tmp_path / "build-host", monkeypatch)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    assert ArtifactStore(f"file://{tmp_path / 'store'}").fetch(art) is None


@pytest.fixture
def webdav(tmp_path: Path, server: None) -> Iterator[str]:
    with nginx.webdav(tmp_path / "nginx") as url:
        yield url
    # what went over the wire: PUTs by the build host, GETs by the VM host
    assert {"PUT", "GET"} <= nginx.methods(tmp_path / "nginx")


def test_a_kernel_goes_through_a_webdav_store(
    webdav: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = _hand_over(webdav, tmp_path, monkeypatch)
    _same_entry(here, tmp_path)
    stored = tmp_path / "nginx" / "root" / "kernels"
    (entry,) = stored.iterdir()
    assert (entry / "bzImage").read_bytes() == IMAGE and (entry / "meta.json").exists()


def test_a_second_fetch_never_replaces_a_whole_entry_another_worker_placed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two VM workers of one host fetch the same kernel at once: the first placed stands
    # (the other worker may be booting from it); a torn one would be replaced.
    here = _hand_over(f"file://{tmp_path / 'store'}", tmp_path, monkeypatch)
    late = tmp_path / "vm-host" / "late-copy"
    late.mkdir()
    (late / "bzImage").write_bytes(b"another copy")
    ArtifactStore._place(late, here)
    assert Path(here.kernel).read_bytes() == IMAGE and late.exists()
    (Path(here.kernel).parent / "meta.json").unlink()  # torn: the late copy replaces it
    ArtifactStore._place(late, here)
    assert Path(here.kernel).read_bytes() == b"another copy" and not late.exists()


@pytest.mark.server
def test_a_kernel_goes_through_an_s3_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with s3_gateway(tmp_path / "s3", "kernels") as s3:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        here = _hand_over("s3://kernels/farm", tmp_path, monkeypatch)
        _same_entry(here, tmp_path)
        (entry,) = (s3.root / "kernels" / "farm").iterdir()  # in the gateway's bucket
        assert (entry / "bzImage").read_bytes() == IMAGE and (entry / "meta.json").exists()
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        with pytest.raises(InfraError, match="cannot read"):  # S3 checks the signature
            ArtifactStore("s3://kernels/farm").fetch(replace(here, tree="c" * 40))


def test_a_kernel_list_s_prebuilt_kernel_goes_through_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # bisect --kernels on a farm: the build host resolves the .deb, and the VM host, which
    # has neither the package nor its unpacked files, boots it from the store.
    store = f"file://{tmp_path / 'store'}"
    monkeypatch.setenv("KBISECT_STORE", store)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "build-host"))
    s = Settings.from_env()
    debs = [str(make_deb(tmp_path, f"6.1.0-{n}-cloud-amd64")) for n in (47, 50)]
    kl = kernel_list.make(debs, s)
    builds = BuildActivities(s, kernel_list.KernelListBuilder(_NoCompiler(), s))
    req = BuildRequest(repo=str(kl.repo), commit=kl.last, testcase="nvme-snapshot-read")
    built = ActivityEnvironment().run(builds.build_kernel, req)
    assert built.ok and built.artifact is not None
    art = built.artifact
    assert art.kernel.startswith(str(artifact_cache.entry_dir(art.tree, art.config_hash)))
    for spec in debs:  # the package and its unpacked files stay on the build host
        Path(spec).unlink()
    shutil.rmtree(tmp_path / "build-host")
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    here = VmActivities(Settings.from_env(), machine=None)._here(art, print)  # type: ignore[arg-type]
    assert here.kernel.startswith(str(tmp_path / "vm-host"))
    assert Path(here.kernel).read_bytes() == b"kernel 6.1.0-50-cloud-amd64"
    assert (
        Path(here.modules) / "kernel" / "drivers" / "md" / "dm-mod.ko"
    ).read_bytes() == b"\x7fELF"
    assert Path(here.config).read_text() == "CONFIG_BLK_DEV_NVME=y\n"
    artifact_cache.check_before_boot(here)
