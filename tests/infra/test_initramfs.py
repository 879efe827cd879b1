import subprocess
from pathlib import Path

import pytest

from kbisect.errors import InfraError
from kbisect.infra import initramfs


def _listing(path: str) -> list[str]:
    out = subprocess.run(
        ["cpio", "-t", "--quiet"],
        stdin=open(path, "rb"),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def test_image_has_busybox_the_tools_and_their_libraries(cache: Path) -> None:
    image = initramfs.build_image(["dmsetup"], b"echo hi\n", {"READ_MIB": "16"})
    names = _listing(image.initramfs)
    for want in ("init", "bin/busybox", "bin/sh", "usr/sbin/dmsetup", "kbisect/testcase.sh"):
        assert want in names
    assert any(n.startswith("lib/x86_64-linux-gnu/libdevmapper") for n in names)
    assert any("ld-linux" in n for n in names)


def test_image_is_cached_by_content(cache: Path) -> None:
    a = initramfs.build_image([], b"echo a\n", {})
    b = initramfs.build_image([], b"echo a\n", {})
    c = initramfs.build_image([], b"echo c\n", {})
    assert a.initramfs == b.initramfs != c.initramfs


def test_unknown_tool_names_its_package(cache: Path) -> None:
    with pytest.raises(InfraError, match="apt-get install"):
        initramfs.build_image(["no-such-tool-kb"], b"", {})


def test_parameter_values_cannot_carry_shell(cache: Path) -> None:
    with pytest.raises(InfraError, match="characters"):
        initramfs.build_image([], b"", {"X": "1; reboot"})


def test_a_host_root_image_carries_the_flag_and_files_but_no_tool_copies(cache: Path) -> None:
    image = initramfs.build_image(
        ["dmsetup"], b"fio /kbisect/job.fio\n", {}, host_root=True, extra={"job.fio": b"[a]\n"}
    )
    names = _listing(image.initramfs)
    assert image.host_root and "kbisect/host-root" in names and "kbisect/job.fio" in names
    assert "usr/sbin/dmsetup" not in names  # it runs from the host's root filesystem
    plain = initramfs.build_image(["dmsetup"], b"fio /kbisect/job.fio\n", {})
    assert not plain.host_root and "kbisect/host-root" not in _listing(plain.initramfs)
