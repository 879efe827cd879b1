"""What the lab's culprit commit does to the kernel, as text edits of one driver file.

`nomerges` (the seed): NVMe namespace queues stop merging requests, so reads reach the
device one 8-sector chunk at a time: the counters (request size, reads) show it.
`slowdown:P`: each read completion on an NVMe queue busy-waits for P/(100-P) of the time
its request took, so read throughput drops by about P% while every counter stays the
same: only a noisy timing metric can find it.
"""

from dataclasses import dataclass

from kbisect.errors import InfraError, UserError

NVME_CORE = "drivers/nvme/host/core.c"
NONROT_LINE = "\tblk_queue_flag_set(QUEUE_FLAG_NONROT, ns->queue);\n"
NOMERGES_LINE = "\tblk_queue_flag_set(QUEUE_FLAG_NOMERGES, ns->queue);\n"
COMPLETE_HEAD = "void nvme_complete_rq(struct request *req)\n{\n"
COMPLETE_TRACE = "\ttrace_nvme_complete_rq(req);\n"
PACE_CALL = "\tnvme_pace_read_completion(req);\n"
MAX_PERCENT = 90


def _pace_function(percent: int) -> str:
    # The request's own time since allocation scales the wait, so the loss is a fraction
    # of throughput on any host; capped so a stalled request cannot stall the CPU long.
    return (
        "/*\n"
        " * Spread read completions out so that a burst of them does not monopolise the\n"
        " * CPU handling the interrupt.\n"
        " */\n"
        "static void nvme_pace_read_completion(struct request *req)\n"
        "{\n"
        "\tu64 start = req->start_time_ns;\n"
        "\tu64 wait;\n"
        "\n"
        "\tif (!start || req_op(req) != REQ_OP_READ)\n"
        "\t\treturn;\n"
        f"\twait = div_u64((ktime_get_ns() - start) * {percent}, {100 - percent});\n"
        "\tndelay(min_t(u64, wait, 2 * NSEC_PER_MSEC));\n"
        "}\n"
        "\n"
    )


@dataclass(frozen=True)
class Culprit:
    kind: str  # "nomerges" or "slowdown"
    percent: int = 0

    @classmethod
    def parse(cls, text: str) -> "Culprit":
        """'nomerges' or 'slowdown:P' (P: 1..90, the throughput lost, in percent)."""
        kind, _, arg = text.partition(":")
        if kind == "nomerges" and not arg:
            return cls("nomerges")
        if kind == "slowdown":
            if arg.isdigit() and 1 <= int(arg) <= MAX_PERCENT:
                return cls("slowdown", int(arg))
            raise UserError(
                f"--culprit {text}: give the throughput loss as a whole percentage, "
                f"1 to {MAX_PERCENT}, e.g. slowdown:25"
            )
        raise UserError(f"--culprit {text}: use nomerges or slowdown:P (e.g. slowdown:25)")

    def __str__(self) -> str:
        return f"slowdown:{self.percent}" if self.kind == "slowdown" else self.kind

    @property
    def subject(self) -> str:
        if self.kind == "slowdown":
            return "nvme: pace read completions to spread interrupt load"
        return "nvme: set nomerges on namespace queues to cut submission overhead"

    def add(self, text: str) -> str:
        """core.c with this culprit's change."""
        if self.kind == "nomerges":
            if NONROT_LINE not in text:
                raise InfraError(f"{NVME_CORE} has no QUEUE_FLAG_NONROT line to anchor the bug")
            return text.replace(NONROT_LINE, NONROT_LINE + NOMERGES_LINE, 1)
        head = text.find(COMPLETE_HEAD)
        trace = text.find(COMPLETE_TRACE, head)
        if head < 0 or trace < 0:
            raise InfraError(f"{NVME_CORE} has no nvme_complete_rq() to anchor the slowdown")
        at = trace + len(COMPLETE_TRACE)
        text = text[:at] + PACE_CALL + text[at:]
        return text[:head] + _pace_function(self.percent) + text[head:]

    def remove(self, text: str) -> str:
        """core.c with this culprit's change taken out again (fix mode's culprit)."""
        if self.kind == "nomerges":
            return text.replace(NOMERGES_LINE, "", 1)
        return text.replace(_pace_function(self.percent), "", 1).replace(PACE_CALL, "", 1)


SEED_CULPRIT = Culprit("nomerges")
