"""What the lab's culprit commit does to the kernel, as text edits of one driver file.

`nomerges` (the seed): NVMe namespace queues stop merging requests, so reads reach the
device one 8-sector chunk at a time: the counters (request size, reads) show it.
`slowdown:P`: each read submission to an NVMe queue busy-waits for P% of the time since
the previous one, so read throughput drops by about P% while every counter stays the
same: only a noisy timing metric can find it.
`wbt`: writeback throttling takes the rotational disks' 75 ms read latency target for
every device (2 ms for SSDs before), so buffered writeback fills an NVMe queue and small
reads wait behind it: read latency under writeback (fio-read-latency) gets worse, and a
config without CONFIG_BLK_WBT does not even compile the change.
`panic`: init checks that the initramfs holds the init it names, with the check the wrong
way round (init_eaccess() returns 0 when it does), so every boot from an initramfs
panics: the `boots` testcase finds it, `--signature "missing from the initramfs"` names
its message.
`flaky:P`: in P% of boots (drawn once a boot from the kernel's random numbers), NVMe
fails every read, as a race with the controller's start-up would: the `disk-read`
testcase fails one boot in 100/P, a flaky pass/fail bisection (`--flaky`).
`fails`: NVMe fails every read longer than the controller's transfer limit, a limit in
sectors compared with a length in bytes, so nearly every read gets an I/O error: the
`disk-read` testcase fails (a pass/fail bisection).
`writelock`: a buffered write to a block device takes the device inode's i_rwsem
exclusively instead of shared, so a small read of the same device waits while a big
buffered writer sleeps in dirty throttling inside its write(): read latency under
writeback gets worse (fio-read-latency), request sizes and counts stay the same.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from kbisect.errors import InfraError, UserError

NVME_CORE = "drivers/nvme/host/core.c"
NONROT_LINE = "\tblk_queue_flag_set(QUEUE_FLAG_NONROT, ns->queue);\n"
NOMERGES_LINE = "\tblk_queue_flag_set(QUEUE_FLAG_NOMERGES, ns->queue);\n"
SETUP_HEAD = "blk_status_t nvme_setup_cmd(struct nvme_ns *ns, struct request *req)\n{\n"
SETUP_SWITCH = "\tswitch (req_op(req)) {\n"
PACE_CALL = "\tnvme_pace_read(req);\n"
MAX_PERCENT = 90
BLK_WBT = "block/blk-wbt.c"
WBT_DEFAULT = (
    "\t/*\n"
    "\t * We default to 2msec for non-rotational storage, and 75msec\n"
    "\t * for rotational storage.\n"
    "\t */\n"
    "\tif (blk_queue_nonrot(q))\n"
    "\t\treturn 2000000ULL;\n"
    "\telse\n"
    "\t\treturn 75000000ULL;\n"
)
BLK_FOPS = "block/fops.c"
WRITE_SHARED = (
    "\t\t/*\n"
    "\t\t * Take i_rwsem and invalidate_lock to avoid racing with\n"
    "\t\t * set_blocksize changing i_blkbits/folio order and punching\n"
    "\t\t * out the pagecache.\n"
    "\t\t */\n"
    "\t\tinode_lock_shared(bd_inode);\n"
    "\t\tret = generic_perform_write(iocb, from);\n"
    "\t\tinode_unlock_shared(bd_inode);\n"
)
WRITE_EXCLUSIVE = (
    "\t\t/*\n"
    "\t\t * Take i_rwsem exclusively, as generic_file_write_iter() does for\n"
    "\t\t * regular files: no racing with set_blocksize changing\n"
    "\t\t * i_blkbits/folio order and punching out the pagecache, nor with\n"
    "\t\t * another buffered writer.\n"
    "\t\t */\n"
    "\t\tinode_lock(bd_inode);\n"
    "\t\tret = generic_perform_write(iocb, from);\n"
    "\t\tinode_unlock(bd_inode);\n"
)
WBT_ONE_TARGET = (
    "\t/*\n"
    "\t * One target for every device: with 2msec, SSDs throttled writeback before\n"
    "\t * their own queues were busy, and buffered writers lost bandwidth.\n"
    "\t */\n"
    "\treturn 75000000ULL;\n"
)


INIT_MAIN = "init/main.c"
INITRAMFS_READY = "\twait_for_initramfs();\n\tconsole_on_rootfs();\n"
INIT_CHECK = (
    "\n"
    "\t/*\n"
    "\t * An initramfs that names an init it does not hold is a broken image: say\n"
    "\t * so here, with its name, rather than falling back to the root device.\n"
    "\t */\n"
    "\tif (ramdisk_execute_command && !init_eaccess(ramdisk_execute_command))\n"
    '\t\tpanic("init: %s is missing from the initramfs\\n", ramdisk_execute_command);\n'
)
READ_LIMIT = (
    "\t/*\n"
    "\t * A read longer than the controller's transfer limit would be split by the\n"
    "\t * device anyway: fail it here instead of sending it.\n"
    "\t */\n"
    "\tif (req_op(req) == REQ_OP_READ &&\n"
    "\t    blk_rq_bytes(req) > queue_max_hw_sectors(req->q))\n"
    "\t\treturn BLK_STS_IOERR;\n"
    "\n"
)


FLAKY_SUBJECT = "nvme: start read commands before the first admin completion"
FLAKY_CALL = "\tif (nvme_read_races(req))\n\t\treturn BLK_STS_IOERR;\n"


def _flaky_function(percent: int) -> str:
    # Decided once a boot: the whole boot's reads fail or none do, so a boot is bad with
    # probability P, as the test of a race that either hits at start-up or does not.
    return (
        "/*\n"
        " * Reads sent before the controller's first admin completion race with its\n"
        " * start-up: such a read is failed here rather than sent.\n"
        " */\n"
        "static bool nvme_read_races(struct request *req)\n"
        "{\n"
        "\tstatic int raced; /* 0: not known yet, 1: this boot raced, 2: it did not */\n"
        "\n"
        "\tif (req_op(req) != REQ_OP_READ)\n"
        "\t\treturn false;\n"
        "\tif (!raced)\n"
        f"\t\traced = get_random_u32() % 100 < {percent} ? 1 : 2;\n"
        "\treturn raced == 1;\n"
        "}\n"
        "\n"
    )


def _pace_function(percent: int) -> str:
    # Each read submission waits P% of the time since the previous one: the reader's
    # cycle stretches to 1/(1-P) of itself (throughput x (1-P)) on any host, whatever
    # bounds it (under TCG, the guest's CPU, not the device). Gaps over 20 ms are idle
    # time between runs, not the reader's cycle.
    return (
        "/*\n"
        " * Space read submissions out a little, so that one streaming reader cannot\n"
        " * fill the submission queue ahead of everybody else.\n"
        " */\n"
        "static void nvme_pace_read(struct request *req)\n"
        "{\n"
        "\tstatic u64 last;\n"
        "\tu64 now = ktime_get_ns();\n"
        "\tu64 gap = now - last;\n"
        "\n"
        "\tlast = now;\n"
        "\tif (req_op(req) != REQ_OP_READ || gap > 20 * NSEC_PER_MSEC)\n"
        "\t\treturn;\n"
        f"\tndelay(div_u64(gap * {percent}, 100));\n"
        "}\n"
        "\n"
    )


class _Swap(NamedTuple):
    """A culprit that replaces one block of text of one file with another."""

    path: str
    subject: str
    before: str
    after: str
    missing: str  # the error when `before` is not in the file


SLOWDOWN_SUBJECT = "nvme: pace read completions to spread interrupt load"
_SWAPS = {
    "nomerges": _Swap(
        NVME_CORE,
        "nvme: set nomerges on namespace queues to cut submission overhead",
        NONROT_LINE,
        NONROT_LINE + NOMERGES_LINE,
        f"{NVME_CORE} has no QUEUE_FLAG_NONROT line to anchor the bug",
    ),
    "wbt": _Swap(
        BLK_WBT,
        "blk-wbt: use the same latency target for every device",
        WBT_DEFAULT,
        WBT_ONE_TARGET,
        f"{BLK_WBT} has no wbt_default_latency_nsec() to change",
    ),
    "panic": _Swap(
        INIT_MAIN,
        "init: check that the initramfs holds its init",
        INITRAMFS_READY,
        INITRAMFS_READY + INIT_CHECK,
        f"{INIT_MAIN} has no wait_for_initramfs(); console_on_rootfs(); to anchor the check",
    ),
    "fails": _Swap(
        NVME_CORE,
        "nvme: fail reads over the controller's transfer limit early",
        SETUP_HEAD,
        SETUP_HEAD + READ_LIMIT,
        f"{NVME_CORE} has no nvme_setup_cmd() to anchor the check",
    ),
    "writelock": _Swap(
        BLK_FOPS,
        "block: lock the inode exclusively for buffered block device writes",
        WRITE_SHARED,
        WRITE_EXCLUSIVE,
        f"{BLK_FOPS} has no shared-locked buffered write to change",
    ),
}


class _Percent(NamedTuple):
    """A culprit with a percentage: a function before nvme_setup_cmd() and its call."""

    subject: str
    call: str
    function: Callable[[int], str]
    means: str  # what P is, for the error message
    example: str


_PERCENTS = {
    "slowdown": _Percent(
        SLOWDOWN_SUBJECT, PACE_CALL, _pace_function, "the throughput loss", "slowdown:25"
    ),
    "flaky": _Percent(
        FLAKY_SUBJECT, FLAKY_CALL, _flaky_function, "the share of boots that fail", "flaky:30"
    ),
}


@dataclass(frozen=True)
class Culprit:
    kind: str  # a key of _PERCENTS ("slowdown", "flaky") or of _SWAPS ("nomerges", ...)
    percent: int = 0

    @classmethod
    def parse(cls, text: str) -> "Culprit":
        """A key of _SWAPS ('nomerges', 'panic', ...), or of _PERCENTS with P: 1..90
        ('slowdown:25': the throughput lost; 'flaky:30': the share of boots that fail)."""
        kind, _, arg = text.partition(":")
        if kind in _SWAPS and not arg:
            return cls(kind)
        if kind in _PERCENTS:
            if arg.isdigit() and 1 <= int(arg) <= MAX_PERCENT:
                return cls(kind, int(arg))
            raise UserError(
                f"--culprit {text}: give {_PERCENTS[kind].means} as a whole percentage, "
                f"1 to {MAX_PERCENT}, e.g. {_PERCENTS[kind].example}"
            )
        percents = " or ".join(f"{k}:P" for k in _PERCENTS)
        raise UserError(f"--culprit {text}: use {', '.join(_SWAPS)}, {percents} (e.g. slowdown:25)")

    def __str__(self) -> str:
        return f"{self.kind}:{self.percent}" if self.kind in _PERCENTS else self.kind

    @property
    def path(self) -> str:
        """The file the change is in."""
        return _SWAPS[self.kind].path if self.kind in _SWAPS else NVME_CORE

    @property
    def subject(self) -> str:
        return _SWAPS[self.kind].subject if self.kind in _SWAPS else _PERCENTS[self.kind].subject

    def add(self, text: str) -> str:
        """The file (`path`) with this culprit's change."""
        if swap := _SWAPS.get(self.kind):
            if swap.before not in text:
                raise InfraError(swap.missing)
            return text.replace(swap.before, swap.after, 1)
        head = text.find(SETUP_HEAD)
        switch = text.find(SETUP_SWITCH, head)
        if head < 0 or switch < 0:
            raise InfraError(f"{NVME_CORE} has no nvme_setup_cmd() to anchor the {self.kind}")
        change = _PERCENTS[self.kind]
        text = text[:switch] + change.call + "\n" + text[switch:]
        return text[:head] + change.function(self.percent) + text[head:]

    def remove(self, text: str) -> str:
        """The file with this culprit's change taken out again (fix mode's culprit)."""
        if swap := _SWAPS.get(self.kind):
            return text.replace(swap.after, swap.before, 1)
        change = _PERCENTS[self.kind]
        text = text.replace(change.function(self.percent), "", 1)
        return text.replace(change.call + "\n", "", 1)


SEED_CULPRIT = Culprit("nomerges")


# --fix-needs-prereq: an upstream refactor of the lines after the nomerges line, made before
# the fix, so that the fix's context holds it and a branch without it cannot take the fix.
P2PDMA_CHECK = (
    "\tif (ctrl->ops->supports_pci_p2pdma &&\n\t    ctrl->ops->supports_pci_p2pdma(ctrl))\n"
)
P2PDMA_CALL = "\tif (nvme_ctrl_pci_p2pdma(ctrl))\n"
ALLOC_NS_HEAD = "static void nvme_alloc_ns("
P2PDMA_HELPER = (
    "static bool nvme_ctrl_pci_p2pdma(struct nvme_ctrl *ctrl)\n"
    "{\n"
    "\treturn ctrl->ops->supports_pci_p2pdma &&\n"
    "\t\tctrl->ops->supports_pci_p2pdma(ctrl);\n"
    "}\n"
    "\n"
)
PREREQ_SUBJECT = "nvme: add a helper for the PCI P2PDMA check"


def add_prerequisite(text: str) -> str:
    """nvme core with the P2PDMA check moved into a helper (the same object code)."""
    head = text.find(ALLOC_NS_HEAD)
    if head < 0 or P2PDMA_CHECK not in text[head:]:
        raise InfraError(f"{NVME_CORE} has no P2PDMA check in nvme_alloc_ns() to refactor")
    text = text[:head] + text[head:].replace(P2PDMA_CHECK, P2PDMA_CALL, 1)
    return text[:head] + P2PDMA_HELPER + text[head:]
