"""A series watch's activities on the build host: find its new kernels, keep its results."""

from temporalio import activity

from kbisect.builders import kernel_list
from kbisect.builders.new_kernels import discover
from kbisect.contract import MAX_SWEEP_KERNELS, SERIES_PLAN, SERIES_RECORD
from kbisect.decide.sweep import verdicts_text
from kbisect.settings import Settings
from kbisect.workers import series_store
from kbisect.workers.activities import heartbeating, typed_failures
from kbisect.workflows.series_types import SeriesPlan, SeriesRecord, SeriesTick, SeriesWatch


class SeriesActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @activity.defn(name=SERIES_PLAN)
    @typed_failures
    @heartbeating
    def series_plan(self, watch: SeriesWatch) -> SeriesPlan:
        found = plan(watch, self.settings)
        activity.logger.info("series %s: %s", watch.name, found.message)
        return found

    @activity.defn(name=SERIES_RECORD)
    @typed_failures
    @heartbeating
    def series_record(self, rec: SeriesRecord) -> SeriesTick:
        kept = series_store.Kept(series_store.path(self.settings, rec.watch))
        alerts = kept.record(rec)
        kept.save()
        message = f"{verdicts_text(rec.result.pairs)} in {len(rec.series)} kernels"
        return SeriesTick(rec.watch, rec.sweep, rec.series, alerts, kept.kept(), message)


def plan(watch: SeriesWatch, settings: Settings) -> SeriesPlan:
    """The last kernel measured and those newer, not measured yet. A first look takes the
    newest kernel as the baseline without a boot: only what comes after it is new."""
    repo, found = discover(watch, settings)
    kept = series_store.Kept(series_store.path(settings, watch.name))
    last = kept.last()
    if last is None:
        if not found:
            return SeriesPlan(repo, [], [], "no kernel matches yet")
        kept.take(found[-1])
        kept.save()
        base = found[-1].name
        return SeriesPlan(repo, [], [], f"baseline {base}: newer kernels are swept against it")
    keys = [k.key for k in found]
    # The last kernel gone from the source (a tag deleted, a package dropped, a watch
    # made again over another source): only the newest is new, never the whole history.
    after = found[keys.index(last.key) + 1 :] if last.key in keys else found[-1:]
    done = kept.measured()
    new = [k for k in after if k.key not in done][-(MAX_SWEEP_KERNELS - 1) :]
    if not new:
        return SeriesPlan(repo, [], [], f"nothing new since {last.name}")
    series = [last, *new]
    if watch.apt:
        made = kernel_list.make([k.spec for k in series], settings)
        repo, commits = str(made.repo), made.commits
    else:
        commits = [k.spec for k in series]
    return SeriesPlan(repo, commits, series, f"{len(new)} new since {last.name}")
