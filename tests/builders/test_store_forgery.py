"""A store entry written by someone other than the build hosts: each forgery is refused
as a host fault (InfraError), never booted, and never left in the VM host's cache."""

import hashlib
import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from kbisect.builders import artifact_cache
from kbisect.builders.artifact_store import LISTING, ArtifactStore, from_settings
from kbisect.contract import TestRequest, TestStatus
from kbisect.errors import InfraError, UserError
from kbisect.model import GuestRun, Outcome
from kbisect.settings import Settings, redact
from kbisect.workers import activities
from kbisect.workers.activities import VmActivities
from tests.builders.test_artifact_store import CFG, IMAGE, TREE, _built
from tests.workers.test_activities import FakeMachine

FORGED = b"\x7fanother kernel " * 1000
KEY = b"k" * 32


def _store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: bytes = b""):  # type: ignore[no-untyped-def]
    """A file store holding a build host's entry, seen from a VM host with the same key."""
    url = f"file://{tmp_path / 'store'}"
    art = _built(tmp_path / "build-host", monkeypatch)
    assert ArtifactStore(url, key).publish(art)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    return ArtifactStore(url, key), art, next((tmp_path / "store").iterdir())


def _nothing_cached(tmp_path: Path) -> None:
    assert artifact_cache.lookup(TREE, CFG, "1" * 40) is None
    left = list((tmp_path / "vm-host" / "artifacts").glob("*"))
    assert not any((p / "bzImage").exists() for p in left), left


def _rewrite(entry: Path, name: str, data: bytes) -> None:
    """Forge one file and keep the entry consistent with itself, as a writer who knows
    the format but not the key would: its listing's size and sha256, meta.json's digest."""
    (entry / name).write_bytes(data)
    listing = json.loads((entry / LISTING).read_text())
    listing["files"][name] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    meta = json.loads((entry / "meta.json").read_text())
    if name == "bzImage":
        meta["artifact"]["image_sha256"] = hashlib.sha256(data).hexdigest()
    else:
        meta["digests"] = {
            k: artifact_cache._digest(entry / k) if k == name else v
            for k, v in meta["digests"].items()
        }
    raw = json.dumps(meta).encode()
    (entry / "meta.json").write_bytes(raw)
    listing["meta_sha256"] = hashlib.sha256(raw).hexdigest()
    (entry / LISTING).write_text(json.dumps(listing))


def test_an_image_and_meta_rewritten_together_are_refused_against_the_job_s_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch)
    _rewrite(entry, "bzImage", FORGED)  # agrees with itself, not with the build
    with pytest.raises(InfraError, match="not the image its build made"):
        store.fetch(art)
    _nothing_cached(tmp_path)


def test_a_forged_config_is_refused_when_the_hosts_share_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch, KEY)
    _rewrite(entry, "config", b"CONFIG_NVME=m\n")  # the history carries no config sha256
    with pytest.raises(InfraError, match="not signed with this host's KBISECT_STORE_KEY_FILE"):
        store.fetch(art)
    _nothing_cached(tmp_path)
    assert ArtifactStore(store.url).fetch(art) is not None  # without a key, self-consistent


def test_an_entry_signed_with_another_key_is_refused_and_the_same_key_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, _ = _store(tmp_path, monkeypatch, KEY)
    with pytest.raises(InfraError, match="not signed"):
        ArtifactStore(store.url, b"x" * 32).fetch(art)
    here = store.fetch(art)
    assert here is not None and Path(here.kernel).read_bytes() == IMAGE


def test_a_symlink_in_the_store_or_in_its_listing_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch)
    (entry / "bzImage").unlink()
    os.symlink("/etc/hostname", entry / "bzImage")
    with pytest.raises(InfraError, match="bzImage is not a regular file"):
        store.fetch(art)
    _nothing_cached(tmp_path)
    listing = json.loads((entry / LISTING).read_text())
    old_style = {"files": sorted(listing["files"]), "links": {"bzImage": "/dev/zero"}}
    (entry / LISTING).write_text(json.dumps(old_style))  # kbisect's first listing format
    with pytest.raises(InfraError, match="torn or foreign"):
        store.fetch(art)
    _nothing_cached(tmp_path)


def _ends(fn, seconds: float = 20.0) -> BaseException | None:  # type: ignore[no-untyped-def]
    """What fn raised, run in a thread that must end in time (a FIFO read would not)."""
    raised: list[BaseException | None] = [None]

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            raised[0] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    return raised[0]


def test_a_fifo_in_the_store_or_in_the_cache_never_hangs_the_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch)
    (entry / "bzImage").unlink()
    os.mkfifo(entry / "bzImage")
    raised = _ends(lambda: store.fetch(art))
    assert isinstance(raised, InfraError) and "not a regular file" in str(raised)
    _nothing_cached(tmp_path)
    # A cache entry on the VM host whose image is now a FIFO: a miss, evicted, no hang.
    fresh, art, _ = _store(tmp_path / "second", monkeypatch)
    here = fresh.fetch(art)
    assert here is not None
    Path(here.kernel).unlink()
    os.mkfifo(here.kernel)
    assert _ends(lambda: artifact_cache.lookup(TREE, CFG, art.commit)) is None
    assert artifact_cache.lookup(TREE, CFG, art.commit) is None  # evicted


def test_a_cached_entry_that_is_not_the_job_s_build_is_evicted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, _ = _store(tmp_path, monkeypatch)
    assert store.fetch(art) is not None
    other = replace(art, image_sha256=hashlib.sha256(FORGED).hexdigest())  # another history
    with pytest.raises(InfraError, match="not the image its build made"):
        store.fetch(other)
    assert artifact_cache.lookup(TREE, CFG, art.commit) is None


def test_an_entry_cached_with_symlinks_is_evicted_not_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    art = _built(tmp_path / "build-host", monkeypatch)
    adir = artifact_cache.entry_dir(TREE, CFG)
    os.symlink("/build/host/only/linux", Path(art.modules) / "build")  # an older kbisect's
    with pytest.raises(InfraError, match=r"holds symlinks.*rebuilt"):
        ArtifactStore(f"file://{tmp_path / 'store'}").publish(art)
    assert not (adir / "meta.json").exists()  # a miss: rebuilt on the retry


def test_a_store_fetch_heartbeats_from_the_vm_activity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch of many files runs under the activity's heartbeats, each file a progress."""
    store, art, _ = _store(tmp_path, monkeypatch)
    monkeypatch.setenv("KBISECT_STORE", store.url)
    monkeypatch.setattr(activities, "HEARTBEAT_EVERY", 0.05)
    slow = ArtifactStore._download

    def slow_download(self, *args):  # type: ignore[no-untyped-def]
        time.sleep(0.3)
        return slow(self, *args)

    monkeypatch.setattr(ArtifactStore, "_download", slow_download)
    run = GuestRun(Outcome.PANIC, [], str(tmp_path / "console.log"), 1.0, "tcg", "panic")
    vm = VmActivities(Settings.from_env(), FakeMachine(run))
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.extend(details)
    req = TestRequest("r", art.commit, "boots", "fast", 1, art)
    assert env.run(vm.run_test, req).status == TestStatus.OK  # a bad boot, judged
    assert any(str(b).startswith(f"fetching {art.commit[:12]} from the store") for b in beats)


def test_the_key_file_is_read_as_a_small_regular_file(tmp_path: Path) -> None:
    key = tmp_path / "key"
    s = Settings(cache=tmp_path, data=tmp_path, store=f"file://{tmp_path}/s", store_key_file=key)
    for make, words in [
        (lambda: os.mkfifo(key), "not a regular file"),
        (lambda: key.write_bytes(b"short\n"), "under 16 bytes"),
        (lambda: key.write_bytes(b"k" * (2 << 20)), "over 1024 KiB"),
    ]:
        key.unlink(missing_ok=True)
        make()
        raised = _ends(lambda s=s: from_settings(s))
        assert isinstance(raised, UserError) and words in str(raised), raised
    key.unlink()
    key.write_bytes(KEY + b"\n")
    assert from_settings(s).key == KEY  # type: ignore[union-attr]


def test_a_store_url_s_credentials_are_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert redact("http://alice:pw@farm:8080/kb") == "http://***@farm:8080/kb"
    assert redact("s3://bucket/kb") == "s3://bucket/kb"
    with pytest.raises(UserError) as bad:  # a malformed one, refused by the settings
        Settings.from_env({"KBISECT_STORE": "ftp://alice:pw@farm/kb"})
    assert "pw" not in str(bad.value) and "***@farm" in str(bad.value)
    # A store that does not answer: the error names it without the password.
    store = ArtifactStore(f"http://alice:pw@127.0.0.1:{_closed_port()}/kb")
    art = _built(tmp_path / "build-host", monkeypatch)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    with pytest.raises(InfraError) as down:
        store.fetch(art)
    assert "pw" not in str(down.value) and "***@127.0.0.1" in str(down.value), down.value


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_forged_image_is_refused_before_a_byte_of_the_entry_is_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch)
    _rewrite(entry, "bzImage", FORGED)
    fetched: list[str] = []
    monkeypatch.setattr(ArtifactStore, "_download", lambda self, path, *_: fetched.append(path))
    with pytest.raises(InfraError, match="not the image its build made"):
        store.fetch(art)
    assert fetched == []


def test_a_listing_without_its_signature_or_with_clashing_paths_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, art, entry = _store(tmp_path, monkeypatch, KEY)
    signed = json.loads((entry / LISTING).read_text())
    unsigned = {k: v for k, v in signed.items() if k != "hmac"}
    (entry / LISTING).write_text(json.dumps(unsigned))
    with pytest.raises(InfraError, match="not signed"):
        store.fetch(art)
    for clash in ("config/x", "meta.json/x"):  # a file that is also a folder, or meta.json's
        listing = {**unsigned, "files": {**unsigned["files"], clash: {"size": 1, "sha256": ""}}}
        (entry / LISTING).write_text(json.dumps(listing))
        with pytest.raises(InfraError, match="torn or foreign"):
            ArtifactStore(store.url).fetch(art)
    _nothing_cached(tmp_path)


def test_an_entry_put_by_the_previous_kbisect_is_fetched_without_a_key_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its listing named paths only ({"files": [...], "links": {...}}): a job that ran
    # across the upgrade still boots it, checked by meta.json's sha256s and its history.
    store, art, entry = _store(tmp_path, monkeypatch)
    listing = json.loads((entry / LISTING).read_text())
    (entry / LISTING).write_text(json.dumps({"files": sorted(listing["files"]), "links": {}}))
    with pytest.raises(InfraError, match="torn or foreign"):
        ArtifactStore(store.url, KEY).fetch(art)  # a farm with a key takes signed ones only
    here = store.fetch(art)
    assert here is not None and Path(here.kernel).read_bytes() == IMAGE


def test_a_modules_folder_s_dot_files_go_through_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'store'}"
    art = _built(tmp_path / "build-host", monkeypatch)
    adir = artifact_cache.entry_dir(TREE, CFG)
    (Path(art.modules) / ".hidden").write_text("x")  # counted by the folder's sha256
    artifact_cache.store(adir, art)  # meta.json again, with the folder's new sha256
    (adir / ".meta.json.123.tmp").write_text("a writer's")  # not the entry's
    assert ArtifactStore(url).publish(art)
    monkeypatch.setenv("KBISECT_CACHE", str(tmp_path / "vm-host"))
    here = ArtifactStore(url).fetch(art)
    assert here is not None and (Path(here.modules) / ".hidden").read_text() == "x"
    assert not (Path(here.kernel).parent / ".meta.json.123.tmp").exists()


def test_a_publish_puts_again_only_what_is_not_listed_as_this_host_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"file://{tmp_path / 'store'}"
    art = _built(tmp_path / "build-host", monkeypatch)
    assert ArtifactStore(url, KEY).publish(art)
    hashed: list[Path] = []
    real = artifact_cache.file_sha256
    monkeypatch.setattr(artifact_cache, "file_sha256", lambda p, *a: hashed.append(p) or real(p))
    assert not ArtifactStore(url, KEY).publish(art) and hashed == []  # nothing hashed again
    assert ArtifactStore(url, b"y" * 32).publish(art)  # another key's listing: put again
