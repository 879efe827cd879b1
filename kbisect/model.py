"""Plain data passed between the pieces (and, later, Temporal activities)."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePath

PREBUILT_TAG = "prebuilt"  # Artifact.config_hash of prebuilt kernels starts with it


@dataclass(frozen=True)
class Commit:
    hash: str
    subject: str
    author: str = ""
    date: str = ""


@dataclass(frozen=True)
class BuildSpec:
    """What to build: a base config plus fragments, for one architecture."""

    fragments: tuple[str, ...]  # config fragment texts, merged over the base in order
    arch: str = "x86_64"
    target: str = "bzImage"
    # A whole config of the user's (a distro's, --config) instead of tinyconfig: trimmed
    # by localmodconfig to `modules`, which are built, kept and loaded in the guest.
    base_config: str = ""
    modules: tuple[str, ...] = ()
    cflags: tuple[str, ...] = ()  # the compiler's flags beyond the kernel's own (KCFLAGS)


@dataclass(frozen=True)
class Artifact:
    commit: str
    tree: str
    config_hash: str
    kernel: str  # path to the bootable image
    config: str  # path to the resolved .config
    build_log: str
    cached: bool = False
    seconds: float = 0.0
    image_sha256: str = ""  # byte-identical images are the same kernel: one verdict
    sources: str = ""  # path to the list of files the build compiled ('' = unknown)
    # The kernel's modules folder (lib/modules/RELEASE, with modules.builtin); '' = a
    # kernel without loadable modules: whatever the testcase needs is built in.
    modules: str = ""

    @property
    def prebuilt(self) -> bool:
        return self.config_hash.startswith(PREBUILT_TAG)

    @property
    def label(self) -> str:
        """The kernel as a person knows it: a built one by its commit, a prebuilt one (whose
        commit may be a kernel list's) by its release, else its package's version."""
        if not self.prebuilt:
            return self.commit
        return PurePath(self.modules).name if self.modules else self.tree


@dataclass(frozen=True)
class DeviceProfile:
    """How QEMU models a disk: limits applied through its I/O throttling."""

    name: str
    iops: int = 0  # 0: unthrottled
    bps: int = 0


@dataclass(frozen=True)
class Disk:
    name: str  # the name the guest script sees, e.g. "origin"
    size_mib: int
    profile: DeviceProfile
    keep: bool = False  # the image stays in the run dir (the guest wrote results on it)

    @property
    def serial(self) -> str:
        return f"kb-{self.name}"


@dataclass(frozen=True)
class GuestImage:
    initramfs: str
    tools: tuple[str, ...]
    # The guest runs the testcase on the host's userland (read-only, under an overlay in
    # memory) rather than in the initramfs alone: the host's root over virtio-9p, or
    # (`userland_image`, a path) a squashfs image of its packages on a virtio disk.
    host_root: bool = False
    userland_image: str = ""
    modules: tuple[str, ...] = ()  # loaded by the guest's init, in this order
    # The host's iperf3 client options (testcases.net_throughput): the machine gives the
    # guest a network device and runs the client beside it, connecting in. () for none.
    peer: tuple[str, ...] = ()


class Outcome(StrEnum):
    """The ways a guest run ends, told apart by the result channel and console. The
    testcase script's status follows `git bisect run`: 0 success, 125 cannot test, 1-127
    failed, 128 and above a fault of the harness (a killed script): cannot test either.
    The guest's own set-up failures (a module that does not load, a host root that does
    not mount) come as a `harness-failed` record, never as a status."""

    SUCCESS = "success"
    TESTCASE_FAILED = "testcase-failed"
    CANNOT_TEST = "cannot-test"
    PANIC = "panic"
    HANG = "hang"


@dataclass(frozen=True)
class GuestRun:
    outcome: Outcome
    records: list[dict[str, object]]  # framed records from the result channel
    console: str  # path of the captured console
    seconds: float
    accel: str
    detail: str = ""


class Direction(StrEnum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: Direction
    value: float  # median over the scored repetitions
    samples: list[float] = field(default_factory=list)
    warmup: list[float] = field(default_factory=list)  # run first, reported, not scored


# A boot's statistics by (source, name): the system's, iostat's, a profile's shares
Stats = dict[tuple[str, str], float]


def stats_by_source(stats: Stats) -> dict[str, dict[str, float]]:
    """The statistics as JSON carries them (its keys are strings): by source, then name."""
    out: dict[str, dict[str, float]] = {}
    for (source, name), value in stats.items():
        out.setdefault(source, {})[name] = value
    return out


def stats_of(by_source: dict[str, dict[str, float]]) -> Stats:
    """stats_by_source() read back."""
    return {(s, n): v for s, names in by_source.items() for n, v in names.items()}


# The folded stack that holds the samples of the stacks left out (a command has no space:
# no sample's stack reads as it), so that shares and a flame graph's widths stay of all
LEFT_OUT = "[left out]"


def top_stacks(stacks: Mapping[str, int], n: int, chars: int) -> Counter[str]:
    """The `n` most sampled stacks that fit `chars` characters in all; the others' samples
    summed under LEFT_OUT."""
    kept: Counter[str] = Counter()
    left, room = 0, chars
    for stack, count in Counter(stacks).most_common():
        if stack != LEFT_OUT and len(kept) < n and len(stack) <= room:
            kept[stack], room = count, room - len(stack)
        else:
            left += count
    if left:
        kept[LEFT_OUT] = left
    return kept


@dataclass(frozen=True)
class Score:
    testcase: str
    primary: str
    metrics: dict[str, Metric]

    @property
    def primary_metric(self) -> Metric:
        return self.metrics[self.primary]
