"""`iperf3[:tcp|udp][:tx|rx]`: rendered with its host peer, loaded with the peer's params
checked, and its guest script reads the figures of real iperf3 tests (run on this host's
loopback; the guest's tools stubbed to replay them)."""

import os
import subprocess
from pathlib import Path

import pytest

from kbisect.errors import ManifestError, UnknownTestcaseError, UserError
from kbisect.infra import net_peer
from kbisect.testcases import kinds, manifest, net_throughput, runner


def _real_test(tmp_path: Path, options: tuple[str, ...]) -> Path:
    """The server side's JSON of one real iperf3 test on loopback, the client given
    `options` (the peer's)."""
    port = net_peer.free_port()
    out = tmp_path / "server.json"
    with open(out, "wb") as sink:
        server = subprocess.Popen(["iperf3", "-s", "-1", "-J", "-p", str(port)], stdout=sink)
        try:
            for _ in range(50):  # until the server listens
                client = subprocess.run(
                    net_peer.client_argv(port, options), capture_output=True, timeout=60
                )
                if client.returncode == 0:
                    break
            assert server.wait(timeout=30) == 0
        finally:
            server.kill()
    return out


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("iperf3", {"mbps", "retransmits"}),
        ("iperf3:udp:rx", {"mbps", "jitter_ms", "lost_percent"}),
        ("iperf3:tcp:rx", {"mbps"}),
    ],
)
def test_the_guest_script_reports_a_real_test_s_figures(
    name: str, expected: set[str], tmp_path: Path, cache: Path
) -> None:
    m = manifest.load(name)
    assert m.peer == net_throughput.PEER and m.primary == "mbps"
    assert set(m.metrics) == expected
    assert "CONFIG_VIRTIO_NET=y" in "".join(runner.build_spec(m).fragments)
    options = dict(m.params, SECONDS_EACH="1")
    served = _real_test(tmp_path, net_throughput.peer_options(options))
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ip").write_text(f'#!/bin/sh\necho "ip $*" >> {tmp_path}/ip.calls\n')
    (bin_ / "iperf3").write_text(f"#!/bin/sh\ncat {served}\n")
    for tool in ("ip", "iperf3"):
        (bin_ / tool).chmod(0o755)
    script = tmp_path / "guest.sh"
    helpers = 'kb_metric() { echo "METRIC $2 $3"; }\n'
    script.write_text(helpers + m.script.decode().replace("/tmp/", f"{tmp_path}/"))
    env = {**os.environ, **m.params, "KB_REPETITIONS": "1", "PATH": f"{bin_}:{os.environ['PATH']}"}
    run = subprocess.run(["sh", "-e", str(script)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    got = {
        line.split()[1]: float(line.split()[2])
        for line in run.stdout.splitlines()
        if line.startswith("METRIC ")
    }
    assert set(got) == expected and got["mbps"] > 0
    calls = (tmp_path / "ip.calls").read_text()
    assert f"addr add {net_peer.GUEST_ADDRESS}/24" in calls and "link set lo up" in calls


def test_its_peer_options_come_from_the_manifest(cache: Path) -> None:
    assert manifest.load("iperf3").peer_options == ("-t", "5", "-R")
    assert manifest.load("iperf3:udp:rx").peer_options == ("-t", "5", "-u", "-b", "0")
    assert manifest.load("stress-ng:switch").peer_options == ()


@pytest.mark.parametrize(
    ("name", "error", "says"),
    [
        ("iperf3:sctp", UnknownTestcaseError, "one of tcp, udp"),
        ("iperf3:tcp:up", UnknownTestcaseError, "one of tx, rx"),
        ("iperf3:tcp:tx:9", UserError, "too many arguments"),
    ],
)
def test_bad_arguments_are_one_line(name: str, error: type[Exception], says: str) -> None:
    with pytest.raises(error) as info:
        kinds.render(name)
    assert says in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("peer", "params", "says"),
    [
        ("netperf", 'PROTOCOL = "tcp"', 'must be "iperf3"'),
        ("iperf3", 'PROTOCOL = "tcp"\nDIRECTION = "tx"', "SECONDS_EACH must be a whole number"),
        ("iperf3", 'PROTOCOL = "sctp"\nDIRECTION = "tx"\nSECONDS_EACH = "5"', "PROTOCOL"),
        ("iperf3", 'PROTOCOL = "tcp"\nDIRECTION = "tx"\nSECONDS_EACH = "61"', "from 1 to 60"),
    ],
)
def test_a_hand_written_peer_is_checked_at_load(
    peer: str, params: str, says: str, tmp_path: Path, cache: Path
) -> None:
    folder = tmp_path / "net-test"
    kinds.write(folder, kinds.render("iperf3", "net-test"))
    text = (folder / "manifest.toml").read_text().replace('peer = "iperf3"', f'peer = "{peer}"')
    head, _, tail = text.partition("[params]\n")
    rest = tail.partition("\n\n")[2]
    (folder / "manifest.toml").write_text(f"{head}[params]\n{params}\n\n{rest}")
    with pytest.raises(ManifestError) as info:
        manifest.load_folder(folder)
    assert says in str(info.value) and "\n" not in str(info.value)
