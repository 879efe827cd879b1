"""Every activity runs on the queue the contract names for it, and the client's worker
check knows each one (a long trace must never read as "no worker")."""

import inspect
from pathlib import Path

from temporalio import activity

from kbisect import contract
from kbisect.contract import ACTIVITY_QUEUE, QueueKind
from kbisect.infra.qemu import QemuMachine
from kbisect.jobs import client
from kbisect.settings import Queues, Settings
from kbisect.workers.activities import BuildActivities, VmActivities, defined
from kbisect.workers.series_activities import SeriesActivities


def _registered(cls: type) -> set[str]:
    names = set()
    for _, fn in inspect.getmembers(cls, inspect.isfunction):
        defn = activity._Definition.from_callable(fn)
        if defn is not None and defn.name:
            names.add(defn.name)
    return names


def _build_side() -> set[str]:
    """What a build worker registers (workers/worker.py): git, builds, series watches."""
    return _registered(BuildActivities) | _registered(SeriesActivities)


def test_every_activity_has_a_queue_kind() -> None:
    # Whatever a worker registers has a queue in the contract, and nothing else does.
    assert set(ACTIVITY_QUEUE) == _build_side() | _registered(VmActivities)


def test_workers_serve_each_activity_on_its_queue() -> None:
    assert _build_side() == {n for n, k in ACTIVITY_QUEUE.items() if k == QueueKind.BUILD}
    assert _registered(VmActivities) == {n for n, k in ACTIVITY_QUEUE.items() if k == QueueKind.VM}


def test_a_running_trace_counts_as_a_busy_vm_worker() -> None:
    assert client.queue_kind(contract.TRACE) == QueueKind.VM
    assert client.queue_kind(contract.CLASSIFY) == QueueKind.BUILD
    assert Queues().name(QueueKind.VM) == Queues().vm


def test_a_worker_serves_every_activity_its_objects_define(tmp_path: Path) -> None:
    # worker.py registers activities.defined(...): a new activity needs no second list.
    settings = Settings(cache=tmp_path / "cache", data=tmp_path / "data")
    served = defined(VmActivities(settings, QemuMachine()), SeriesActivities(settings))
    names = {activity._Definition.must_from_callable(fn).name for fn in served}
    assert names == _registered(VmActivities) | _registered(SeriesActivities)
    assert contract.DUET in names
