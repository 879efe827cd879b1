"""A job's one line in Temporal's workflow list."""

from kbisect.summaries import KERNEL_LISTS, summary, where
from kbisect.workflows.sweep_types import SweepRequest


def test_a_kernel_list_is_named_as_such_not_by_its_hash_folder() -> None:
    listed = f"/root/.cache/kbisect/{KERNEL_LISTS}/5f0c2d9e81aa"
    req = SweepRequest(listed, ["a" * 40, "b" * 40], ["sched-pipe"], ["debian-6.1", "debian-6.12"])
    assert (
        summary(req) == "sweep sched-pipe over 2 kernels debian-6.1 .. debian-6.12 in a kernel list"
    )
    assert where("/srv/linux/") == "linux" and where("lab") == "lab"
    unnamed = SweepRequest("/srv/linux", ["c" * 40, "d" * 40], ["fio-read-latency"])
    assert summary(unnamed).endswith(f"over 2 kernels {'c' * 12} .. {'d' * 12} in linux")
