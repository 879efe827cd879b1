"""A network testcase's host side: the guest's device is user-mode and restricted, one
loopback port forwarded in, and the host's real iperf3 client runs into it again and again
while the guest runs (here a stand-in QEMU whose "guest" is a real iperf3 server on the
forwarded port)."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kbisect.errors import UserError
from kbisect.infra import net_peer, qemu
from kbisect.infra.libvirt_machine import LibvirtMachine
from kbisect.model import Artifact, GuestImage, Outcome
from kbisect.testcases import net_throughput

# The stand-in: from its -netdev argument, the host port; there, two real iperf3 tests
# served one after the other, as two repetitions of the guest script would, each leaving
# its JSON; then a "done" record.
FAKE_QEMU = r"""#!/bin/sh
for a in "$@"; do
  case "$a" in
    file,id=console,path=*) console=${a#file,id=console,path=} ;;
    file,id=results,path=*) results=${a#file,id=results,path=} ;;
    user,id=kbnet,*) port=${a#*hostfwd=tcp:127.0.0.1:}; port=${port%%-*} ;;
  esac
done
: >"$console"; : >"$results"
echo 'KBISECT {"event":"booted"}' >>"$results"
for rep in 1 2; do
  timeout 30 iperf3 -s -1 -J -p "$port" > "$KB_OUT/test$rep.json" || exit 3
done
echo 'KBISECT {"event":"done","status":0}' >>"$results"
"""


def test_the_guest_gets_one_restricted_device_with_one_loopback_port_forwarded() -> None:
    netdev = net_peer.netdev_args(40000)
    assert netdev[0] == "-netdev" and netdev[2:] == ["-device", "virtio-net-pci,netdev=kbnet"]
    options = netdev[1].split(",")
    assert "restrict=on" in options  # the guest can open nothing of its own
    to_guest = f"{net_peer.GUEST_ADDRESS}:{net_peer.GUEST_PORT}"
    assert f"hostfwd=tcp:127.0.0.1:40000-{to_guest}" in options
    assert f"hostfwd=udp:127.0.0.1:40000-{to_guest}" in options
    assert not any(o.startswith(("guestfwd", "smb", "tftp")) for o in options)


@pytest.mark.parametrize(
    ("params", "options"),
    [
        ({"PROTOCOL": "tcp", "DIRECTION": "tx", "SECONDS_EACH": "5"}, ("-t", "5", "-R")),
        ({"PROTOCOL": "udp", "DIRECTION": "rx", "SECONDS_EACH": "2"}, ("-t", "2", "-u", "-b", "0")),
    ],
)
def test_the_client_s_options_follow_the_params(
    params: dict[str, str], options: tuple[str, ...]
) -> None:
    assert net_throughput.peer_options(params) == options


def test_a_network_guest_is_served_by_the_host_s_client_until_qemu_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / qemu.QEMU).write_text(FAKE_QEMU)
    (bindir / qemu.QEMU).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("KB_OUT", str(tmp_path))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    options = net_throughput.peer_options(
        {"PROTOCOL": "tcp", "DIRECTION": "tx", "SECONDS_EACH": "1"}
    )
    guest = GuestImage("/nonexistent/initramfs", (), peer=options)
    artifact = Artifact("c0ffee", "t", "h", "/nonexistent/bzImage", "/c", "/l")
    run = qemu.QemuMachine(memory_mib=64, cpus=1)._run_in(
        run_dir, "tcg", artifact, guest, [], 120, "", lambda _: None
    )
    assert run.outcome is Outcome.SUCCESS, run.detail
    for rep in (1, 2):
        end = json.loads((tmp_path / f"test{rep}.json").read_text())["end"]
        assert end["sum_sent"]["bits_per_second"] > 0  # -R: the server, the guest, sent
    argv = (run_dir / "qemu.argv").read_text().splitlines()
    assert "virtio-net-pci,netdev=kbnet" in argv
    assert (run_dir / net_peer.PEER_LOG).stat().st_size > 0


def test_the_client_loop_stops_with_its_guest_and_keeps_a_bounded_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens: every client fails at once, and the loop retries until stopped.
    monkeypatch.setattr(net_peer, "RETRY_PAUSE", 0.01)
    monkeypatch.setattr(net_peer, "LOG_CAP", 2000)
    port = net_peer.free_port()
    with net_peer.Peer(tmp_path, port, ("-t", "1")) as peer:
        peer.stopping.wait(1)
    assert not peer.thread.is_alive()
    log = (tmp_path / net_peer.PEER_LOG).read_bytes()
    assert b"unable to connect" in log or b"Connection refused" in log
    assert len(log) < 2000 + 4096  # one client's output past the cap at most


def test_the_libvirt_machine_refuses_a_guest_with_a_peer_before_any_daemon() -> None:
    def no_daemon(uri: str) -> Any:
        raise AssertionError("connected")

    guest = GuestImage("/nonexistent/initramfs", (), peer=("-t", "1"))
    artifact = Artifact("c0ffee", "t", "h", "/nonexistent/bzImage", "/c", "/l")
    machine = LibvirtMachine(connect=no_daemon)
    with pytest.raises(UserError, match="KBISECT_MACHINE=qemu") as info:
        machine.run(artifact, guest, [], 10)
    assert "\n" not in str(info.value)
