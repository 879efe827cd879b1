"""How a job's boots go out: each commit on its own, in duets (--duets), or, once the job
rolls, one pick for each VM host as it frees up; and builds ahead on a farm.

Workflow code only. `picked(n)` is told of each rolling pick (n: the picks so far),
`showing` of the commits under test.
"""

import asyncio
from collections.abc import Callable

from temporalio import workflow

from kbisect.contract import TestStatus
from kbisect.workflows.activity_calls import JobActivities
from kbisect.workflows.boot_outcomes import BootOutcomes
from kbisect.workflows.job_decisions import JobDecisions
from kbisect.workflows.job_state import JobState
from kbisect.workflows.kernels import Kernels


class BootRounds:
    def __init__(
        self,
        state: JobState,
        calls: JobActivities,
        kernels: Kernels,
        d: JobDecisions,
        outcomes: BootOutcomes,
        picked: Callable[[int], None],
        showing: Callable[[list[str]], None],
    ) -> None:
        self._state, self._calls, self._kernels, self._d = state, calls, kernels, d
        self._outcomes, self._picked, self._showing = outcomes, picked, showing
        self._duets_asked = 0  # duets started: which half the probe takes
        self._rolling = False  # picks as hosts free up (ROLLING_PATCH)

    async def boot(self, commit: str) -> str | None:
        """One boot of `commit` (built once), its samples given to the engine. The VM host
        that ran it (None: no test ran)."""
        build, test = await self._kernels.built_and_tested(commit)
        return self._outcomes.take(commit, build, test)

    async def build_ahead(self) -> None:
        """On a farm (builds and boots on different hosts) with --parallel K, each build
        host builds one commit the next rounds will likely pick while this round boots: a
        round that waits for its builds is most of a farm's lost time (benchmarks.farm).
        More would delay the builds a round needs. On one host a build would hold the
        guests back: none then."""
        if self._apart() and self._state.req.parallel >= 2:
            await self._kernels.build_ahead(self._d)

    def _apart(self) -> bool:
        """Whether the job's builds and boots have run on different hosts (a farm)."""
        vm_hosts, build_hosts = self._d.vm_hosts(), self._kernels.build_hosts()
        return bool(vm_hosts and build_hosts) and not vm_hosts & build_hosts

    # --- duets -----------------------------------------------------------------------
    def in_duets(self) -> bool:
        """--duets, where they mean something: a timing (a pass/fail boot is none, and a
        counter's one boot a commit needs no reference beside it)."""
        state = self._state
        return state.req.duets and not self._d.plan.counter and not state.job.pass_fail

    async def duets(self, commits: list[str]) -> None:
        """A round in duets, paired by the engine (its duet_pairs), each pair at one moment
        on one VM host (benchmarks.accuracy --duet simulates this driver)."""
        if self._d.gated_same:
            return
        pairs = await self._d.pairs(commits)
        # each VM host takes one duet at a time
        await asyncio.gather(*(self._duet(p) for p in pairs))

    async def _duet(self, pair: tuple[str, str]) -> None:
        """Both kernels booted at one moment, the second's boot beside the first's. A
        kernel that does not build or boot is skipped as ever; its partner's boot is
        dropped (it ran beside no guest, or one that died, so at another level)."""
        builds = [await self._kernels.build(c) for c in pair]
        arts = [b.artifact for b in builds if b.ok and b.artifact is not None]
        if len(arts) < len(pair):
            for commit, build in zip(pair, builds, strict=True):
                if not build.ok:
                    self._outcomes.take(commit, build, None)
            return
        # The halves of the host may differ (one takes the interrupts): the probe takes
        # the first half in every other duet, so that cancels instead of leaning one way.
        self._duets_asked += 1
        order = [1, 0] if self._duets_asked % 2 == 0 else [0, 1]
        kernels = [(pair[i], arts[i]) for i in order]
        by_half = await self._calls.duet(self._state.job, kernels)
        tests = [by_half[order.index(i)] for i in range(len(pair))]
        both = all(t.status == TestStatus.OK for t in tests)
        for i, (commit, build, test) in enumerate(zip(pair, builds, tests, strict=True)):
            if both or test.status != TestStatus.OK:
                self._outcomes.take(commit, build, test, beside=i > 0)

    # --- rolling picks ---------------------------------------------------------------
    async def rolls(self) -> bool:
        """Whether the rest of the search picks a boot for each VM host as it frees up: a
        noisy metric (known once both endpoints booted) at --parallel 2 or more, on a
        farm. On one host rounds stay: all of a round's builds go before its boots."""
        if self.in_duets():
            return False  # a duet's pair goes out together, round by round
        if not self._rolling and self._state.req.parallel > 1 and self._apart():
            self._rolling = (await self._d.fresh()).noisy
        return self._rolling

    async def roll(self, picks: int) -> int:
        """Keep --parallel K boots in flight; as each ends, the host that ran it is handed
        the next (the engine's next_for), so no round waits for its slowest boot or its
        last build (benchmarks.farm --rolling). A VM worker takes one guest at a time, so
        the freed host is the one polling for it; a boot that lands elsewhere is still
        judged against the references of the host it ran on. Returns the picks made."""
        running: dict[asyncio.Task[str | None], str] = {}
        try:
            return await self._rolling_picks(picks, running)
        finally:  # a job cancelled or failed stops its other boots too, as a round would
            for task in running:
                task.cancel()

    async def _rolling_picks(self, picks: int, running: dict[asyncio.Task[str | None], str]) -> int:
        d = self._d
        hosts: list[str | None] = [None] * self._state.req.parallel  # hosts not known yet
        while True:
            idle = []
            for host in hosts:  # every free slot asks; one with nothing now waits
                commit = await d.next_for(host, list(running.values()))
                if commit is None:
                    idle.append(host)
                    continue
                picks += 1
                self._picked(picks)
                task = asyncio.ensure_future(self._pick_booted(commit))
                running[task] = commit
                await self.build_ahead()
            self._showing(list(running.values()))
            if not running:
                return picks
            done, _ = await workflow.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
            ended = [t for t in running if t in done]  # in start order: deterministic
            for task in ended:
                running.pop(task)
            hosts = idle + [task.result() for task in ended]

    async def _pick_booted(self, commit: str) -> str | None:
        """A rolling pick: built, classified, booted. The VM host that ran it (None: it
        did not boot)."""
        await self._kernels.build(commit)
        await self._kernels.same_kernels(self._d, [commit])
        if commit in self._d.plan.same_as:
            return None  # its kernel is another's: that one's boots decide
        return await self.boot(commit)
