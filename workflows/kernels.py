"""A job's kernels: each commit built once, booted on request, known to be another's when
it is (it touches nothing the config compiles, or its image is byte-identical), and built
ahead of the rounds on a farm.

Workflow code only (the builds and boots are activities).
"""

import asyncio
from collections.abc import Callable

from kbisect.contract import BuildResult, TestResult
from kbisect.workflows.activity_calls import JobActivities
from kbisect.workflows.job_decisions import JobDecisions
from kbisect.workflows.job_state import JobState


class Kernels:
    def __init__(
        self,
        state: JobState,
        calls: JobActivities,
        building: Callable[[dict[str, str]], None] = lambda _: None,
    ) -> None:
        self._state, self._calls = state, calls
        self._tell_building = building  # the builds under way (commit -> subject), as they change
        self.builds: dict[str, BuildResult] = {}  # finished builds, by commit
        self._building: dict[str, asyncio.Task[BuildResult]] = {}  # builds under way
        self._ahead: dict[str, asyncio.Task[BuildResult]] = {}  # builds no round asked for
        self._images: dict[str, str] = {}  # image sha256 -> the first commit that built it
        self._classified = False

    async def build(self, commit: str) -> BuildResult:
        """Each commit is built once per job: a second caller waits for the first's build."""
        build = self.builds.get(commit)
        if build is None:
            if commit not in self._building:
                self._building[commit] = asyncio.ensure_future(
                    self._calls.build(commit, self._state.job.testcase)
                )
                self._say_building()
            try:
                build = await self._building[commit]
            finally:  # a build that failed is not under way either
                self._say_building()
        if build.subject:
            self._state.subjects.setdefault(commit, build.subject)
        self.builds[commit] = build
        return build

    def _say_building(self) -> None:
        subjects = self._state.subjects
        under_way = {c: subjects.get(c, "") for c, t in self._building.items() if not t.done()}
        self._tell_building(under_way)

    async def built_and_tested(self, commit: str) -> tuple[BuildResult, TestResult | None]:
        """The commit's build (made once) and one more boot of it."""
        build = await self.build(commit)
        if not build.ok:
            return build, None
        assert build.artifact is not None
        job = self._state.job
        return build, await self._calls.test(job, commit, build.artifact, job.repetitions)

    def build_hosts(self) -> set[str]:
        return {b.host for b in self.builds.values() if b.host}

    async def build_ahead(self, d: JobDecisions) -> None:
        """Each build host builds one commit the next rounds will likely pick while this
        round boots (a farm only: the caller checks): a round that waits for its builds is
        most of a farm's lost time (benchmarks.farm). More would delay the builds a round
        needs."""
        pending = sum(not t.done() for t in self._ahead.values())
        room = len(self.build_hosts()) - pending
        for commit in await d.ahead(room) if room > 0 else []:
            d.built_ahead(commit)
            self._ahead[commit] = asyncio.ensure_future(self.build(commit))

    def stop_ahead(self) -> None:
        """The search is over: builds made ahead for rounds that will not come stop (a
        build host's slot is worth more to the next job)."""
        for commit, task in self._ahead.items():
            if not task.done():
                task.cancel()
                self._building.pop(commit, None)
        self._say_building()

    async def same_kernels(self, d: JobDecisions, commits: list[str]) -> None:
        """Kernels known to be another's take its verdict: commits that change no file the
        config compiles (once both endpoints are built), and byte-identical images."""
        told = len(d.record.events)
        ends = [self.builds.get(c) for c in (d.old_end, d.new_end)]
        arts = [b.artifact for b in ends if b is not None and b.artifact is not None]
        if not self._classified and len(arts) == 2:
            self._classified = True
            if arts[0].image_sha256 and arts[0].image_sha256 == arts[1].image_sha256:
                d.identical()
                await d.fresh()
                return
            if all(a.sources for a in arts):
                in_range = list(self._state.search.graph.order)
                found = await self._calls.classify(in_range, [a.sources for a in arts])
                for commit, parent in found.inert.items():
                    d.twin(commit, parent, "touches no file the config compiles")
        for c in commits:
            art = self.builds[c].artifact
            if art is not None and art.image_sha256:
                first = self._images.setdefault(art.image_sha256, c)
                if first != c:
                    d.twin(c, first, "its image is byte-identical")
        if len(d.record.events) > told:
            await d.fresh()
