"""The host userland's image for kernels without 9p: which packages and files go in, read
from this host's real dpkg database (kbisect runs on Debian), and its cache key."""

import os
from pathlib import Path

from kbisect.infra import host_userland
from kbisect.infra.qemu import USERLAND_SERIAL, host_userland_args
from kbisect.model import GuestImage


def test_a_tools_packages_come_with_their_dependencies_and_the_essential_set() -> None:
    packages = host_userland.closure(["dash", *host_userland.tool_packages(["busybox"])])
    assert {"dash", "libc6", "coreutils", "busybox-static"} <= set(packages)
    assert "openssh-server" not in packages  # not a dependency of any of them


def test_its_files_hold_the_tools_the_alternatives_links_and_etc_but_no_secrets() -> None:
    files = set(host_userland.files(host_userland.closure(["mawk", "dash"])))
    assert "usr/bin/mawk" in files and "usr/bin/awk" in files  # awk: update-alternatives'
    assert "etc/passwd" in files
    assert not any(f.startswith(("etc/shadow", "etc/gshadow", "etc/ssh/")) for f in files)
    assert not any(f.startswith(("bin/", "lib/")) for f in files)  # merged /usr: usr/bin/...


def test_the_key_follows_what_went_in(tmp_path: Path) -> None:
    """A file added, or one whose size or mtime changed (an upgrade), makes a new image;
    a file gone since it was listed is left out, not a crash."""
    mine = tmp_path / "tool"
    mine.write_text("v1")
    few = [*host_userland.files(["dash"]), str(mine).lstrip("/")]
    first = host_userland.key(few)
    assert first != host_userland.key(few[:-1])
    os.utime(mine, ns=(1, 1))
    assert host_userland.key(few) != first
    mine.unlink()
    assert host_userland.key(few) == host_userland.key(few[:-1])


def test_what_the_guest_hides_is_read_from_guest_init_and_root_only_files_stay_out(
    tmp_path: Path,
) -> None:
    assert {"root", "home", "etc/ssh", "etc/shadow", "etc/gshadow-"} <= set(host_userland.hidden())
    private = tmp_path / "key"
    private.write_text("secret")
    private.chmod(0o600)
    assert not host_userland._readable(str(private))
    private.chmod(0o644)
    assert host_userland._readable(str(private))


def test_the_guest_gets_the_image_on_a_read_only_virtio_disk_by_its_serial() -> None:
    argv = host_userland_args(GuestImage("/i", (), host_root=True, userland_image="/c/u.squashfs"))
    drive = argv[argv.index("-drive") + 1].split(",")
    assert "readonly=on" in drive and "file=/c/u.squashfs" in drive
    assert argv[argv.index("-device") + 1] == (
        f"virtio-blk-pci,drive={USERLAND_SERIAL},serial={USERLAND_SERIAL}"
    )
    assert "-fsdev" not in argv
    assert "-fsdev" in host_userland_args(GuestImage("/i", (), host_root=True))
    assert host_userland_args(GuestImage("/i", ())) == []
