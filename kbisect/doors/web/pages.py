"""The results pages' HTML, from kbisect's own results: pure functions (no server, no
Temporal), so each page is tested as text."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

from kbisect import evidence
from kbisect.builders.trees import commit_url
from kbisect.contract import RESULTS_PATH as BASE
from kbisect.decide.endpoints import level_of
from kbisect.doors.web.html import badge, esc, markdown, page, table
from kbisect.infra import http_errors
from kbisect.reports.answer import Answer
from kbisect.reports.job_report import NUMBERING
from kbisect.words import clip
from kbisect.workflows.bisect_types import Progress, Step, StepSource
from kbisect.workflows.investigation_types import STATUS_HEAD, SUMMARY_HEAD, Stage


@dataclass
class JobRow:
    """One job of the list: what `kbisect status` says, and its one-line summary."""

    id: str
    kind: str  # bisect, sweep, explain, backport
    state: str  # running, completed, failed...
    status: str  # kbisect's word: bisecting, found...
    testcase: str
    culprit: str
    started: datetime
    summary: str = ""  # the job's static summary: what it measures, where
    boots: int | None = None

    @property
    def shown_status(self) -> str:
        """kbisect's word while the job runs or once it ended well; else how it ended (a
        cancelled sweep's last word was "sweep measuring")."""
        if self.state in ("running", "completed"):
            return self.status or self.state
        return self.state


@dataclass
class Words:
    """What a sweep, explain or backport job says: plain lines, or a report's markdown."""

    status: str
    lines: list[str] = field(default_factory=list)
    markdown: str = ""
    of: str = ""  # the bisection an explain or backport job is a stage of
    flame: bool = False  # an explain job's CPU samples: its flame graph (under `of`)
    notes: list[str] = field(default_factory=list)  # what an explain job's boots left out


def href(base: str, *parts: str) -> str:
    """A link under the pages, each part (a job id, a watch's name) quoted."""
    return esc("/".join([base, *(quote(p, safe="") for p in parts)]))


def age(started: datetime, now: datetime | None = None) -> str:
    seconds = ((now or datetime.now(UTC)) - started).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


ID_SHOWN = 24  # characters of a job id the list shows; the rest on hover


def jobs_page(rows: Sequence[JobRow], base: str, query: str = "") -> str:
    """Every job, newest first, with a filter (typed: at once; without JavaScript: ?q=)."""
    q = query.lower()
    shown = grouped([r for r in rows if not q or q in " ".join(_row_text(r)).lower()])
    ids = {r.id for r in shown}
    body = [
        "<h1>Jobs</h1>",
        f"<form method='get'><input type='search' id='filter' name='q' value='{esc(query)}' "
        "placeholder='filter: testcase, status, commit, id…'></form>",
        "<div class='card flush'>",
        table(
            ("job", "kind", "status", "what", "culprit", "boots", "started"),
            (
                (
                    _job_cell(r.id, base, ids),
                    esc(r.kind),
                    badge(r.shown_status.removeprefix(STATUS_HEAD)),  # its stage
                    f"<span class='what' title='{esc(r.summary)}'>"
                    f"{esc(r.summary.removeprefix(SUMMARY_HEAD))}</span>",
                    f"<code>{esc(r.culprit[:12])}</code>" if r.culprit else "",
                    "" if r.boots is None else str(r.boots),
                    f"<span class='nowrap'>{esc(age(r.started))}</span>",
                )
                for r in shown
            ),
        ),
        "</div>",
        f"<p class='dim'>{len(shown)} of {len(rows)} jobs</p>" if q else "",
    ]
    return page("jobs", "".join(body), base)


def parent_of(job_id: str, ids: set[str]) -> str | None:
    """The listed job whose stage this one is (an investigation's, a bisection's explain
    or backport job: their ids are the parent's and a suffix), the nearest one."""
    cut = job_id
    while "-" in cut:
        cut = cut.rsplit("-", 1)[0]
        if cut in ids:
            return cut
    return None


def grouped(rows: Sequence[JobRow]) -> list[JobRow]:
    """The rows in their order (newest first), each job's stages right under it."""
    ids = {r.id for r in rows}
    children: dict[str | None, list[JobRow]] = {}
    for r in rows:
        children.setdefault(parent_of(r.id, ids), []).append(r)
    out: list[JobRow] = []

    def put(r: JobRow) -> None:
        out.append(r)
        for c in reversed(children.get(r.id, [])):  # a stage in the order it ran
            put(c)

    for r in children.get(None, []):
        put(r)
    return out


def _job_cell(job_id: str, base: str, ids: set[str]) -> str:
    """The id cut to fit (whole on hover and in the link); a stage's id as its suffix,
    under its parent's row."""
    parent = parent_of(job_id, ids)
    shown = cut_id(f"↳ {job_id[len(parent) + 1 :]}" if parent else job_id)
    return (
        f"<a class='hash job{' stage' if parent else ''}' title='{esc(job_id)}' "
        f"href='{href(base, 'jobs', job_id)}'>{esc(shown)}</a>"
    )


def cut_id(job_id: str) -> str:
    """A long id as its kind's head and its own tail (ids differ at the end)."""
    if len(job_id) <= ID_SHOWN:
        return job_id
    return f"{job_id[: ID_SHOWN - 10]}…{job_id[-9:]}"


def _row_text(r: JobRow) -> list[str]:
    return [r.id, r.kind, r.status, r.state, r.testcase, r.summary, r.culprit]


def evidence_links(s: Step, files: str) -> str:
    """A step's boots, each its number linking its console, then its kernel's build log
    (`files`: the job's files' URL); a failed boot's console."""
    links = [
        f"<a class='boot' title='boot {n}: its console' href='{files}/{esc(r)}/console.log'>{n}</a>"
        for n, r in zip(s.boot_numbers, s.runs, strict=False)
        if evidence.is_run(r)
    ]
    if evidence.is_run(s.failed_run):
        links.append(f"<a href='{files}/{esc(s.failed_run)}/console.log'>console</a>")
    if evidence.is_build_log(s.build_log):
        links.append(f"<a href='{files}/{esc(s.build_log)}'>build log</a>")
    return " ".join(links)


def commit_cell(commit: str, web: str) -> str:
    """A commit by its short hash, linked to its tree's web view of it where it has one."""
    short = f"<code>{esc(commit[:12])}</code>"
    return f"<a href='{esc(commit_url(web, commit))}'>{short}</a>" if web else short


def steps_table(
    steps: Sequence[Step], metric: str, unit: str, files: str = "", web: str = ""
) -> str:
    """The commits booted, in the order they were decided; the ones that share a booted
    kernel are a count under it. `files`: where the job's boots' files are (the boots'
    consoles and build logs linked), "" for none."""
    shared = [s for s in steps if s.source == StepSource.SAME_KERNEL]
    rows = [
        (
            str(i),
            commit_cell(s.commit, web),
            esc(clip(s.subject, 70)),
            badge(s.verdict),
            "" if s.value is None else f"{s.value:g}",
            str(s.boots),
            esc(s.source + (f": {s.note}" if s.note else "")),
            evidence_links(s, files) if files else "",
        )
        for i, s in enumerate(steps, 1)
        if s.source != StepSource.SAME_KERNEL
    ]
    score = f"{metric} ({unit})" if unit else metric or "score"
    head = ("#", "commit", "subject", "verdict", score, "boots", "how", "boots' files")
    text = table(head if files else head[:-1], (r if files else r[:-1] for r in rows))
    if shared:
        text = f"<p class='dim'>{esc(NUMBERING)}</p>" + text
        text += (
            f"<p class='dim'>{len(shared)} more commits took a verdict with no build or boot "
            "of their own: the verdict of the kernel they make, or where its commit lies "
            "when it was never booted (in the report below).</p>"
        )
    return text


def weighed(s: Step) -> list[float]:
    """A step's boots' scores but the ones set aside as wild (shown, not weighed)."""
    aside = set(s.set_aside)
    if not aside or len(s.boot_numbers) != len(s.scores):
        return list(s.scores)
    return [v for v, n in zip(s.scores, s.boot_numbers, strict=True) if n not in aside]


def endpoints_table(p: Progress) -> str:
    """The endpoints side by side: each one's boots, the level the verdicts compare (a
    trimmed mean) with its 95% interval, and its lowest and highest boot."""
    ends = [s for s in p.steps if s.source == StepSource.ENDPOINT and s.scores]
    rows = []
    for s in sorted(ends, key=lambda s: s.commit == p.new):
        scores = weighed(s)
        lv = level_of(scores)
        if lv is None:
            continue
        # a counter: its repetitions agree within each boot and boot after boot
        samples = {v for reps in s.repetitions for v in reps} | set(scores)
        reps = sum(len(r) for r in s.repetitions)
        interval = (
            "no noise"
            if len(samples) == 1 and max(reps, lv.boots) >= 2
            else "too few boots"
            if lv.low is None or lv.high is None
            else f"{lv.low:.4g} to {lv.high:.4g}"
        )
        spread = f"{lv.lowest:.4g} to {lv.highest:.4g}" if lv.lowest != lv.highest else "-"
        aside = len(s.scores) - lv.boots
        rows.append(
            (
                "new" if s.commit == p.new else "old",
                f"<code>{esc(s.commit[:12])}</code>",
                badge(s.verdict),
                str(lv.boots) + (f" (+{aside} set aside)" if aside else ""),
                f"{lv.centre:.4g}",
                interval,
                spread,
            )
        )
    if len(rows) < 2:
        return ""
    unit = f" ({esc(p.unit)})" if p.unit else ""
    head = ("endpoint", "commit", "verdict", "boots", f"trimmed mean{unit}", "95% interval",
            "lowest to highest")  # fmt: skip
    return "<h2>Endpoints</h2>" + table(head, rows)


@dataclass
class BisectView:
    """A bisection as its page shows it: live progress, or its result's parts."""

    id: str
    progress: Progress
    done: bool
    temporal_url: str
    answer: str = ""  # the result's message, or the failure
    parts: Answer | None = None  # a named commit's answer in its parts
    report: str = ""  # markdown (its bisect log included)
    sru: str = ""
    explain: list[str] | None = None  # the Why lines of its explain job, when one ran
    flame: bool = False  # its explain job has a flame graph
    web: str = ""  # its tree's web view of a commit ({hash} in it), "" for none


def posterior_bars(p: Progress) -> str:
    """The posterior as it narrows: each of the likeliest answers with its probability as
    a bar (a timing's job; a counter's halves its range and has none)."""
    if not p.likeliest:
        return ""
    subjects = {s.commit: s.subject for s in p.steps}
    rows = []
    for commit, prob in p.likeliest.items():
        who = (
            f"<code>{esc(commit[:12])}</code> {esc(subjects.get(commit, ''))}"
            if commit
            else "no culprit (the endpoints do not differ)"
        )
        rows.append(
            f"<div class='bar'><span class='who'>{who}</span>"
            f"<progress class='track' max='1' value='{prob:.4f}'></progress>"
            f"<span class='p'>{prob:.1%}</span></div>"
        )
    first = "fixing" if p.mode == "fix" else "first bad"
    head = f"<h2>Which commit is the {first} one, as the boots say now</h2>"
    return head + "<div class='card'>" + "".join(rows) + "</div>"


def answer_card(a: Answer, web: str = "") -> str:
    """The answer at a glance: the verdict and the commit as the kernel names commits,
    then a row each for who and when, the effect, the verification (its own badge) and
    the certainty."""
    rows = [("author", esc(f"{a.author}, {a.date}"))] if a.author else []
    rows += [("effect", esc(a.effect))] if a.effect else []
    if a.verification:
        rows.append(("verification", f"{badge(a.verification)} {esc(a.verification_text)}"))
    rows += [("certainty", esc(a.certainty_text))] if a.certainty_text else []
    subject = f" (&quot;{esc(a.subject)}&quot;)" if a.subject else ""
    head = (
        f"{badge(a.verdict)} {esc(a.word)}: <code class='culprit'>{esc(a.commit or '')}</code>"
        f"{subject}"
        + (
            f" · <a href='{esc(commit_url(web, a.commit))}'>the commit</a>"
            if web and a.commit
            else ""
        )
    )
    cells = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f"<div>{head}</div><dl class='parts'>{cells}</dl>"


def bisect_live(v: BisectView, base: str) -> str:
    """The part of the page that changes while the job runs (fetched again by the
    page's script, or by a reload)."""
    p = v.progress
    now = []
    if p.building:
        now.append("building " + ", ".join(f"<code>{esc(c[:12])}</code>" for c in p.building))
    if p.current:
        now.append("testing " + ", ".join(f"<code>{esc(c[:12])}</code>" for c in p.current))
    if p.last_boot:
        now.append(f"boot {p.boots}: {esc(p.last_boot)}")
    done = " data-done='1'" if v.done else ""
    plot = f"{href(base, 'jobs', v.id, 'plot.svg')}?steps={len(p.steps)}&amp;boots={p.boots}"
    answer = (
        answer_card(v.parts, v.web)
        if v.parts is not None
        else f"{badge(p.status)} {esc(v.answer or p.message)}"
    )
    parts = [
        f"<div class='card answer'{done}>{answer}</div>",
        f"<p class='dim'>{p.candidates} candidates left · {len(p.steps)} steps · "
        f"{p.boots} boots</p>"
        if not v.done
        else "",
        "<p>" + " · ".join(now) + "</p>" if now and not v.done else "",
        posterior_bars(p) if not v.done else "",
        endpoints_table(p) if p.steps else "",
        f"<p><img class='plot' alt='scores across commits' src='{plot}'></p>" if p.steps else "",
        "<h2>Steps</h2>",
        steps_table(p.steps, p.metric, p.unit, href(base, "jobs", v.id, "files"), v.web),
    ]
    return "".join(parts)


def bisect_page(v: BisectView, base: str) -> str:
    p = v.progress
    old = ", ".join(o[:12] for o in p.old)
    head = (
        f"<h1>bisect {esc(p.testcase)} <span class='dim'>({esc(p.mode)} mode)</span></h1>"
        f"<p class='dim'><code>{esc(v.id)}</code> · {esc(old)} .. {esc(p.new[:12])} · "
        f"<a href='{esc(v.temporal_url)}'>Temporal page</a> · "
        f"<a href='{href(base, 'api', 'jobs', v.id)}'>JSON</a></p>"
    )
    live = href(base, "jobs", v.id, "live")
    body = [
        head,
        f"<div id='live' data-url='{'' if v.done else live}'>{bisect_live(v, base)}</div>",
    ]
    if v.explain:
        flame = (
            f" <a href='{href(base, 'jobs', v.id, 'flame.svg')}'>differential flame graph</a>"
            if v.flame
            else ""
        )
        body.append("<h2>Why it changed</h2><div class='card'>" + "<br>".join(map(esc, v.explain)))
        body.append(f"{flame}</div>")
    if v.report:
        body.append(f"<h2>Report</h2><div class='card report'>{markdown(v.report)}</div>")
    if v.sru:
        body.append(f"<h2>SRU justification (draft)</h2><pre class='note'>{esc(v.sru)}</pre>")
    return page(v.id, "".join(body), base)


def other_page(
    job_id: str, kind: str, words: Words, done: bool, base: str, temporal_url: str
) -> str:
    """A sweep, explain or backport job: its words, and a sweep's plot once it ended."""
    live = "" if done else href(base, "jobs", job_id, "live")
    src = href(base, "jobs", job_id, "plot.svg")
    plot = f"<img class='plot' alt='levels across the kernels' src='{src}'>"
    of = (
        f"of the bisection <a class='hash' href='{href(base, 'jobs', words.of)}'>"
        f"{esc(words.of)}</a> · "
        if words.of
        else ""
    )
    flame = ""
    if words.flame and words.of:
        svg = href(base, "jobs", words.of, "flame.svg")
        flame = (
            "<h2>Where the CPU time moved</h2><p class='dim'>The differential flame graph: "
            f"the culprit's samples against its parent's (<a href='{svg}'>open it alone</a>, "
            f"to hover and zoom).</p><img class='plot' alt='differential flame graph' src='{svg}'>"
        )
    return page(
        job_id,
        f"<h1>{esc(kind)} <code>{esc(job_id)}</code></h1>"
        f"<p class='dim'>{of}<a href='{esc(temporal_url)}'>Temporal page</a> · "
        f"<a href='{href(base, 'api', 'jobs', job_id)}'>JSON</a></p>"
        f"<div id='live' data-url='{live}'>{other_live(words, done)}</div>"
        + (plot if kind == "sweep" and done else "")
        + flame,
        base,
    )


def other_live(words: Words, done: bool) -> str:
    mark = " data-done='1'" if done else ""
    lines = list(words.lines)
    if lines and lines[0].startswith(f"{words.status}: "):  # the badge says it already
        lines[0] = lines[0].removeprefix(f"{words.status}: ")
    text = markdown(words.markdown) if words.markdown else "<br>".join(map(esc, lines))
    if words.notes:  # folded under one line: Why and the flame graph lead
        text += (
            f"<details><summary>left out of what was read: {len(words.notes)} notes</summary>"
            + "<br>".join(map(esc, words.notes))
            + "</details>"
        )
    return f"<div class='card report'{mark}>{badge(words.status)} {text}</div>"


@dataclass
class InvestigationView:
    """An investigation as its page shows it: its stages in order, each a link to its own
    job's page; once it ended, its report (every stage's answer and the SRU draft)."""

    id: str
    status: str  # its progress's word while it runs; then how it ended
    message: str
    stages: list[Stage]
    done: bool
    temporal_url: str
    testcase: str = ""
    report: str = ""  # markdown, kbisect's own with others' words escaped
    bisection: str = ""  # the bisection that answered: its plot is shown
    parts: Answer | None = None  # that bisection's answer in its parts, once it ended


def investigation_live(v: InvestigationView, base: str) -> str:
    """The part of an investigation's page that changes while it runs: its word and its
    stages so far."""
    done = " data-done='1'" if v.done else ""
    rows = (
        (
            str(i),
            esc(s.name),
            f"<a class='hash job' title='{esc(s.job)}' href='{href(base, 'jobs', s.job)}'>"
            f"{esc(cut_id(s.job.removeprefix(v.id + '-')))}</a>"
            if s.job
            else "",
            badge(s.state),
            esc(s.line),
        )
        for i, s in enumerate(v.stages, 1)
    )
    stages = (
        table(("#", "stage", "job", "state", "how it ended"), rows)
        if v.stages
        else "<p class='dim'>No stage has started yet.</p>"
    )
    return (
        f"<div class='card answer'{done}>"
        + (answer_card(v.parts) if v.parts is not None else f"{badge(v.status)} {esc(v.message)}")
        + f"</div><h2>Stages</h2><div class='card flush'>{stages}</div>"
    )


def investigation_page(v: InvestigationView, base: str) -> str:
    live = "" if v.done else href(base, "jobs", v.id, "live")
    what = f" {esc(v.testcase)}" if v.testcase else ""
    body = [
        f"<h1>investigation{what}</h1>"
        f"<p class='dim'><code>{esc(v.id)}</code> · "
        f"<a href='{esc(v.temporal_url)}'>Temporal page</a> · "
        f"<a href='{href(base, 'api', 'jobs', v.id)}'>JSON</a></p>",
        f"<div id='live' data-url='{live}'>{investigation_live(v, base)}</div>",
    ]
    if v.bisection:
        src = href(base, "jobs", v.bisection, "plot.svg")
        body.append(f"<img class='plot' alt='scores across commits' src='{src}'>")
    if v.report:
        body.append(f"<h2>Report</h2><div class='card report'>{markdown(v.report)}</div>")
    return page(v.id, "".join(body), base)


@dataclass
class SeriesView:
    name: str
    description: str  # what it watches, how often
    alerts: list[str]  # one line each, newest first
    sweeps: list[tuple[str, str]]  # (sweep job id, its summary line), newest first


def series_list_page(rows: Sequence[tuple[str, str]], base: str) -> str:
    body = "<h1>Series watches</h1>" + (
        table(
            ("watch", "what"),
            ((f"<a href='{href(base, 'series', n)}'>{esc(n)}</a>", esc(d)) for n, d in rows),
        )
        if rows
        else "<p class='dim'>No series watch yet: <code>kbisect series watch</code>.</p>"
    )
    return page("series watches", body, base)


def series_page(v: SeriesView, base: str) -> str:
    """Perfherder-like: each sweep's kernels and levels as a plot, its changed pairs and
    their alerts on the same page."""
    alerts = (
        "".join(f"<li>{esc(a)}</li>" for a in v.alerts) if v.alerts else "<li class='dim'>none</li>"
    )
    sweeps = "".join(
        f"<div class='card'><p><a class='hash' href='{href(base, 'jobs', s)}'>{esc(s)}</a> "
        f"{esc(line)}</p><img class='plot' alt='levels across the kernels' "
        f"src='{href(base, 'jobs', s, 'plot.svg')}'></div>"
        for s, line in v.sweeps
    )
    body = (
        f"<h1>series watch {esc(v.name)}</h1><p class='dim'>{esc(v.description)}</p>"
        f"<h2>Alerts</h2><ul>{alerts}</ul><h2>Sweeps</h2>"
        + (sweeps or "<p class='dim'>No sweep yet.</p>")
    )
    return page(f"series {v.name}", body, base)


SHOWN_CHARS = 160  # of a title or message an error page shows (an id may be anything)


def _bounded(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def error_page(title: str, message: str, base: str) -> str:
    title, message = _bounded(title), _bounded(message)
    return page(title, f"<h1>{esc(title)}</h1><div class='card'>{esc(message)}</div>", base)


def status_page(status: int) -> str:
    """The page of an error made elsewhere (aiohttp's, a refusal): its status and what to do."""
    return error_page(http_errors.title(status), http_errors.what_to_do(status), BASE)
