"""The guest init's view of the host (userland = "host"), run in a shell with `mount`
stubbed: nothing boots."""

import re
import subprocess
from pathlib import Path

from kbisect.infra import initramfs
from kbisect.infra.qemu import host_root_args

INIT = (Path(initramfs.__file__).parent / "guest_init.sh").read_text()


def _function(name: str) -> str:
    m = re.search(rf"^{name}\(\) \{{\n.*?^\}}\n", INIT, re.M | re.S)
    assert m, f"{name} not in guest_init.sh"
    return m.group()


def _hide(root: Path) -> list[str]:
    """The mounts kb_hide_host makes under `root`, as `mount` would be called."""
    lists = "\n".join(ln for ln in INIT.splitlines() if ln.startswith("KB_HIDDEN_"))
    script = (
        f'mount() {{ echo "mount $*"; }}\n{lists}\n{_function("kb_hide_host")}kb_hide_host "$1"'
    )
    shell = [str(initramfs.BUSYBOX), "sh"] if initramfs.BUSYBOX.exists() else ["sh"]  # the guest's
    run = subprocess.run(
        [*shell, "-c", script, "sh", str(root)], capture_output=True, text=True, check=True
    )
    return run.stdout.splitlines()


def test_the_host_root_is_exported_and_mounted_read_only() -> None:
    """QEMU opens host files as its own user (security_model=none, no ownership mapped
    into xattrs) and refuses writes; the guest mounts it ro too."""
    fsdev = host_root_args()[1].split(",")
    assert {"readonly=on", "security_model=none", "path=/"} <= set(fsdev)
    assert re.search(r"mount -t 9p -o ro,", _function("kb_host_root"))


def test_homes_ssh_keys_and_password_hashes_are_hidden(tmp_path: Path) -> None:
    for d in ("root", "home/alice/.cache/kbisect", "etc/ssh"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "etc/shadow").write_text("root:$6$hash\n")
    assert _hide(tmp_path) == [
        f"mount -t tmpfs -o mode=0700 tmpfs {tmp_path}/root",
        f"mount -t tmpfs -o mode=0700 tmpfs {tmp_path}/home",
        f"mount -t tmpfs -o mode=0700 tmpfs {tmp_path}/etc/ssh",
        f"mount -o bind /dev/null {tmp_path}/etc/shadow",  # no gshadow here: nothing to hide
    ]


def test_the_testcase_runs_with_them_hidden() -> None:
    body = _function("kb_host_root")
    assert "kb_hide_host /newroot" in body
    assert body.index("kb_hide_host /newroot") > body.index("overlay /newroot")
