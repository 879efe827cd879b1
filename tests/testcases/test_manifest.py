import shutil
from pathlib import Path

import pytest

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
