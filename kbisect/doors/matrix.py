"""The Matrix door: `!kbisect ...` in an allowed room from an allowed user runs the command
through the same grammar, checks and JobClient as the CLI; a started job gets a thread
(the job id and Web UI link first, then its phases and steps, the outcome, the report's
summary and the score plot). `sru JOB` posts the SRU text, then the cover letter and patch
(`kbisect report --sru-patch`) as files in its thread. `bisect` starts an investigation:
its thread has each stage's line, then that stage job's story, then the investigation's
outcome and the last bisection's plot.

The bot posts notices (m.notice: bots' messages, which bots ignore), ignores its own
messages, notices and whatever was sent before it started. Its login (access token and
device) and, per job, the thread and the keys it has posted are kept in a state file, so
a restarted bot logs in as the same device, follows its jobs on and never posts a line
twice: each post's transaction id is derived from the job and the key, and the server
drops a repeat of one it has seen from that device.

Each command runs in a task of its own, so the sync loop takes the next message while a
command waits (on a fetch, say); a message holds one command (its first line). A command
naming a job acts only on a job this bot started (its state file's jobs). Whatever fails
in a command, the sender gets one line and the bot serves on.
"""

import asyncio
import hashlib
import io
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nio import (
    AsyncClient,
    JoinError,
    LoginResponse,
    MatrixRoom,
    MemoryDownloadResponse,
    RoomGetEventResponse,
    RoomMessageFile,
    RoomMessageNotice,
    RoomMessageText,
    RoomSendResponse,
    UploadResponse,
)

from kbisect.builders.patched_commit import MAX_PATCH
from kbisect.doors import state_file
from kbisect.doors.actions import (
    Quota,
    bisection_of,
    execute,
    failure_text,
    off_loop,
    sru_files,
)
from kbisect.doors.grammar import Command, parse
from kbisect.doors.job_posts import Post, follow
from kbisect.doors.quoting import inert
from kbisect.errors import InfraError, KbisectError, UserError
from kbisect.jobs import series_client
from kbisect.jobs.client import JobClient
from kbisect.jobs.series_client import ALERT_POLL_SECONDS
from kbisect.reports.lkp_report import MAX_MAIL
from kbisect.reports.sweep_report import alert_lines
from kbisect.settings import Settings, private_dir
from kbisect.workflows.series_types import SeriesAlert

PREFIX = "!kbisect"
log = logging.getLogger("kbisect.matrix")


@dataclass
class BotConfig:
    homeserver: str
    user: str  # @bot:server
    password: str
    rooms: list[str]  # room ids (!abc:server)
    allowed: list[str]  # user ids obeyed
    state: Path  # the state file
    signoff: str | None = None  # the SRU patch's Signed-off-by; default: git's identity
    series: list[str] = field(default_factory=list)  # watches whose alerts go to rooms[0]
    alerts_every: float = ALERT_POLL_SECONDS  # seconds between looks for their alerts


RESENDS = 3  # tries of a post a stopped bot was sending (then its story goes on)


@dataclass
class JobThread:
    room: str
    root: str  # the thread's first event: the job id and link
    posted: list[str] = field(default_factory=list)
    done: bool = False
    by: str = ""  # who started it (a user id): their running jobs count against Quota
    # the post on its way ([key, text]), kept before it is sent: a bot stopped before the
    # server answered sends it again at its start under the same transaction id, which the
    # homeserver answers with the first post's event while it remembers the id (Synapse:
    # for its access token, about 30 minutes); a phase already past would otherwise be in
    # the thread with its key unkept
    sending: list[str] = field(default_factory=list)


@dataclass
class State:
    path: Path
    user_id: str = ""
    device_id: str = ""
    access_token: str = ""
    jobs: dict[str, JobThread] = field(default_factory=dict)
    alerts: list[str] = field(default_factory=list)  # series alerts posted, by key
    # per watch, where its ticks are read from next (series_client.News.since)
    series_since: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "State":
        raw = state_file.load(path)
        try:
            jobs = {k: JobThread(**v) for k, v in raw.get("jobs", {}).items()}
            return cls(
                path=path,
                user_id=raw.get("user_id", ""),
                device_id=raw.get("device_id", ""),
                access_token=raw.get("access_token", ""),
                jobs=jobs,
                alerts=list(raw.get("alerts", [])),
                series_since=dict(raw.get("series_since", {})),
            )
        except TypeError as exc:
            raise UserError(f"{path} is not a kbisect Matrix state file: move it away") from exc

    def save(self) -> None:
        data = {
            "user_id": self.user_id,
            "device_id": self.device_id,
            "access_token": self.access_token,
            "jobs": {k: vars(v) for k, v in self.jobs.items()},
            "alerts": self.alerts,
            "series_since": self.series_since,
        }
        state_file.save(self.path, data)


def default_state_path(settings: Settings, user: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in user)
    return private_dir(settings.data) / "matrix" / f"{safe}.json"


def command_text(body: str) -> str | None:
    """The command after the prefix, if the message's first line starts with it."""
    first = without_fallback(body).strip().split("\n", 1)[0]
    word, _, rest = first.partition(" ")
    return rest if word == PREFIX else None


def without_fallback(body: str) -> str:
    """A reply's text without the quote of what it answers that older clients put first
    (lines of '> ', then a blank line: Matrix's reply fallback)."""
    if not body.startswith("> <"):
        return body
    lines = body.split("\n")
    end = next((i for i, line in enumerate(lines) if not line.startswith(">")), len(lines))
    return "\n".join(lines[end + 1 if end < len(lines) and not lines[end] else end :])


def pasted_below(body: str) -> bytes | None:
    """What a message holds below its command's line (a pasted report), if anything."""
    below = without_fallback(body).strip().split("\n", 1)[1:]
    return below[0].encode() if below and below[0].strip() else None


def answered_id(event: RoomMessageText) -> str | None:
    """The event a message replies to (m.in_reply_to), if it is a reply."""
    relates = event.source.get("content", {}).get("m.relates_to") or {}
    replied = relates.get("m.in_reply_to") if isinstance(relates, dict) else None
    found = replied.get("event_id") if isinstance(replied, dict) else None
    return found if isinstance(found, str) else None


def thread(root: str) -> dict[str, Any]:
    return {
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": root},
    }


class MatrixBot:
    def __init__(self, config: BotConfig, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.state = State.load(config.state)
        self.nio = AsyncClient(config.homeserver, config.user, store_path=None)
        self.jobs: JobClient | None = None
        self.started_ms = int(time.time() * 1000)
        self.followers: dict[str, asyncio.Task[None]] = {}
        self.commands: set[asyncio.Task[None]] = set()
        self.quota = Quota(self._running_for)

    def _running_for(self, user: str) -> int:
        """The user's jobs this bot started and follows still (not seen to end)."""
        return sum(1 for job in self.state.jobs.values() if job.by == user and not job.done)

    async def run(self) -> None:
        self.jobs = await JobClient.connect(self.settings)
        await self._login()
        for room in self.config.rooms:
            joined = await self.nio.join(room)
            if isinstance(joined, JoinError):
                raise UserError(f"cannot join {room}: {joined.message}: invite the bot first")
        # What the first sync returns happened before the bot started: not commands.
        await self.nio.sync(timeout=0, full_state=True)
        for job_id, job in self.state.jobs.items():
            if not job.done:
                self._follow(job_id)
        for watch in self.config.series:
            self.followers[f"series {watch}"] = asyncio.create_task(self._follow_series(watch))
        self.nio.add_event_callback(self._on_message, RoomMessageText)
        log.info("listening in %s", ", ".join(self.config.rooms))
        await self.nio.sync_forever(timeout=30000)

    async def close(self) -> None:
        for task in [*self.followers.values(), *self.commands]:
            task.cancel()
        await self.nio.close()

    async def _login(self) -> None:
        s = self.state
        if s.access_token and s.user_id == self.config.user:
            self.nio.restore_login(s.user_id, s.device_id, s.access_token)
            return
        resp = await self.nio.login(self.config.password, device_name="kbisect")
        if not isinstance(resp, LoginResponse):
            raise UserError(f"cannot log in as {self.config.user}: {resp}")
        s.user_id, s.device_id, s.access_token = resp.user_id, resp.device_id, resp.access_token
        s.save()

    # --- commands ------------------------------------------------------------------
    async def _on_message(self, room: MatrixRoom, event: RoomMessageText) -> None:
        if room.room_id not in self.config.rooms or event.sender == self.nio.user_id:
            return
        if event.server_timestamp < self.started_ms:
            return
        text = command_text(event.body)
        if text is None:
            return
        task = asyncio.create_task(self._command(room.room_id, event, text))
        self.commands.add(task)
        task.add_done_callback(self.commands.discard)

    async def _command(self, room: str, event: RoomMessageText, text: str) -> None:
        """One command, off the sync loop; a failure kbisect did not foresee is one line."""
        try:
            await self._obey(room, event, text)
        except Exception as exc:
            log.exception("%s in %s: %r", event.sender, room, text)
            try:
                await self._reply(room, event.event_id, failure_text(exc))
            except Exception:  # the homeserver is away too: the log has it
                log.exception("could not say so in %s", room)

    async def _obey(self, room: str, event: RoomMessageText, text: str) -> None:
        if event.sender not in self.config.allowed:
            await self._reply(
                room,
                event.event_id,
                f"Sorry {event.sender}, I only take commands from the users my operator "
                "allowed (kbisect chat matrix --allow-user).",
            )
            return
        assert self.jobs is not None
        try:
            cmd = parse(text)
        except UserError as exc:
            await self._reply(room, event.event_id, str(exc))
            return
        log.info("%s in %s: %s", event.sender, room, cmd.verb)
        owns, by = self.state.jobs.__contains__, f"{event.sender} (Matrix)"
        try:
            mail = await self._answered(room, event, cmd) if cmd.answers else None
        except UserError as exc:
            await self._reply(room, event.event_id, str(exc))
            return
        with self.quota.command(event.sender) as claim:  # held until the job is recorded
            reply = await execute(cmd, self.jobs, self.settings, owns, by, claim, mail)
            root: str | None = None
            try:
                root = await self._reply(room, event.event_id, reply.text)
            finally:  # a started job is the door's, counted and followed, said or not:
                if reply.job_id:  # its thread hangs off the command then
                    thread_root = root or event.event_id
                    self.state.jobs[reply.job_id] = JobThread(room, thread_root, by=event.sender)
                    self.state.save()
                    self._follow(reply.job_id)
        for f in reply.files:  # a flame graph beside an explain job's answer
            if root is None or not await self._post_file(room, root, f.name, f.data, f.mimetype):
                break
        if cmd.verb == "sru" and reply.ok and root:
            await self._post_sru_patch(room, root, cmd)

    async def _answered(self, room: str, event: RoomMessageText, cmd: Command) -> bytes | None:
        """What the command answers (`bisect from-report`: a report mail; `test`: a patch):
        pasted below the command's line, or the message it replies to (its text, or its file
        from this homeserver's own media: no other URL is fetched); None: neither. A file
        over its bound is not fetched."""
        below = pasted_below(event.body)
        if below is not None:
            return below
        replied = answered_id(event)
        if replied is None:
            return None
        got = await self.nio.room_get_event(room, replied)
        if not isinstance(got, RoomGetEventResponse):
            raise UserError(f"refused: cannot read the message this answers ({got.message})")
        answered = got.event
        if isinstance(answered, RoomMessageText | RoomMessageNotice):
            return without_fallback(answered.body).encode()
        if cmd.from_report:
            asks, what, limit = (
                "bisect from-report answers an LKP report",
                "one report mail",
                MAX_MAIL,
            )
        else:
            asks, what, limit = "test JOB answers a patch", "one patch", MAX_PATCH
        if not isinstance(answered, RoomMessageFile):
            raise UserError(f"refused: {asks}: reply to its text or file")
        info = answered.source.get("content", {}).get("info") or {}
        size = info.get("size") if isinstance(info, dict) else None
        if isinstance(size, int) and size > limit:
            raise UserError(f"refused: that file is over {limit >> 20} MiB, not {what}")
        if not answered.url.startswith("mxc://"):
            raise UserError("refused: that file is not on a Matrix media repository")
        data = await self.nio.download(mxc=answered.url, allow_remote=False)
        if not isinstance(data, MemoryDownloadResponse):
            raise UserError(f"refused: cannot fetch that file ({getattr(data, 'message', data)})")
        return bytes(data.body[: limit + 1])  # over the bound: the reader refuses it

    async def _post_sru_patch(self, room: str, root: str, cmd: Command) -> None:
        """The cover letter and patch (`kbisect report --sru-patch`) as files in the thread
        of the SRU text, and a line with where it applies and checkpatch's summary."""
        assert self.jobs is not None
        with tempfile.TemporaryDirectory(prefix="kbisect-sru-") as tmp:
            try:
                job = await bisection_of(self.jobs, cmd.job or "")  # an investigation's
                result = await self.jobs.result(job)
                done = await off_loop(sru_files, result, job, cmd, self.config.signoff, Path(tmp))
            except KbisectError as exc:
                text = "no patch: " + " ".join(str(exc).split())
                await self._send(room, _notice(text, thread(root)), tx_id=None)
                return
            for f in done.files:
                if not await self._post_file(room, root, f.name, f.read_bytes(), "text/x-diff"):
                    return
        where = done.target_name
        if where != done.target[:12]:
            where += f" ({done.target[:12]})"
        lines = [f"{done.provenance}; applies to {where}; git am --empty=drop *.patch"]
        if done.checkpatch:
            lines.append(f"checkpatch: {done.checkpatch}")
        await self._send(room, _notice("\n".join(lines + done.notes), thread(root)), None)

    async def _post_file(self, room: str, root: str, name: str, data: bytes, mimetype: str) -> bool:
        """A file in the thread of root; False (and a line saying so) if it did not go."""
        up, _ = await self.nio.upload(
            io.BytesIO(data), content_type=mimetype, filename=name, filesize=len(data)
        )
        if not isinstance(up, UploadResponse):
            log.warning("could not upload %s: %s", name, up)
            await self._send(room, _notice(f"could not upload {name}", thread(root)), None)
            return False
        content = {
            "msgtype": "m.file",
            "body": name,
            "filename": name,
            "url": up.content_uri,
            "info": {"mimetype": mimetype, "size": len(data)},
            "m.relates_to": thread(root),
        }
        await self._send(room, content, tx_id=None)
        return True

    async def _reply(self, room: str, to: str, text: str) -> str | None:
        reply_to = {"m.in_reply_to": {"event_id": to}}
        content = {"msgtype": "m.notice", "body": text, "m.relates_to": reply_to}
        return await self._send(room, content, tx_id=None)

    async def _send(self, room: str, content: dict[str, Any], tx_id: str | None) -> str | None:
        resp = await self.nio.room_send(room, "m.room.message", _quiet(content), tx_id=tx_id)
        if isinstance(resp, RoomSendResponse):
            return str(resp.event_id)
        log.warning("could not post in %s: %s", room, resp)
        return None

    # --- following jobs ------------------------------------------------------------
    def _follow(self, job_id: str) -> None:
        # an explain job's id comes again once its last run has ended: followed afresh
        if job_id not in self.followers or self.followers[job_id].done():
            self.followers[job_id] = asyncio.create_task(self._follow_job(job_id))

    async def _follow_job(self, job_id: str) -> None:
        job = self.state.jobs[job_id]
        assert self.jobs is not None

        async def send(post: Post) -> None:
            job.sending = [post.key, post.text]
            self.state.save()
            content = {"msgtype": "m.notice", "body": post.text, "m.relates_to": thread(job.root)}
            if await self._send(job.room, content, tx_id=f"kbisect-{job_id}-{post.key}") is None:
                raise InfraError(f"could not post {post.key} of {job_id}")
            job.posted.append(post.key)
            job.sending = []
            self.state.save()

        resends = 0
        while True:
            try:
                if job.sending and resends < RESENDS:  # the last bot stopped sending it
                    resends += 1
                    await send(Post(*job.sending))
                result = await follow(self.jobs, job_id, job.posted, send)
                if result is not None and "plot" not in job.posted:
                    await self._post_plot(job_id, job, result)
                job.done = True
                self.state.save()
                return
            except InfraError as exc:  # the server or homeserver away for a while
                log.warning("following %s: %s; trying again", job_id, exc)
                await asyncio.sleep(10)
            except UserError as exc:  # the server no longer knows the job: nothing to follow
                log.warning("stopped following %s: %s", job_id, exc)
                job.done = True
                self.state.save()
                return
            except Exception:  # not foreseen: the job is followed on, the bot serves on
                log.exception("following %s; trying again in a minute", job_id)
                await asyncio.sleep(60)

    async def _post_plot(self, job_id: str, job: JobThread, result: Any) -> None:
        from kbisect.reports.plot import plot_scores

        plot = (plot_scores, result, f"{job_id}: scores across commits")
        await self._post_image(job.room, job.root, plot, f"kbisect-{job_id}-plot")
        job.posted.append("plot")
        self.state.save()

    # --- series watches' alerts ------------------------------------------------------
    async def _follow_series(self, watch: str) -> None:
        """Each alert of the watch's ticks, and each tick blocked on the host, oldest
        first, posted once (by its key) in the first room; looked for every
        `alerts_every` seconds while the bot runs, from the last tick read, however long ago."""
        assert self.jobs is not None
        first = True
        while True:
            try:
                since = self.state.series_since.get(watch, "")
                news = await series_client.news(self.jobs, watch, since)
                new = [a for a in news.alerts if a.key not in self.state.alerts]
                for alert in new:
                    await self._post_alert(self.config.rooms[0], alert)
                for blocked in news.blocked:
                    if blocked.key not in self.state.alerts:
                        await self._post_blocked(self.config.rooms[0], blocked)
                if first or new:
                    log.info(
                        "series %s: %d alert(s), %d posted now", watch, len(news.alerts), len(new)
                    )
                self.state.series_since[watch] = news.since
                self.state.save()
                first = False
            except KbisectError as exc:  # the server away, or the watch not made yet
                log.warning("series %s: %s; looking again", watch, exc)
            except Exception:  # not foreseen: the bot serves on
                log.exception("series %s; looking again", watch)
            await asyncio.sleep(self.config.alerts_every)

    async def _post_alert(self, room: str, alert: SeriesAlert) -> None:
        """The alert's line, then the sweep's plot in its thread. Transaction ids come from
        the alert's key: a restart between the two posts repeats neither."""
        from kbisect.reports.sweep_plot import plot_sweep

        assert self.jobs is not None
        tx = "kbisect-alert-" + hashlib.sha256(alert.key.encode()).hexdigest()[:32]
        result = await self.jobs.sweep_result(alert.sweep)
        text = "\n".join(alert_lines(alert, result))
        root = await self._send(room, _notice(text, {}), tx_id=tx)
        if root is None:
            raise InfraError(f"could not post the alert {alert.key}")
        plot = (plot_sweep, result, f"{alert.sweep}: each kernel's level")
        await self._post_image(room, root, plot, tx + "-plot")
        self.state.alerts.append(alert.key)
        self.state.save()

    async def _post_blocked(self, room: str, blocked: series_client.Blocked) -> None:
        tx = "kbisect-alert-" + hashlib.sha256(blocked.key.encode()).hexdigest()[:32]
        if await self._send(room, _notice(blocked.line(), {}), tx_id=tx) is None:
            raise InfraError(f"could not post the alert {blocked.key}")
        self.state.alerts.append(blocked.key)
        self.state.save()

    async def _post_image(
        self, room: str, root: str, plot: tuple[Callable[[Any, Path], Path], Any, str], tx: str
    ) -> None:
        """A plot (its function, what it draws, its caption) in the thread of root."""
        draw, what, caption = plot
        with tempfile.TemporaryDirectory() as tmp:
            png = await off_loop(draw, what, Path(tmp) / "plot.png")
            data = Path(png).read_bytes()
        name = f"{caption.split(':', 1)[0]}.png"
        up, _ = await self.nio.upload(
            io.BytesIO(data), content_type="image/png", filename=name, filesize=len(data)
        )
        if not isinstance(up, UploadResponse):
            raise InfraError(f"could not upload {name}: {up}")
        content = {
            "msgtype": "m.image",
            "body": caption,
            "url": up.content_uri,
            "info": {"mimetype": "image/png", "size": len(data)},
            "m.relates_to": thread(root),
        }
        if await self._send(room, content, tx_id=tx) is None:
            raise InfraError(f"could not post {name}")


def _quiet(content: dict[str, Any]) -> dict[str, Any]:
    """A post of the bot's (a notice, a file's name, a plot's caption) that mentions no one
    and whose lines read as no command: its body inert, and an empty `m.mentions`, with
    which clients and servers since Matrix 1.7 take no mention from the body at all."""
    return {**content, "body": inert(content["body"], PREFIX), "m.mentions": {}}


def _notice(text: str, relates_to: dict[str, Any]) -> dict[str, Any]:
    content = {"msgtype": "m.notice", "body": text}
    return {**content, "m.relates_to": relates_to} if relates_to else content
