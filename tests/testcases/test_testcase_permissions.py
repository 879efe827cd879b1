"""A testcase's script runs as root in a guest that can read the host's files (the host
userland): only its owner (this user, root, or whoever owns kbisect's own code) may be able
to change it. A folder or file others can write is refused with one line that says how."""

import grp
import os
import pwd
import shutil
from pathlib import Path

import pytest

from kbisect.errors import ManifestError
from kbisect.testcases import manifest

BUILTIN = manifest.BUILTIN_DIR / "fio-read-latency"  # a host-userland testcase with files
STRANGER = 54321  # a uid and gid no account has


@pytest.fixture
def mine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KBISECT_TESTCASES", str(tmp_path / "lib"))
    folder = tmp_path / "lib" / "mine"
    shutil.copytree(BUILTIN, folder)
    text = (folder / "manifest.toml").read_text()
    (folder / "manifest.toml").write_text(text.replace('"fio-read-latency"', '"mine"', 1))
    os.chmod(folder, 0o755)
    for f in folder.iterdir():
        os.chmod(f, 0o644)
    return folder


def _refused(path: Path, why: str) -> str:
    with pytest.raises(ManifestError) as err:
        manifest.load("mine")
    message = str(err.value)
    assert "\n" not in message and str(path) in message and why in message, message
    return message


def test_a_private_testcase_loads(mine: Path) -> None:
    assert manifest.load("mine").userland == "host"


def test_a_folder_anyone_can_write_is_refused(mine: Path) -> None:
    os.chmod(mine, 0o777)
    assert "chmod go-w" in _refused(mine, "writable by every user")


@pytest.mark.parametrize("name", ["manifest.toml", "guest.sh", "config.fragment", "readers.fio"])
def test_a_file_anyone_can_write_is_refused(mine: Path, name: str) -> None:
    assert (mine / name).is_file()
    os.chmod(mine / name, 0o646)
    _refused(mine / name, "writable by every user")


def test_a_file_a_shared_group_can_write_is_refused(mine: Path) -> None:
    os.chown(mine / "guest.sh", -1, STRANGER)
    os.chmod(mine / "guest.sh", 0o664)
    _refused(mine / "guest.sh", f"writable by group {STRANGER}")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_file_of_another_user_is_refused(mine: Path) -> None:
    os.chown(mine / "guest.sh", STRANGER, -1)
    _refused(mine / "guest.sh", f"belongs to uid {STRANGER}")


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_folder_of_another_user_is_refused(mine: Path) -> None:
    os.chown(mine, STRANGER, -1)
    _refused(mine, f"belongs to uid {STRANGER}")


def test_the_owners_private_group_may_write(mine: Path) -> None:
    """Ubuntu's umask 002 makes files writable by the owner's own group (same name, no
    other member): that is the owner alone."""
    me = pwd.getpwuid(os.geteuid())
    group = grp.getgrgid(me.pw_gid)
    if group.gr_name != me.pw_name or set(group.gr_mem) - {me.pw_name}:
        pytest.skip("this user has no private group")
    os.chown(mine / "guest.sh", -1, me.pw_gid)
    os.chmod(mine, 0o775)
    os.chmod(mine / "guest.sh", 0o664)
    assert manifest.load("mine").script


def test_the_listing_shows_a_writable_testcase_with_why(mine: Path) -> None:
    os.chmod(mine / "guest.sh", 0o666)
    rows = {row.name: row for row in manifest.catalog()}
    assert rows["mine"].manifest is None and "chmod go-w" in rows["mine"].error


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_the_owner_of_kbisects_code_is_trusted(
    mine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root running another user's checkout: that user controls the code anyway."""
    code = tmp_path / "code"
    code.mkdir()
    os.chown(code, STRANGER, -1)
    for path in (mine, *mine.iterdir()):
        os.chown(path, STRANGER, -1)
    _refused(mine, f"belongs to uid {STRANGER}")
    monkeypatch.setattr(manifest, "BUILTIN_DIR", code)
    assert manifest.load("mine").name == "mine"
