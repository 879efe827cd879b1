"""`kbisect testcase new`: a working testcase folder for a user to edit.

The skeleton runs as it is (a timed sequential read of an NVMe disk, with the request
count as an exact metric), so `kbisect testcase check` passes before any edit and each
edit can be checked on its own.
"""

from pathlib import Path

from kbisect.errors import UserError
from kbisect.testcases import kinds
from kbisect.testcases import manifest as manifests

MANIFEST = """\
# {name}: what it measures, in one line for `kbisect testcases`.
name = "{name}"
description = "Sequential read of a raw NVMe disk (a skeleton: edit guest.sh)"
primary = "throughput"   # the metric a bisection judges by default (--metric picks another)
repetitions = 3          # runs of the script's loop per boot
warmup = 1               # runs first in every boot, reported, not scored
timeout = 300            # seconds for one boot, all repetitions included
tools = []               # host commands the guest needs besides busybox, e.g. ["dmsetup"]
config = "config.fragment"
script = "guest.sh"
profile = "fast"         # device profile of the disks: fast or ebs-gp2

[params]                 # exported to guest.sh; values of A-Z a-z 0-9 _.:/+- only
READ_MIB = "64"

[[disks]]                # KB_DISK_data in guest.sh: the NVMe namespace with serial kb-data
name = "data"
size_mib = 96

[metrics.throughput]
unit = "MB/s"
better = "higher"
description = "dd read throughput"

[metrics.reads]
unit = "requests"
better = "lower"
exact = true             # a count: the same on every run of one kernel
description = "reads completed by the disk"
"""

GUEST = """\
# {name}: runs in the guest under `sh -e` (busybox), with the kb_* helpers, KB_DISK_<name>
# for each disk, the manifest's params and KB_REPETITIONS (warm-up ones included).
# Report each sample with: kb_metric REP NAME VALUE
dev=${{KB_DISK_data#/dev/}}
rep=1
while [ "$rep" -le "$KB_REPETITIONS" ]; do
	echo 3 > /proc/sys/vm/drop_caches
	set -- $(kb_stat "$dev")
	r0=$1
	t0=$(kb_now)
	dd if="$KB_DISK_data" of=/dev/null bs=1M count="$READ_MIB" 2>/dev/null
	t1=$(kb_now)
	set -- $(kb_stat "$dev")
	kb_metric "$rep" reads $(($1 - r0))
	kb_metric "$rep" throughput "$(awk -v m="$READ_MIB" -v a="$t0" -v b="$t1" \\
		'BEGIN{{d = b - a; if (d < 0.01) d = 0.01; printf "%.1f", m * 1.048576 / d}}')"
	rep=$((rep + 1))
done
"""

FRAGMENT = """\
# Kernel options this testcase needs on top of kbisect's base config (the NVMe driver
# comes with the disks): CONFIG_X=y lines and comments only, e.g.
# CONFIG_BLK_DEV_DM=y
"""


def default_dir(data: Path, testcase_dirs: tuple[Path, ...]) -> Path:
    """Where `testcase new` writes: the first KBISECT_TESTCASES folder, else the user's."""
    return testcase_dirs[0] if testcase_dirs else manifests.user_dir(data)


def write(name: str, root: Path, kind: str = "") -> Path:
    """The new testcase folder, the skeleton's or, given `kind` (`stress-ng:switch`), that
    kind's rendering under the new name; UserError if the name is taken or invalid."""
    if not manifests.NAME_RE.match(name):
        raise UserError(f"invalid testcase name {name!r}: use lowercase letters, digits and dashes")
    if name in manifests.available():
        raise UserError(f"a testcase named {name!r} exists already: pick another name")
    folder = root / name
    if folder.exists():
        raise UserError(f"{folder} exists already: pick another name or remove it")
    rendered = kinds.render(kind, as_name=name) if kind else None
    try:
        if rendered is not None:
            kinds.write(folder, rendered)
            return folder
        folder.mkdir(parents=True)
        (folder / "manifest.toml").write_text(MANIFEST.format(name=name))
        (folder / "guest.sh").write_text(GUEST.format(name=name))
        (folder / "config.fragment").write_text(FRAGMENT)
    except OSError as exc:  # --dir is a file, under /proc, read-only...
        raise UserError(
            f"cannot make {folder} ({exc.strerror}): give --dir a folder you can write to"
        ) from exc
    return folder
