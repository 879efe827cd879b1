"""Network throughput, LKP's netperf/iperf figures: `iperf3[:tcp|udp][:tx|rx]`.

The guest serves (`iperf3 -s -1`, one test a repetition) and a client on the host, the
testcase's peer, connects in through QEMU's user-mode network, which forwards one
loopback port to the guest and lets the guest open nothing (restrict=on): the kernel under
test never reaches the host's network. "tx" is the guest sending (the client's -R), as
netperf's TCP_STREAM from the machine under test; "rx" the guest receiving.
"""

import json
from collections.abc import Mapping

from kbisect.infra.net_peer import GUEST_ADDRESS, GUEST_PORT, PEER_LOG

KIND = "iperf3"
USAGE = "iperf3[:tcp|udp][:tx|rx]"
PEER = "iperf3"  # a manifest's `peer`: the one host-side program kbisect runs beside a guest
PROTOCOLS = ("tcp", "udp")
DIRECTIONS = ("tx", "rx")
MAX_SECONDS = 60
# How long a repetition's server waits past its test for the host's client to come.
CONNECT_GRACE = 60
# The guest's one network device up, at the address the forwarded port goes to.
PRELUDE = (
    'dev=$(for d in /sys/class/net/*; do [ "${d##*/}" = lo ] || { echo "${d##*/}"; break; }; '
    "done)\n"
    '[ -n "$dev" ] || { echo "kbisect: no network device (CONFIG_VIRTIO_NET)"; exit 125; }\n'
    "ip link set lo up\n"
    'ip link set "$dev" up\n'
    f'ip addr add {GUEST_ADDRESS}/24 dev "$dev"\n'
)
# The figures beside mbps a test gives, by protocol and direction; each is the key iperf3
# -J gives it on the guest's side. metrics() and FIGURES both read this one table.
EXTRA: dict[tuple[str, str], tuple[str, ...]] = {
    ("tcp", "tx"): ("retransmits",),
    ("udp", "rx"): ("jitter_ms", "lost_percent"),
}
# The figures of the guest's side of one test (iperf3 -J), as "metric value" lines.
FIGURES = (
    "import json, sys\n"
    'end = json.load(open(sys.argv[1]))["end"]\n'
    "protocol, direction = sys.argv[2], sys.argv[3]\n"
    'side = end["sum_sent" if direction == "tx" else "sum_received"]\n'
    'print("mbps", side["bits_per_second"] / 1e6)\n'
    f"extra = {json.dumps({f'{p} {d}': list(names) for (p, d), names in EXTRA.items()})}\n"
    'for name in extra.get(protocol + " " + direction, []):\n'
    "    print(name, side[name])\n"
)
METRICS = {
    "mbps": ("Mbit/s", "higher", "throughput of the guest's side, megabits per second"),
    "retransmits": ("segments", "lower", "TCP segments the guest sent again"),
    "jitter_ms": ("ms", "lower", "UDP jitter the guest saw"),
    "lost_percent": ("%", "lower", "UDP datagrams lost on the way to the guest"),
}


def metrics(protocol: str, direction: str) -> list[str]:
    """The figures a test of this protocol and direction gives (FIGURES prints them)."""
    return ["mbps", *EXTRA.get((protocol, direction), ())]


def body() -> str:
    """One repetition: serve one test, then report its figures."""
    return (
        f'\ttimeout "$((SECONDS_EACH + {CONNECT_GRACE}))" iperf3 -s -1 -J -p {GUEST_PORT} '
        "> /tmp/kb-iperf3.json || {\n"
        f'\t\techo "kbisect: no iperf3 test from the host\'s client (its log: {PEER_LOG})"\n'
        "\t\thead -c 2000 /tmp/kb-iperf3.json\n"
        "\t\texit 1\n"
        "\t}\n"
        f'\tpython3 -c \'{FIGURES}\' /tmp/kb-iperf3.json "$PROTOCOL" "$DIRECTION" '
        "> /tmp/kb-iperf3.metrics\n"
        '\twhile read -r metric value; do kb_metric "$rep" "$metric" "$value"; done '
        "< /tmp/kb-iperf3.metrics\n"
    )


def peer_options(params: Mapping[str, str]) -> tuple[str, ...]:
    """The host client's options for a testcase's params (PROTOCOL, DIRECTION,
    SECONDS_EACH); ValueError: one is missing or out of bounds."""
    protocol = params.get("PROTOCOL", "")
    direction = params.get("DIRECTION", "")
    seconds = params.get("SECONDS_EACH", "")
    if protocol not in PROTOCOLS:
        raise ValueError(f"param PROTOCOL must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    if direction not in DIRECTIONS:
        raise ValueError(
            f"param DIRECTION must be one of {', '.join(DIRECTIONS)}, not {direction!r}"
        )
    if not seconds.isdigit() or not 1 <= int(seconds) <= MAX_SECONDS:
        raise ValueError(
            f"param SECONDS_EACH must be a whole number from 1 to {MAX_SECONDS}, not {seconds!r}"
        )
    options = ["-t", str(int(seconds))]
    if protocol == "udp":
        options += ["-u", "-b", "0"]  # as fast as it goes: what arrives is the figure
    if direction == "tx":
        options.append("-R")  # the server, the guest, sends
    return tuple(options)
