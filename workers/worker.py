"""Run workers: workflows on the control queue, builds and VM runs on their own queues.

A host running builds or VMs prunes its own cache (`kbisect gc`, the default age) at start
and every GC_EVERY_HOURS: every host has its own cache, and nobody has to remember to.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from kbisect.builders import cache_gc as gc
from kbisect.builders.kernel_build import KernelBuilder
from kbisect.builders.kernel_list import KernelListBuilder
from kbisect.contract import GC_DAYS
from kbisect.infra import host_lock
from kbisect.infra.machines import make_machine
from kbisect.settings import Queues, Settings
from kbisect.workers.activities import BuildActivities, VmActivities, defined
from kbisect.workers.decisions import DECIDE_THREADS, decide
from kbisect.workers.series_activities import SeriesActivities
from kbisect.workflows.backport_workflow import BackportWorkflow
from kbisect.workflows.bisect_workflow import BisectWorkflow, sandbox_runner
from kbisect.workflows.explain_workflow import ExplainWorkflow
from kbisect.workflows.investigation_workflow import InvestigationWorkflow
from kbisect.workflows.series_workflow import SeriesTickWorkflow
from kbisect.workflows.sweep_workflow import SweepWorkflow

# On shutdown, running builds and boots get this long; then Temporal retries them elsewhere.
SHUTDOWN_GRACE = timedelta(seconds=5)
GC_EVERY_HOURS = 6.0  # well under GC_DAYS: a day's runs never pile up for long
log = logging.getLogger(__name__)


def make_workers(
    client: Client,
    queues: Queues,
    builds: int,
    vms: int,
    workflows: bool = True,
    settings: Settings | None = None,
    measure_cpus: tuple[int, ...] = (),
    machine: str | None = None,
) -> list[Worker]:
    """Workers for this host; builds/vms say how many run here at once (0: none);
    machine: how guests run, qemu or libvirt (None: settings.machine).

    measure_cpus: CPUs reserved for guests (builds keep to the others); () = guests and
    builds share every CPU and take turns through the host lock (infra.host_lock)."""
    settings = settings or Settings.from_env()
    build_cpus = host_lock.others(measure_cpus) if measure_cpus else ()
    workers = []
    if workflows:
        workers.append(
            Worker(
                client,
                task_queue=queues.control,
                workflows=[
                    BisectWorkflow,
                    SweepWorkflow,
                    SeriesTickWorkflow,
                    ExplainWorkflow,
                    BackportWorkflow,
                    InvestigationWorkflow,
                ],
                workflow_runner=sandbox_runner(),
                activities=[decide],  # local: each job's decisions, into its history
                activity_executor=ThreadPoolExecutor(DECIDE_THREADS),
                # the queue may be the build or VM workers' too: their tasks are theirs
                no_remote_activities=True,
            )
        )
    if builds > 0:
        jobs = len(build_cpus) + 1 if build_cpus else settings.jobs
        # Kernel lists (bisect --kernels) fetch prebuilt kernels; other repositories build.
        builder = KernelListBuilder(KernelBuilder(jobs, pin=build_cpus), settings)
        b = BuildActivities(settings, builder, builds)
        series = SeriesActivities(settings)
        # +1: validation and verify commits (git only) never wait behind builds; builds
        # themselves are limited to `builds` inside the activity.
        workers.append(
            Worker(
                client,
                task_queue=queues.build,
                activities=defined(b, series),
                activity_executor=ThreadPoolExecutor(builds + 1),
                graceful_shutdown_timeout=SHUTDOWN_GRACE,
                max_concurrent_activities=builds + 1,
            )
        )
    if vms > 0:
        v = VmActivities(
            settings, make_machine(machine or settings.machine, settings, measure_cpus)
        )
        workers.append(
            Worker(
                client,
                task_queue=queues.vm,
                activities=defined(v),
                activity_executor=ThreadPoolExecutor(vms),
                graceful_shutdown_timeout=SHUTDOWN_GRACE,
                max_concurrent_activities=vms,
            )
        )
    return workers


async def run_workers(workers: list[Worker], settings: Settings) -> None:
    """Run the workers until they stop; those with builds or VMs (activities: they use
    the cache) prune it meanwhile."""
    pruning = None
    if any(w.config().get("activities") for w in workers):
        pruning = asyncio.create_task(gc_loop(settings))
    try:
        await asyncio.gather(*(w.run() for w in workers))
    finally:
        if pruning is not None:
            pruning.cancel()


async def gc_loop(
    settings: Settings, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> None:
    """`kbisect gc` on this host's cache now and every GC_EVERY_HOURS, in a thread (the
    workers' event loop goes on). What a running job uses stays: each build, boot and
    config read marks what it uses, and gc removes only what is unused for
    GC_DAYS."""
    while True:
        await asyncio.to_thread(gc_once, settings)
        await sleep(GC_EVERY_HOURS * 3600)


def gc_once(settings: Settings) -> None:
    """One pass; a failure is logged, never stops the worker (the next pass tries again)."""
    try:
        report = gc.collect(settings, GC_DAYS, dry_run=False)
    except Exception as exc:  # a host problem in a pass must not end the worker
        log.warning("gc of %s failed (next try in %g h): %s", settings.cache, GC_EVERY_HOURS, exc)
        return
    if report.removed_count():
        log.info(
            "gc of %s: removed %d item(s) unused for %g days, %.1f MiB",
            settings.cache,
            report.removed_count(),
            GC_DAYS,
            report.bytes_freed / 2**20,
        )
