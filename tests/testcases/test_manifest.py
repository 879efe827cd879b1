import functools
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from kbisect.builders import kconfig
from kbisect.errors import ManifestError, UnknownTestcaseError
from kbisect.model import Direction
from kbisect.testcases import manifest

BUILTIN = manifest.BUILTIN_DIR / "nvme-snapshot-read"


def test_builtin_snapshot_read_loads() -> None:
    m = manifest.load("nvme-snapshot-read")
    assert m.primary == "avg_read_sectors" and m.metrics["reads"].better is Direction.LOWER
    assert [d.name for d in m.disks] == ["origin", "cow"]
    assert "CONFIG_DM_SNAPSHOT=y" in m.config_fragment
    assert m.tools == ["dmsetup"] and m.repetitions == 3


def test_unknown_testcase_lists_the_known_ones() -> None:
    with pytest.raises(UnknownTestcaseError, match=r"known are .*nvme-snapshot-read"):
        manifest.load("nvme-snapshot-raed")


def test_testcase_names_cannot_walk_paths() -> None:
    with pytest.raises(UnknownTestcaseError, match="invalid testcase name"):
        manifest.load("../etc")


@pytest.fixture
def extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "lib" / "mine"
    shutil.copytree(BUILTIN, folder)
    (folder / "manifest.toml").write_text(
        (folder / "manifest.toml").read_text().replace('"nvme-snapshot-read"', '"mine"', 1)
    )
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "lib"))
    return folder


def test_a_new_testcase_is_a_new_folder(extra: Path) -> None:
    assert "mine" in manifest.available()
    assert manifest.load("mine").folder == extra


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t + "\n[[[", "not valid TOML"),
        (
            lambda t: t.replace('primary = "avg_read_sectors"', 'primary = "speed"'),
            "primary metric",
        ),
        (lambda t: t.replace('better = "lower"', 'better = "sideways"', 1), "better must be"),
        (lambda t: t.replace('script = "guest.sh"', 'script = "nope.sh"'), "does not exist"),
        (lambda t: t.replace('script = "guest.sh"', 'script = "../../x"'), "inside the testcase"),
        (lambda t: t.replace('name = "mine"', 'name = "other"'), "must match its folder"),
        (lambda t: t.replace("size_mib = 64", 'size_mib = "big"'), "size_mib"),
        (lambda t: t.replace('READ_MIB = "256"', "READ_MIB = 256"), "params"),
        (lambda t: t.replace('unit = "MB/s"\n', ""), "unit"),
    ],
)
def test_malformed_manifest_is_one_clear_line(extra: Path, edit, message: str) -> None:  # type: ignore[no-untyped-def]
    path = extra / "manifest.toml"
    path.write_text(edit(path.read_text()))
    with pytest.raises(ManifestError, match=message) as err:
        manifest.load("mine")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def _top(line: str) -> Callable[[str], str]:
    """Add a top-level line (before the first table)."""
    return lambda t: re.sub(r"(?m)^\[", lambda m: f"{line}\n[", t, count=1)


def _set(key: str, value: str) -> Callable[[str], str]:
    """Replace a top-level `key = ...` line."""
    return lambda t: re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", t, count=1)


def _without(header: str) -> Callable[[str], str]:
    """Drop every `header` table and its body."""
    return lambda t: re.sub(rf"(?ms)^{re.escape(header)}\n.*?(?=^\[|\Z)", "", t)


def _without_metrics(text: str) -> str:
    return re.sub(r"(?ms)^\[metrics\..*?(?=^\[|\Z)", "", text)


def _both(*edits: Callable[[str], str]) -> Callable[[str], str]:
    return lambda t: functools.reduce(lambda acc, e: e(acc), edits, t)


EXTRA_DISKS = "".join(f'\n[[disks]]\nname = "d{i}"\nsize_mib = 1\n' for i in range(7))


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_set("description", "3"), "description"),
        (_set("profile", "3"), "profile"),
        (_set("profile", '"ebs-gp3"'), "profile"),
        (_set("repetitions", '"3"'), "repetitions"),
        (_set("repetitions", "2.5"), "repetitions"),
        (_set("repetitions", "true"), "repetitions"),
        (_set("repetitions", "nan"), "repetitions"),
        (_set("repetitions", "0"), "repetitions"),
        (_set("repetitions", "51"), "repetitions"),
        (_set("warmup", "-1"), "warmup"),
        (_set("warmup", "11"), "warmup"),
        (_set("warmup", '"1"'), "warmup"),
        (lambda t: t.replace("exact = true  ", 'exact = "yes"'), "exact"),
        (_top('userland = "chroot"'), "userland"),
        (_top("userland = 1"), "userland"),
        (_top('files = "guest.sh"'), "files"),
        (_top('files = ["../manifest.toml"]'), "files"),
        (_top('files = ["lib.sh"]'), "files"),
        (_top('files = ["missing.fio"]'), "missing.fio"),
        (_set("timeout", '"600"'), "timeout"),
        (_set("timeout", "true"), "timeout"),
        (_set("timeout", "nan"), "timeout"),
        (_set("timeout", "inf"), "timeout"),
        (_set("timeout", "-inf"), "timeout"),
        (_set("timeout", "0"), "timeout"),
        (_set("timeout", "1e9"), "timeout"),
        (_set("config", "3"), "config"),
        (_set("config", '["config.fragment"]'), "config"),
        (_set("script", "3"), "script"),
        (_set("tools", '"dmsetup"'), "tools"),
        (_set("tools", "[1]"), "tools"),
        (_set("modules", '"dm_mod"'), "modules"),
        (_set("modules", '["../dm_mod"]'), "modules"),
        (_set("modules", '["DM_MOD"]'), "modules"),
        (_set("modules", "[3]"), "modules"),
        (_set("name", "3"), "name"),
        (_both(_without("[params]"), _top('params = "x"')), "params"),
        (_both(_without("[params]"), _top("params = [1]")), "params"),
        (lambda t: t.replace('READ_MIB = "256"', 'READ_MIB = "1; reboot"'), "READ_MIB"),
        (lambda t: t.replace('READ_MIB = "256"', 'KB_CHANNEL = "x"'), "KB_CHANNEL"),
        (_both(_without("[[disks]]"), _top("disks = 3")), "disks"),
        (_both(_without("[[disks]]"), _top('disks = ["a"]')), "disks"),
        (_both(_without("[[disks]]"), _top("disks = {}")), "disks"),
        (lambda t: t.replace('name = "cow"', 'name = "origin"'), "origin"),
        (lambda t: t + EXTRA_DISKS, "disks"),
        (lambda t: t.replace("size_mib = 64", "size_mb = 64"), "size_mb"),
        (lambda t: t.replace("size_mib = 64", "size_mib = nan"), "size_mib"),
        (_top('primery = "reads"'), "primery"),
        (lambda t: t.replace('unit = "MB/s"', 'units = "MB/s"'), "units"),
        (lambda t: t.replace('unit = "MB/s"', "unit = 3"), "unit"),
        (lambda t: t.replace("[metrics.wall]", '[metrics."wall time"]'), "wall time"),
        (lambda t: t.replace('description = "reads completed', 'description = ["x"] #'), "descr"),
        (_both(_without_metrics, _top("metrics = 3")), "metrics"),
    ],
)
def test_every_field_is_checked_at_load_time(  # type: ignore[no-untyped-def]
    extra: Path, edit, field: str
) -> None:
    path = extra / "manifest.toml"
    text = edit(path.read_text())
    assert text != path.read_text(), "the edit did not apply"
    path.write_text(text)
    with pytest.raises(ManifestError) as err:
        manifest.load("mine")
    message = str(err.value)
    assert "\n" not in message and str(path) in message and field in message, message


def test_an_invalid_folder_name_is_refused_at_load_and_not_listed(
    extra: Path, tmp_path: Path
) -> None:
    upper = extra.parent / "Mine"
    shutil.copytree(extra, upper)
    (upper / "manifest.toml").write_text(
        (upper / "manifest.toml").read_text().replace('"mine"', '"Mine"', 1)
    )
    with pytest.raises(ManifestError, match="folder name 'Mine'") as err:
        manifest.load_folder(upper)
    assert str(upper / "manifest.toml") in str(err.value)
    assert "Mine" not in manifest.available()


def test_the_listing_shows_a_broken_testcase_with_its_error_and_the_others(extra: Path) -> None:
    broken = extra.parent / "broken"
    shutil.copytree(extra, broken)
    text = (broken / "manifest.toml").read_text().replace('"mine"', '"broken"', 1)
    (broken / "manifest.toml").write_text(text.replace("repetitions = 3", 'repetitions = "3"'))
    rows = {row.name: row for row in manifest.catalog()}
    assert rows["mine"].manifest is not None and rows["mine"].error == ""
    assert rows["nvme-snapshot-read"].manifest is not None
    assert rows["broken"].manifest is None and "repetitions" in rows["broken"].error


GOOD_FRAGMENT = """\
# comments and blank lines are fine

CONFIG_BLK_DEV_NVME=y
CONFIG_DM_SNAPSHOT=m
# CONFIG_SWAP is not set
CONFIG_LOG_BUF_SHIFT=17
CONFIG_PHYSICAL_ALIGN=0x200000
CONFIG_LOCALVERSION="-kb"
CONFIG_CMDLINE="root=/dev/vda quiet"
CONFIG_MODULE_SIG_HASH="sha256"
CONFIG_INITRAMFS_SOURCE=""
# CONFIG_MODULE_SIG_KEY is not set
"""


def test_a_plain_config_fragment_loads(extra: Path) -> None:
    (extra / "config.fragment").write_text(GOOD_FRAGMENT)
    assert manifest.load("mine").config_fragment == GOOD_FRAGMENT


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('CONFIG_INITRAMFS_SOURCE="/etc"', "CONFIG_INITRAMFS_SOURCE"),
        ('CONFIG_INITRAMFS_SOURCE="usr/initramfs_data.cpio"', "CONFIG_INITRAMFS_SOURCE"),
        ('CONFIG_EXTRA_FIRMWARE="regulatory.db"', "CONFIG_EXTRA_FIRMWARE"),
        ('CONFIG_EXTRA_FIRMWARE_DIR="firmware"', "CONFIG_EXTRA_FIRMWARE_DIR"),
        ('CONFIG_SYSTEM_TRUSTED_KEYS="certs/mine.pem"', "CONFIG_SYSTEM_TRUSTED_KEYS"),
        ('CONFIG_SYSTEM_REVOCATION_KEYS="certs/x.pem"', "CONFIG_SYSTEM_REVOCATION_KEYS"),
        ('CONFIG_MODULE_SIG_KEY="certs/signing_key.pem"', "CONFIG_MODULE_SIG_KEY"),
        ('CONFIG_SYSTEM_BLACKLIST_HASH_LIST="hashes"', "CONFIG_SYSTEM_BLACKLIST_HASH_LIST"),
        ("CONFIG_BUILTIN_DTB=y", "CONFIG_BUILTIN_DTB"),
        ('CONFIG_BUILTIN_DTB_SOURCE="board"', "CONFIG_BUILTIN_DTB_SOURCE"),
        ('CONFIG_UNUSED_KSYMS_WHITELIST="syms"', "CONFIG_UNUSED_KSYMS_WHITELIST"),
        ('CONFIG_CMDLINE="/root/secret"', "CONFIG_CMDLINE"),
        ('CONFIG_DEFAULT_HOSTNAME="a/../../b"', "CONFIG_DEFAULT_HOSTNAME"),
        ('CONFIG_LOCALVERSION="$(shell id)"', "CONFIG_LOCALVERSION"),
        ("CONFIG_BLK_DEV_NVME=y # on", "CONFIG_BLK_DEV_NVME"),
        ("CONFIG_BLK_DEV_NVME", "CONFIG_BLK_DEV_NVME"),
        ("make menuconfig", "make menuconfig"),
        ("BLK_DEV_NVME=y", "BLK_DEV_NVME"),
    ],
)
def test_a_config_fragment_cannot_pull_host_files_or_carry_other_lines(
    extra: Path, line: str, named: str
) -> None:
    fragment = extra / "config.fragment"
    fragment.write_text(f"CONFIG_MD=y\n{line}\n")
    with pytest.raises(ManifestError) as err:
        manifest.load("mine")
    message = str(err.value)
    assert "\n" not in message and named in message and "config.fragment:2" in message, message


def test_a_config_fragment_must_be_text(extra: Path) -> None:
    (extra / "config.fragment").write_bytes(b"CONFIG_MD=y\n\xff\n")
    with pytest.raises(ManifestError, match="config"):
        manifest.load("mine")


def test_exact_metrics_take_two_repetitions_a_boot() -> None:
    m = manifest.load("nvme-snapshot-read")
    assert m.metrics["avg_read_sectors"].exact and not m.metrics["throughput"].exact
    assert m.repetitions_for("avg_read_sectors") == 2
    assert m.repetitions_for("throughput") == m.repetitions == 3


def test_host_userland_testcases_get_its_kernel_options_and_their_files() -> None:
    from kbisect.testcases.runner import build_spec

    fio = manifest.load("fio-read-latency")
    assert fio.userland == "host" and set(fio.files) == {"readers.fio"}
    frags = build_spec(fio).fragments
    assert "CONFIG_9P_FS=y" in frags[0] and "CONFIG_IOSCHED_BFQ=y" in frags[-1]
    assert kconfig.block_config() in frags  # its disk needs the driver
    snap = manifest.load("nvme-snapshot-read")
    assert snap.userland == "initramfs" and snap.files == {}
    assert build_spec(snap).fragments == (kconfig.block_config(), snap.config_fragment)
    assert build_spec(manifest.load("sched-pipe")).fragments[-1].startswith("# sched-pipe")


def test_modules_are_named_as_the_kernel_names_them() -> None:
    m = manifest.load("nvme-snapshot-read")
    assert m.modules == ["dm_mod", "dm_snapshot"]
