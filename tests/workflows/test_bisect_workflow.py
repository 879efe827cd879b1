"""BisectWorkflow on a real local Temporal dev server, with fake activities."""

import asyncio
import contextlib
import dataclasses
import json
import math
import statistics
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from benchmarks.dags import hex_names, linear, random_dag
from kbisect.contract import (
    BUILD,
    DECIDE,
    DEFAULT_MAX_BOOTS,
    FLAKY_BOOTS_FACTOR,
    MAX_COMMIT_BOOTS,
    PREPARE_VERIFY,
    TEST,
    VALIDATE,
    Fixup,
    ValidatedJob,
    commit_boots_cap,
)
from kbisect.decide.decider import Decider
from kbisect.decide.engine import Engine
from kbisect.decide.engine_report import config_of
from kbisect.decide.plan import Plan
from kbisect.decide.record import Record, Setup
from kbisect.reports import job_report
from kbisect.workflows import activity_calls
from kbisect.workflows.bisect_types import BisectRequest, BisectResult, MarkRequest, Progress
from kbisect.workflows.bisect_workflow import (
    SA_STATUS,
    BisectWorkflow,
    sandbox_runner,
)
from tests.workflows import fakes
from tests.workflows.fakes import Scenario
from tests.workflows.recording import keep

pytestmark = pytest.mark.asyncio(loop_scope="module")


@contextlib.asynccontextmanager
async def running(client: Client, scenario: Scenario, **kw: object) -> AsyncIterator["Job"]:
    """A job over the scenario, with a worker of the real workflow and fake activities."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    req = fakes.request(scenario, queue, **kw)
    key = req.repo
    async with fakes.fake_worker(client, queue, BisectWorkflow):
        yield await client.start_workflow(BisectWorkflow.run, req, id=f"wf-{key}", task_queue=queue)


async def bisect(
    client: Client, scenario: Scenario, record: str = "", **kw: object
) -> tuple[BisectResult, Scenario]:
    async with running(client, scenario, **kw) as handle:
        result = await handle.result()
        await keep(handle, record)
    return result, scenario


Job = WorkflowHandle[BisectWorkflow, BisectResult]


async def _until_status(handle: Job, status: str) -> Progress:
    while True:
        progress = await handle.query("progress", result_type=Progress)
        if progress.status == status:
            return progress
        await asyncio.sleep(0.05)


def _builds_beyond_endpoints(s: Scenario) -> int:
    return fakes.bisection_builds(s) - 2


async def test_a_fixup_builds_a_broken_span_and_the_culprit_in_it_is_named(
    env: WorkflowEnvironment,
) -> None:
    """--fixup: the commits of a span that does not build (the culprit among them) build
    with the fix, so the culprit is named, not left among skipped candidates; each step
    says what it was built with, and the report lists it."""
    span = {"c7", "c8", "c9"}
    scenario = Scenario(graph=linear(16), culprit="c8", broken_build=span, built_by_fixup=span)
    fixup = Fixup("build-fix.diff", "/cache/patches/x.patch")
    result, _ = await bisect(env.client, scenario, fixups=[fixup])
    assert (result.status, result.culprit) == ("found", "c8"), (result.message, result.candidates)
    built = {st.commit: st.fixups for st in result.steps if st.source != "endpoint"}
    assert built and all(f == (["build-fix.diff"] if c in span else []) for c, f in built.items())
    assert "c8" in built and "; built with build-fix.diff |" in job_report.markdown(result, "job")
    # without it, the span is skipped and the culprit is one of its candidates
    plain = Scenario(graph=linear(16), culprit="c8", broken_build=span, built_by_fixup=span)
    result, _ = await bisect(env.client, plain)
    assert result.status != "found" and "c8" in result.candidates, result.message


async def test_finds_every_kind_of_culprit_in_log2_builds(env: WorkflowEnvironment) -> None:
    for k in (1, 20, 37, 63, 64):
        result, s = await bisect(
            env.client,
            Scenario(graph=linear(64), culprit=f"c{k}"),
            record="linear-64" if k == 37 else "",
        )
        assert result.status == "found" and result.culprit == f"c{k}", (
            result.message,
            result.candidates,
            [(s.commit, s.verdict, s.source, s.value) for s in result.steps],
        )
        assert _builds_beyond_endpoints(s) <= math.ceil(math.log2(64)) + 2
        assert max(s.builds.values()) == 1  # no commit built twice
        assert result.steps[0].source == "endpoint" and result.steps[0].verdict == "good"
        v = result.verification
        assert v is not None and (v.kind, v.status, v.onto) == ("revert", "confirmed", "c64")
        assert v.position is not None and v.position < 0.5 and "like the old" in v.message
        assert s.builds[f"{fakes.VERIFY_PREFIX}c{k}:c64"] == 1
        # the effect in numbers too: 512 -> 8 (a counter: no noise, a point interval)
        c = result.change
        assert c is not None and (c.old, c.new) == (fakes.FAST, fakes.SLOW), c
        assert c.value == pytest.approx(fakes.SLOW / fakes.FAST - 1) == c.low == c.high
        assert c.boots_old >= 1 and c.boots_new >= 1


async def test_a_kernel_that_panics_is_bad_in_a_pass_fail_job(env: WorkflowEnvironment) -> None:
    for mode, k in (("regression", 23), ("fix", 41)):
        result, s = await bisect(
            env.client,
            Scenario(graph=linear(64), culprit=f"c{k}", pass_fail=True, mode=mode),
            record="pass-fail-panic" if mode == "regression" else "",
        )
        assert result.status == "found" and result.culprit == f"c{k}", result.message
        assert result.pass_fail
        # as `git bisect run` does: one boot a tested commit, log2 builds
        assert max(s.tests.values()) == 1, s.tests
        assert _builds_beyond_endpoints(s) <= math.ceil(math.log2(64)) + 2
        v = result.verification
        assert v is not None and v.status == "confirmed", v
        bad = result.bad_boot
        panicked = f"c{k}" if mode == "regression" else "root"
        assert bad is not None and (bad.commit, bad.bad) == (panicked, "panic")
        assert bad.excerpt == f"Kernel panic - not syncing: lab ({panicked})"
        tested = [st for st in result.steps if st.source == "test"]
        assert tested and all(st.boots == 1 for st in tested)
        c = result.change  # the share of boots that failed: none, then all (or back)
        assert c is not None and c.value == (1.0 if mode == "regression" else -1.0), c
        assert c is not None and (c.old, c.new) == (
            (0.0, 1.0) if mode == "regression" else (1.0, 0.0)
        ), c
    # A revert that still fails contradicts; the failure may come and goes: --flaky.
    result, _ = await bisect(
        env.client,
        Scenario(graph=linear(16), culprit="c5", pass_fail=True, revert_restores=False),
    )
    v = result.verification
    assert v is not None and v.status == "contradicted" and "with --flaky" in v.message, v


async def test_a_culprit_named_through_its_twin_shows_the_twins_panic(
    env: WorkflowEnvironment,
) -> None:
    # c24's image is byte-identical to c23's and is built first: c23 is never booted.
    result, s = await bisect(
        env.client,
        Scenario(graph=linear(64), culprit="c23", pass_fail=True, same_image={"c24"}),
    )
    assert (result.status, result.culprit) == ("found", "c23"), result.message
    assert s.tests["c23"] == 0 and s.tests["c24"] == 1, s.tests
    bad = result.bad_boot
    assert bad is not None and (bad.commit, bad.bad) == ("c24", "panic"), bad


async def test_a_failure_that_comes_and_goes_is_found_with_its_probability(
    env: WorkflowEnvironment,
) -> None:
    result, s = await bisect(
        env.client,
        Scenario(graph=linear(32), culprit="c13", pass_fail=True, fail_rates=(0.0, 0.4)),
        record="pass-fail-flaky",
    )
    assert (result.status, result.culprit) == ("found", "c13"), result.message
    assert result.confidence is not None and result.confidence >= 0.99
    c = result.change  # failure rates 0 and 0.4: the change with its interval
    assert c is not None and c.low is not None and c.high is not None, c
    assert c.low < c.value < c.high and c.low < 0.4 < c.high and c.old == 0.0, c
    assert "the new endpoint failed" in result.message
    # a commit that passes once is not good yet: some were booted again and again
    assert max(n for c, n in s.tests.items() if c not in ("root", "c32")) > 3
    assert _builds_beyond_endpoints(s) <= math.ceil(math.log2(32)) + 4
    v = result.verification
    assert v is not None and v.status == "confirmed" and v.boots > 1, v
    assert result.bad_boot is not None and result.bad_boot.commit == "c13"


async def test_parallel_rounds_cut_the_range_in_parts(env: WorkflowEnvironment) -> None:
    for k in (1, 17, 40, 64):
        scenario = Scenario(graph=linear(64), culprit=f"c{k}")
        result, s = await bisect(
            env.client, scenario, record="parallel" if k == 40 else "", parallel=3
        )
        assert result.culprit == f"c{k}"
        rounds = max(st.round for st in result.steps)
        # Three commits a round cut 64 candidates by about 4 each round: 3 rounds, not 6.
        assert rounds <= 4, [(st.commit, st.round) for st in result.steps]
        assert max(s.builds.values()) == 1
        per_round = Counter(st.round for st in result.steps if st.source == "test")
        assert max(per_round.values()) == 3


async def test_a_noisy_round_goes_out_at_once_to_every_vm_worker_with_room(
    env: WorkflowEnvironment,
) -> None:
    # --parallel 4: each round's 4 boots (3 probes and a reference) run together, one on
    # each VM host with room; the host lock of each host still times one at a time.
    scenario = Scenario(graph=linear(32), culprit="c19", noise=0.05, test_delay=0.2)
    result, s = await bisect(env.client, scenario, parallel=4)
    assert result.culprit == "c19", result.message
    assert s.most_in_flight == 4
    again = dataclasses.replace(scenario, tests=Counter(), most_in_flight=0)
    alone, s1 = await bisect(env.client, again, parallel=1)
    assert alone.culprit == "c19" and s1.most_in_flight <= 2  # a probe and a reference


async def test_on_a_farm_the_build_hosts_build_ahead_while_a_round_boots(
    env: WorkflowEnvironment,
) -> None:
    # Builds on one host and boots on another: while a round boots, the build host builds
    # where the next picks will likely fall. On one host no build runs beside a boot.
    for farm in (True, False):
        scenario = Scenario(
            graph=linear(64),
            culprit="c41",
            noise=0.05,
            test_delay=0.1,
            build_delay=0.02,
            farm=farm,
        )
        result, s = await bisect(env.client, scenario, record="farm" * farm, parallel=4)
        assert result.culprit == "c41", result.message
        assert max(s.builds.values()) == 1  # a commit picked while its build runs waits
        assert (s.built_while_booting > 0) == farm, s.built_while_booting


async def test_on_a_farm_each_vm_host_is_handed_a_boot_as_it_frees_up(
    env: WorkflowEnvironment,
) -> None:
    # Three VM hosts, the first four times as quick as the last: once the endpoints' first
    # boots are in, each host is handed its next boot as it frees up, so boots start while
    # others picked earlier still run (a round waits for its slowest boot: never).
    scenario = Scenario(
        graph=linear(32),
        culprit="c19",
        noise=0.05,
        test_delay=0.3,  # well above a dispatch's latency, so a quick host frees up first
        farm=True,
        vm_speeds=(1.0, 2.0, 4.0),
    )
    result, s = await bisect(env.client, scenario, parallel=3)
    assert result.culprit == "c19", result.message
    boots = sum(len(commits) for commits in s.vm_boots.values())
    assert s.overtaking >= boots // 3, (s.overtaking, s.vm_boots)  # rounds: 0 of 27
    assert s.most_in_flight == 3  # one a host


async def test_parallel_rounds_on_merges(env: WorkflowEnvironment) -> None:
    graph = random_dag(60, merges=4, seed=11)
    for culprit in graph.order[7::19]:
        result, _ = await bisect(env.client, Scenario(graph=graph, culprit=culprit), parallel=2)
        assert result.culprit == culprit
        assert max(st.round for st in result.steps) <= math.ceil(math.log(60, 3)) + 2


async def test_a_revert_that_does_not_restore_contradicts(env: WorkflowEnvironment) -> None:
    result, _ = await bisect(
        env.client, Scenario(graph=linear(16), culprit="c5", revert_restores=False)
    )
    assert result.status == "found" and result.culprit == "c5"
    assert result.verification is not None and result.verification.status == "contradicted"
    assert "contradicted" in result.message and "like the new endpoint" in result.message


async def test_a_revert_that_conflicts_is_inconclusive(env: WorkflowEnvironment) -> None:
    result, s = await bisect(
        env.client, Scenario(graph=linear(16), culprit="c5", verify_conflicts=True)
    )
    assert result.culprit == "c5" and result.verification is not None
    assert result.verification.status == "inconclusive"
    assert "conflicts" in result.verification.message
    assert sum(s.builds.values()) == fakes.bisection_builds(s)  # nothing built for it


async def test_verify_can_be_turned_off(env: WorkflowEnvironment) -> None:
    result, s = await bisect(env.client, Scenario(graph=linear(16), culprit="c5"), verify=False)
    assert result.culprit == "c5" and result.verification is None
    assert sum(s.builds.values()) == fakes.bisection_builds(s)


async def test_trace_boots_the_endpoints_and_the_named_commit_once_each(
    env: WorkflowEnvironment,
) -> None:
    from kbisect.reports.job_report import markdown

    scenario = Scenario(graph=linear(16), culprit="c5", broken_trace={"c16"})
    result, s = await bisect(env.client, scenario, record="trace", trace=True)
    assert result.culprit == "c5" and s.traces == ["root", "c16", "c5"]
    assert "error" in result.diagnostics["c16"]
    assert result.diagnostics["c5"]["folder"] == "/runs/c5"
    text = markdown(result, "job")
    assert "old -> new endpoint: no comparison (the traced run left no readable trace)" in text
    assert "old endpoint -> the named commit, origin: Q2C +8 ms (1 -> 9 ms)" in text
    assert "requests 512 -> 8 sectors" in text
    plain, _ = await bisect(env.client, Scenario(graph=linear(16), culprit="c5"))
    assert plain.diagnostics == {}


async def test_commits_that_compile_nothing_new_are_never_built(env: WorkflowEnvironment) -> None:
    inert = {f"c{k}" for k in (*range(28, 37), *range(38, 48))}
    scenario = Scenario(graph=linear(64), culprit="c37", inert=inert)
    result, s = await bisect(env.client, scenario, record="same-kernel")
    assert result.culprit == "c37"
    assert not inert & set(s.builds), sorted(inert & set(s.builds))
    same = [st for st in result.steps if st.note.startswith("touches no file the config")]
    assert same and {st.commit for st in same} <= inert
    assert all(st.source == "same-kernel" for st in same), [st.source for st in same]
    # Each inert commit judged took its parent's verdict: good under the culprit, else bad.
    for st in same:
        assert st.verdict == ("good" if int(st.commit[1:]) < 37 else "bad"), st


async def test_fix_mode_names_the_fixing_commit(env: WorkflowEnvironment) -> None:
    result, s = await bisect(
        env.client, Scenario(graph=linear(64), culprit="c23", mode="fix"), record="fix-64"
    )
    assert result.status == "found" and result.culprit == "c23"
    assert "fixed commit" in result.message
    # Verified as the backport an SRU would ship: the fix applied to the old endpoint.
    v = result.verification
    assert v is not None and (v.kind, v.status, v.onto) == ("backport", "confirmed", "root")
    # In fix mode the old endpoint is the bad one.
    assert result.steps[0].verdict == "bad" and result.steps[1].verdict == "good"
    assert _builds_beyond_endpoints(s) <= 8


async def test_history_with_merges(env: WorkflowEnvironment) -> None:
    graph = random_dag(60, merges=4, seed=11)
    for culprit in graph.order[5::17]:
        result, s = await bisect(
            env.client,
            Scenario(graph=graph, culprit=culprit),
            record="merges" if culprit == graph.order[5] else "",
        )
        assert result.culprit == culprit
        assert _builds_beyond_endpoints(s) <= math.ceil(math.log2(len(graph.order))) + 2


async def test_a_release_sized_range_fits_the_payload_limit(env: WorkflowEnvironment) -> None:
    # ~15k commits with 40-character hashes, as between two mainline releases. The server
    # refuses payloads over 2 MB, so this fails if the range's form grows.
    graph = hex_names(random_dag(15000, merges=300, seed=3))
    culprit = graph.order[4000]
    result, s = await bisect(env.client, Scenario(graph=graph, culprit=culprit, large=True))
    assert result.culprit == culprit
    assert _builds_beyond_endpoints(s) <= math.ceil(math.log2(len(graph.order))) + 2
    # No subjects in the range: the tested commits' come from their builds.
    assert result.subjects[culprit] == f"built {culprit}"
    assert all(st.subject == f"built {st.commit}" for st in result.steps if st.commit != "root")


async def test_broken_build_next_to_the_culprit(env: WorkflowEnvironment) -> None:
    result, _ = await bisect(
        env.client,
        Scenario(graph=linear(64), culprit="c30", broken_build={"c29"}),
        record="skips",
    )
    assert result.status in ("found", "ambiguous")
    assert "c30" in result.candidates and len(result.candidates) <= 2
    assert any(s.source == "build-failed" and s.verdict == "skip" for s in result.steps)


async def test_boot_failure_is_skipped_not_judged(env: WorkflowEnvironment) -> None:
    # c8 is the first pick of 16 and panics: it must be skipped, never called good or bad.
    result, s = await bisect(
        env.client, Scenario(graph=linear(16), culprit="c9", broken_boot={"c8", "c12"})
    )
    skipped = {st.commit: st.source for st in result.steps if st.verdict == "skip"}
    assert skipped.get("c8") == "boot-failed" and set(skipped) <= {"c8", "c12"}
    assert all(st.commit not in ("c8", "c12") for st in result.steps if st.verdict != "skip")
    # c8 (good, but unknown) and c9 (the culprit) stay together: it cannot tell them apart.
    assert result.status == "ambiguous" and set(result.candidates) == {"c8", "c9"}
    assert s.tests["c8"] == 1  # a boot failure is not retested like an unsure score


async def test_noisy_scores_still_name_the_culprit(env: WorkflowEnvironment) -> None:
    for k in (3, 11, 26):
        scenario = Scenario(graph=linear(32), culprit=f"c{k}", noise=0.05)
        result, _ = await bisect(env.client, scenario)
        assert result.culprit == f"c{k}", [(st.commit, st.value) for st in result.steps]
        endpoint = result.steps[0]
        assert endpoint.value != fakes.FAST  # the noise really reached the verdicts


async def test_a_higher_max_boots_raises_a_commit_s_cap() -> None:
    # A hunt for a small step raises --max-boots: a commit's cap follows it.
    job = ValidatedJob(["a"], "b", "t", "score", "MB/s", "higher", "fast", 1, 60.0)
    req = BisectRequest(repo="r", good=["a"], bad="b", testcase="t", max_boots=192)
    default = dataclasses.replace(req, max_boots=DEFAULT_MAX_BOOTS)
    assert config_of(default, job).max_commit_boots == MAX_COMMIT_BOOTS
    assert config_of(req, job).max_commit_boots == 240
    flaky = dataclasses.replace(job, pass_fail=True, flaky=True)
    caps = config_of(req, flaky)
    factor = FLAKY_BOOTS_FACTOR
    assert (caps.max_endpoint_boots, caps.max_commit_boots) == (192 * factor, 240 * factor)
    assert commit_boots_cap(48) == MAX_COMMIT_BOOTS  # a lower N leaves a commit's cap


async def test_a_small_step_under_noise_is_found(env: WorkflowEnvironment) -> None:
    # 15% slower at a noise of 8% a sample: each commit takes several boots, so the
    # engine's choices (references, repeats, builds) are all in the recorded history.
    scenario = Scenario(graph=linear(16), culprit="c6", noise=0.08, slow=fakes.FAST * 0.85)
    result, s = await bisect(env.client, scenario, record="small-step")
    assert result.culprit == "c6", [(st.commit, st.value) for st in result.steps]
    assert sum(s.tests.values()) > 2 * len(s.builds)  # boots, not one a commit


async def test_each_boot_says_when_it_ran_and_where(env: WorkflowEnvironment) -> None:
    # The report keeps each boot's place in the job, its VM host and its repetitions beside
    # its score, the endpoints' re-measurements included, so a real job can be replayed
    # offline as the engine saw it.
    scenario = Scenario(graph=linear(16), culprit="c6", noise=0.05, slow=fakes.FAST * 0.8)
    result, s = await bisect(env.client, scenario)
    tested = [st for st in result.steps if st.scores]
    for st in tested:
        assert len(st.boot_numbers) == len(st.hosts) == len(st.scores) == st.boots, st
        assert len(st.repetitions) == st.boots, st
        for score, repetitions in zip(st.scores, st.repetitions, strict=True):
            assert len(repetitions) > 1 and statistics.median(repetitions) == score
    numbers = sorted(n for st in tested for n in st.boot_numbers)
    assert numbers == list(range(1, len(numbers) + 1))
    v = result.verification
    assert v is not None and len(numbers) == sum(s.tests.values()) - v.boots
    ends = [n for st in tested if st.source == "endpoint" for n in st.boot_numbers]
    probes = [n for st in tested if st.source != "endpoint" for n in st.boot_numbers]
    assert min(probes) < max(ends)  # references came after the first probe


async def test_a_host_that_speeds_up_for_good_keeps_the_answer(env: WorkflowEnvironment) -> None:
    # The lab-103 run: the host about 20% faster from its 8th boot on.
    scenario = Scenario(graph=linear(32), culprit="c21", noise=0.05, shift_after=8, shift=1.2)
    result, _ = await bisect(env.client, scenario, record="host-shift")
    assert result.culprit == "c21"
    assert result.confidence is not None and result.confidence >= 0.995
    assert any("references" in n for n in result.notes), result.notes
    assert result.verification is not None and result.verification.status == "confirmed"


async def test_a_host_whose_speed_swings_is_seen_to_swing(env: WorkflowEnvironment) -> None:
    # The lab-103 run of revision 6: the host's speed swings 12% for a few boots at a
    # time (an AR(1), 0.9 a boot), so a commit's boots close together count partly as one.
    speeds = tuple(fakes.swinging_speeds(7, 0.9, 0.12, 500))
    scenario = Scenario(
        graph=linear(32), culprit="c21", noise=0.03, slow=fakes.FAST * 0.85, speeds=speeds
    )
    result, s = await bisect(env.client, scenario, record="host-swing")
    assert result.culprit == "c21", [(st.commit, st.value) for st in result.steps]
    assert any("swings" in n for n in result.notes), result.notes
    # the revert's boots each beside a boot of the new endpoint, which shows the swing
    v = result.verification
    assert v is not None and v.status == "confirmed", v
    assert "beside" in v.message, v.message
    in_job = next(st.boots for st in result.steps if st.commit == "c32")
    assert s.tests["c32"] == in_job + v.boots, (s.tests["c32"], in_job, v.boots)


async def test_a_host_whose_boots_keep_reading_wild_holds_the_job_until_resumed(
    env: WorkflowEnvironment,
) -> None:
    # Every fourth of the job's first 60 boots runs ten times slower (another load on the
    # host): those boots are set aside, shown in their steps, and once five of them are a
    # tenth of the job's boots the job waits for a person, then goes on.
    speeds = tuple(0.1 if n < 60 and n % 4 == 3 else 1.0 for n in range(1000))
    scenario = Scenario(
        graph=linear(32), culprit="c21", noise=0.05, slow=fakes.FAST * 0.9, speeds=speeds
    )
    async with running(env.client, scenario) as handle:
        blocked = await _until_status(handle, "blocked")
        assert "unfit for timing" in blocked.message, blocked.message
        assert f"kbisect resume {handle.id}" in blocked.message
        ended = asyncio.ensure_future(handle.result())
        holds = 0
        while not ended.done():  # a person resumes it each time (5 more wild: again)
            progress = await handle.query("progress", result_type=Progress)
            if progress.status == "blocked":
                holds += 1
                await handle.execute_update("resume", result_type=str)
            await asyncio.sleep(0.1)
        result: BisectResult = ended.result()
    assert holds >= 1
    assert result.culprit == "c21", [(st.commit, st.value) for st in result.steps]
    # each boot set aside is a slow one: far off its step's others (by value: under load
    # a boot's number and the scenario's moment it ran at can differ by one)
    aside = [
        (score, statistics.median(st.scores))
        for st in result.steps
        for n, score in zip(st.boot_numbers, st.scores, strict=True)
        if n in st.set_aside
    ]
    assert len(aside) >= 5, aside
    assert all(max(v, m) >= 3 * min(v, m) for v, m in aside), aside
    assert any("set aside" in st.note for st in result.steps)
    assert any("set aside" in n for n in result.notes), result.notes


def _drifting_host() -> Scenario:
    """A 10% step at c21 of 32, a noise of 10% a sample, the host 0.2% faster each boot."""
    speeds = tuple(1 + 0.002 * n for n in range(1000))
    return Scenario(
        graph=linear(32), culprit="c21", noise=0.10, slow=fakes.FAST * 0.9, speeds=speeds
    )


async def test_a_host_that_drifts_is_named_against_the_references_near_each_boot(
    env: WorkflowEnvironment,
) -> None:
    # The host 0.2% faster each boot, a 10% step at a noise of 10% a sample: early on the
    # references cannot tell the drift from a still level, and revision 9 weighs both.
    result, _ = await bisect(env.client, _drifting_host(), record="host-drift")
    assert result.culprit == "c21", [(st.commit, st.value) for st in result.steps]


async def test_in_duets_each_probe_boots_beside_a_reference_at_one_moment(
    env: WorkflowEnvironment,
) -> None:
    # --duets on the drifting host: both guests of a duet see the host's speed of that
    # moment (the fake's `speeds`), so each probe is judged beside a reference.
    result, s = await bisect(env.client, _drifting_host(), record="duets", duets=True)
    assert result.culprit == "c21", [(st.commit, st.value) for st in result.steps]
    ends = {"root", "c32"}
    assert s.duets and all(len(d) == 2 and set(d) & ends for d in s.duets), s.duets
    probes = [d for d in s.duets if not set(d) <= ends]
    assert len({c for d in probes for c in d} - ends) >= 4  # each beside a reference
    # the probe takes the first half of the host's CPUs in every other duet, as the
    # reference does: a difference between the halves cancels
    firsts = [d[0] not in ends for d in probes]
    assert abs(sum(firsts) - len(probes) / 2) <= 1, s.duets
    # every boot of the search was in a duet: only the verification's boots ran alone
    alone = sum(s.tests.values()) - 2 * len(s.duets)
    verify = sum(n for c, n in s.tests.items() if c.startswith(fakes.VERIFY_PREFIX))
    assert 0 < verify <= alone <= 2 * verify
    # the references' own duets pair the old endpoint with the new (a balanced block)
    assert all(d[0] != d[1] for d in s.duets if set(d) <= ends)
    search = 2 * len(s.duets)
    said = f"{search} boots at {len(s.duets)} moments: {len(s.duets)} duets"
    assert any(said in note for note in result.notes), result.notes
    assert any(f"interleaved with {len(probes)} of other commits" in n for n in result.notes)


async def test_a_counter_in_duets_still_boots_each_commit_once(env: WorkflowEnvironment) -> None:
    # The seed's exact metric: once the endpoints' first boots (a duet) show a counter,
    # a commit needs no reference beside it.
    result, s = await bisect(env.client, Scenario(graph=linear(16), culprit="c5"), duets=True)
    assert result.culprit == "c5"
    assert s.duets == [("root", "c16")]
    assert all(n == 1 for c, n in s.tests.items() if c not in {"root", "c16"}), s.tests


async def test_a_difference_of_nothing_is_undone_by_re_measuring(env: WorkflowEnvironment) -> None:
    # No commit changes anything, but the new endpoint's first boots read 6% low: about
    # three sigmas each, so the first boots say the endpoints differ.
    unlucky = {"c32": [fakes.FAST * 0.94] * 3}
    scenario = Scenario(graph=linear(32), culprit="c9", same_endpoints=True, noise=0.03)
    scenario.noisy = unlucky
    result, _ = await bisect(env.client, scenario)
    assert result.status == "no-difference" and result.culprit is None
    assert "P(no culprit)" in result.message, result.message


async def test_a_flaky_host_is_retried_not_blocked(
    env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(activity_calls, "BUILD_RETRY", _quick(activity_calls.BUILD_RETRY))
    scenario = Scenario(graph=linear(16), culprit="c9", flaky=Counter({"c8": 2, "c16": 1}))
    result, s = await bisect(env.client, scenario)
    assert result.culprit == "c9"
    assert (s.builds["c8"], s.builds["c16"]) == (3, 2)  # retried by Temporal, then built


@pytest.mark.parametrize(
    ("heartbeat", "retry", "silent"),
    [("BUILD_HEARTBEAT", "BUILD_RETRY", "c8"), ("GIT_HEARTBEAT", "VALIDATE_RETRY", "validate")],
)
async def test_a_silent_build_or_validation_times_out_and_runs_again(
    env: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
    heartbeat: str,
    retry: str,
    silent: str,
) -> None:
    """A build, or git work on a build host (a killed build worker held a validation for
    the 10-minute GIT_TIMEOUT), that goes silent is ended by its heartbeat timeout and runs
    again; its fake would have answered after 4 s."""
    monkeypatch.setattr(activity_calls, heartbeat, timedelta(seconds=1))
    monkeypatch.setattr(activity_calls, retry, _quick(getattr(activity_calls, retry)))
    scenario = Scenario(graph=linear(16), culprit="c9", silent=Counter({silent: 1}))
    result, s = await bisect(env.client, scenario)
    assert result.culprit == "c9"
    runs = s.validations if silent == "validate" else s.builds[silent]
    assert runs == 2  # the heartbeat timeout ended the first attempt


def _quick(policy: RetryPolicy) -> RetryPolicy:
    return dataclasses.replace(policy, initial_interval=timedelta(milliseconds=100))


async def test_an_unsure_score_is_measured_again_before_skipping(
    env: WorkflowEnvironment,
) -> None:
    # c8 is good (before the culprit c9), but its first boot lands mid-way (on the log
    # scale the verdicts weigh ratios on).
    mid = math.sqrt(fakes.FAST * fakes.SLOW)
    s = Scenario(graph=linear(16), culprit="c9", noisy={"c8": [mid, fakes.FAST]})
    result, s = await bisect(env.client, s, record="engine-retest")
    assert result.culprit == "c9"
    step = next(st for st in result.steps if st.commit == "c8")
    assert step.verdict == "good" and step.boots == 2 and step.scores == [mid, fakes.FAST]
    assert (s.builds["c8"], s.tests["c8"]) == (1, 2)  # built once, measured twice


async def test_still_unsure_after_a_retest_is_a_skip(env: WorkflowEnvironment) -> None:
    mid = math.sqrt(fakes.FAST * fakes.SLOW)
    s = Scenario(graph=linear(16), culprit="c9", noisy={"c8": [mid, mid]})
    result, s = await bisect(env.client, s)
    assert result.status == "ambiguous" and set(result.candidates) == {"c8", "c9"}
    assert s.tests["c8"] == 2


async def test_endpoints_that_score_the_same_stop_at_once(env: WorkflowEnvironment) -> None:
    result, s = await bisect(
        env.client, Scenario(graph=linear(64), culprit="c5", same_endpoints=True)
    )
    assert result.status == "no-difference" and result.culprit is None
    assert "do not differ" in result.message and "avg_read_sectors" in result.message
    assert sum(s.builds.values()) == 2


async def _failed(env: WorkflowEnvironment, scenario: Scenario) -> tuple[BaseException, str, str]:
    """A job that fails: its failure's cause, the status it is listed with, and what
    `kbisect status` says of it (JobSummary.error)."""
    from kbisect.jobs.client import JobClient
    from kbisect.settings import Settings

    async with running(env.client, scenario) as handle:
        with pytest.raises(WorkflowFailureError) as err:
            await handle.result()
        desc = await handle.describe()
    assert err.value.cause is not None
    listed = await JobClient(Settings.from_env(), env.client).jobs(100)
    [said] = [j.error for j in listed if j.id == handle.id]
    return err.value.cause, str(desc.typed_search_attributes.get(SA_STATUS)), said


async def test_bad_input_fails_the_job_with_its_message(env: WorkflowEnvironment) -> None:
    message = "good abc is not an ancestor of bad def: swap them"
    scenario = Scenario(graph=linear(4), culprit="c2", user_error=message)
    cause, status, said = await _failed(env, scenario)
    assert cause.message == message == said  # type: ignore[attr-defined]
    assert status == "failed"  # listed as failed, not as still validating


async def test_bad_input_an_activity_finds_later_fails_the_job_with_its_own_line(
    env: WorkflowEnvironment,
) -> None:
    """A UserError raised in a boot activity (past validation): the job fails, is listed
    as failed, and what the user reads is the activity's own line (`failure_text`), never
    Temporal's "Activity task failed" around it."""
    from kbisect.jobs.client import failure_text

    why = "unknown device profile 'nvme-9': use one of fast, ebs-gp2, ..."
    cause, status, said = await _failed(env, Scenario(linear(8), culprit="c5", boot_user_error=why))
    assert "Activity task failed" in str(cause)  # what Temporal itself says
    assert failure_text(cause) == why == said and status == "failed"


async def test_an_endpoint_the_testcase_cannot_run_on_fails_the_job_with_why(
    env: WorkflowEnvironment,
) -> None:
    """Nothing to bisect against: the job fails at its first boots, listed failed, and
    says which endpoint and why."""
    why = "kernel c8 has module dm_snapshot neither built in nor in its modules"
    _, status, said = await _failed(env, Scenario(linear(8), culprit="c5", cannot_test={"c8": why}))
    assert f"cannot test: {why}" in said and "c8" in said and status == "failed"


async def test_a_commit_the_testcase_cannot_run_on_is_skipped_not_judged(
    env: WorkflowEnvironment,
) -> None:
    """`bisect --kernels` over builds, one of which lacks a module the testcase needs: that
    commit cannot test (as a boot that fails), the culprit is still named."""
    why = "kernel c8 has module dm_snapshot neither built in nor in its modules"
    scenario = Scenario(graph=linear(16), culprit="c12", cannot_test={"c8": why})
    result, s = await bisect(env.client, scenario)
    assert result.culprit == "c12"
    assert s.tests["c8"] >= 1  # the search's first probe: asked, then stepped around
    [step] = [step for step in result.steps if step.commit == "c8"]
    assert step.verdict == "skip" and step.note == f"cannot test: {why}"


async def test_progress_query_and_a_person_marking_a_commit(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(64), culprit="c40", test_delay=0.3)
    async with running(env.client, scenario) as handle:
        await _until_status(handle, "bisecting")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("mark", MarkRequest("nope", "bad"), result_type=str)
        assert "not in this job's range" in refused.value.cause.message  # type: ignore[union-attr]
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("resume", result_type=str)
        assert "not blocked" in refused.value.cause.message  # type: ignore[union-attr]
        # A person knows c41 is bad (true: it is after the culprit).
        answer = await handle.execute_update("mark", MarkRequest("c41", "bad"), result_type=str)
        assert "c41" in answer
        result: BisectResult = await handle.result()
        await keep(handle, "mark")
    assert result.culprit == "c40"
    marked = [s for s in result.steps if s.source == "marked"]
    assert [(s.commit, s.verdict, s.note) for s in marked] == [("c41", "bad", "marked by a person")]
    assert scenario.tests["c41"] == 0  # marked before any round reached it: never tested


async def test_a_mark_while_the_commit_is_tested_is_kept(env: WorkflowEnvironment) -> None:
    scenario = Scenario(graph=linear(64), culprit="c40", test_delay=0.5)
    async with running(env.client, scenario) as handle:
        while (await handle.query("progress", result_type=Progress)).current != ["c32"]:
            await asyncio.sleep(0.02)
        await handle.execute_update("mark", MarkRequest("c32", "good"), result_type=str)
        result: BisectResult = await handle.result()
    assert result.culprit == "c40"
    c32 = [(st.source, st.verdict, st.note) for st in result.steps if st.commit == "c32"]
    assert c32 == [
        ("marked", "good", "marked by a person"),
        ("test", "good", "a person marked it good meanwhile; kept"),
    ]


async def test_a_job_running_during_an_upgrade_takes_the_new_rule_at_its_next_decision(
    env: WorkflowEnvironment,
) -> None:
    # Worker A decides with today's rule and stops halfway (the upgrade); worker B, whose
    # rule differs (a stricter error, a test-only rule), takes the job over from its
    # history. Its decisions are read back, not re-run: no NondeterminismError, B rebuilds
    # the engine from the record once and decides the rest, and the history replays.
    def stricter(setup: Setup) -> Engine:
        config = dataclasses.replace(setup.config, error=0.001)
        return Engine(setup.graph(), setup.new, list(setup.old), config)

    rules = {"a": Decider(), "b": Decider(make=stricter)}
    asked = Counter[str]()

    def worker(rule: str, queue: str) -> Worker:
        @activity.defn(name=DECIDE)
        def decide(record: Record) -> Plan:
            asked[rule] += 1
            return rules[rule].decide(record)

        others = [a for a in fakes.FAKES if a is not fakes.decide]
        return Worker(
            env.client,
            task_queue=queue,
            workflows=[BisectWorkflow],
            activities=[decide, *others],
            workflow_runner=sandbox_runner(),
            activity_executor=ThreadPoolExecutor(2),
        )

    queue = f"q-{uuid.uuid4().hex[:8]}"
    # a small step under noise: several boots a commit, so the job is far from done
    scenario = Scenario(graph=linear(32), culprit="c19", noise=0.08, slow=fakes.FAST * 0.85)
    req = fakes.request(scenario, queue)
    async with worker("a", queue):
        handle = await env.client.start_workflow(
            BisectWorkflow.run, req, id=f"wf-{req.repo}", task_queue=queue
        )
        while (await handle.query("progress", result_type=Progress)).boots < 12:
            await asyncio.sleep(0.05)
    halfway = asked["a"]
    async with worker("b", queue):
        result = await handle.result()
    assert result.culprit == "c19", result.message
    assert asked["a"] == halfway and asked["b"] > 0
    assert rules["b"].rebuilt == 1  # from nothing: the record, not a cache, rebuilt it
    await Replayer(workflows=[BisectWorkflow], workflow_runner=sandbox_runner()).replay_workflow(
        await handle.fetch_history()
    )


async def test_a_host_problem_blocks_the_job_until_resumed(env: WorkflowEnvironment) -> None:
    # The new endpoint's build keeps failing on the host (a full disk) after all retries.
    scenario = Scenario(graph=linear(16), culprit="c9", host_failures=Counter({"c16": 1}))
    async with running(env.client, scenario) as handle:
        blocked = await _until_status(handle, "blocked")
        assert "building " in blocked.message and "no space left on device" in blocked.message
        assert f"kbisect resume {handle.id}" in blocked.message
        answer = await handle.execute_update("resume", result_type=str)
        assert "resuming 1 blocked step" in answer
        result: BisectResult = await handle.result()
        await keep(handle, "resume")
    assert result.status == "found" and result.culprit == "c9"
    assert scenario.builds["c16"] == 2  # the failed build, then the one after resuming


async def test_a_job_cancelled_during_a_boot_ends_cancelled_not_blocked(
    env: WorkflowEnvironment,
) -> None:
    scenario = Scenario(graph=linear(16), culprit="c9", test_delay=2.0)
    async with running(env.client, scenario) as handle:
        while not (await handle.query("progress", result_type=Progress)).current:
            await asyncio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), timeout=30)
        await keep(handle, "cancel")
    assert "cancel" in str(failed.value.cause).lower()
    assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED


async def test_a_bad_endpoint_that_does_not_build_fails_the_job(env: WorkflowEnvironment) -> None:
    # The user named it: nothing to bisect against, and no host problem to resume from.
    scenario = Scenario(graph=linear(16), culprit="c9", broken_build={"c16"})
    async with running(env.client, scenario) as handle:
        with pytest.raises(WorkflowFailureError) as err:
            await handle.result()
        desc = await handle.describe()
        await keep(handle, "failed")
    cause = err.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "JobFailed"
    assert cause.message.startswith("the bad endpoint c16 does not build: kernel does not build")
    assert "pass a bad revision that builds" in cause.message
    assert desc.status == WorkflowExecutionStatus.FAILED
    assert desc.typed_search_attributes.get(SA_STATUS) == "failed"
    assert scenario.tests["c16"] == 0  # failed at its build, before any boot


async def test_progress_says_what_builds_and_the_verification_s_boots(
    env: WorkflowEnvironment,
) -> None:
    """A build takes minutes: the progress names the builds under way. The verification's
    boots are boots of the job too, each with its line."""
    scenario = Scenario(graph=linear(16), culprit="c9", build_delay=0.3)
    seen: dict[str, str] = {}
    boots: list[str] = []
    async with running(env.client, scenario) as handle:
        while (p := await handle.query("progress", result_type=Progress)).status != "found":
            seen.update(p.building)
            if p.last_boot and p.last_boot not in boots:
                boots.append(p.last_boot)
            await asyncio.sleep(0.05)
        result: BisectResult = await handle.result()
        history = await handle.fetch_history()
    assert result.culprit == "c9"
    assert {"root", "c16"} <= set(seen) and seen["c16"] == "subject of c16", seen
    # each activity in the Web UI's timeline says what it does, for a person
    summaries = [
        json.loads(e.user_metadata.summary.data)
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "build c16 subject of c16" in summaries and "boot c16 #1" in summaries, summaries
    assert summaries[0] == "validate: the revisions, the range and the testcase"
    assert any(s.startswith("verify: revert of c9 on c16") for s in summaries), summaries
    # every activity, git work included, is given up on a dead host within its heartbeat
    # timeout (a killed build worker held a validation or a verify commit for 10 minutes)
    heartbeats = {
        e.activity_task_scheduled_event_attributes.activity_type.name: (
            e.activity_task_scheduled_event_attributes.heartbeat_timeout.ToSeconds()
        )
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    }
    assert {VALIDATE, PREPARE_VERIFY, BUILD, TEST} <= set(heartbeats), heartbeats
    assert all(0 < t <= 30 for t in heartbeats.values()), heartbeats
    assert p.building == {}
    revert = result.verification.commit if result.verification else None
    assert revert and p.last_boot.startswith(f"{revert[:12]} boot 1: ")
    assert p.last_boot.endswith("(verification: reverted on the new endpoint)"), p.last_boot


async def test_a_job_s_summary_and_details_are_what_the_workflow_list_shows(
    env: WorkflowEnvironment,
) -> None:
    """The Web UI's list shows a job's static summary; its page, the details under it."""
    from kbisect.jobs.client import JobClient
    from kbisect.settings import Settings

    client = JobClient(Settings.from_env(), env.client)
    req = BisectRequest(
        "/home/u/kbisect-lab/", ["lab-good"], "lab-bad", "t", repetitions=1, verify=False
    )
    job = await client.start(req, by="@alice:hs (Matrix)")
    handle = env.client.get_workflow_handle(job)
    try:
        desc = await handle.describe()
        summary = await desc.static_summary()
        assert summary == "bisect t (regression) lab-good..lab-bad in kbisect-lab"
        details = (await desc.static_details() or "").splitlines()
        assert details[0] == "- **submitted by**: @alice:hs (Matrix)"
        assert "- **repetitions**: 1" in details and "- **verify**: False" in details
        assert not any("mode" in line for line in details), details  # as it was: not said
        assert not any("queue" in line for line in details), details  # plumbing left out
    finally:
        await handle.terminate()


async def test_the_endpoints_steps_count_the_references_booted_while_bisecting(
    env: WorkflowEnvironment,
) -> None:
    # A running job's page showed its endpoints as calibrating left them ("5+5 boots"
    # with 12+12 booted): their steps now follow the references booted since
    scenario = Scenario(
        graph=linear(16), culprit="c6", noise=0.05, slow=fakes.FAST * 0.8, test_delay=0.05
    )
    counts: list[int] = []
    async with running(env.client, scenario) as handle:
        while (p := await handle.query("progress", result_type=Progress)).status in (
            "validating", "calibrating", "bisecting",
        ):  # fmt: skip
            if p.status == "bisecting":
                counts.append(sum(st.boots for st in p.steps if st.source == "endpoint"))
            await asyncio.sleep(0.02)
        result: BisectResult = await handle.result()
    ends = [n for st in result.steps if st.source == "endpoint" for n in st.boot_numbers]
    probes = [n for st in result.steps if st.source == "test" for n in st.boot_numbers]
    assert max(ends) > min(probes)  # references booted while bisecting
    assert counts and counts[-1] > counts[0], counts  # ... and the live steps counted them
