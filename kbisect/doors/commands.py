"""The doors' own commands: `kbisect chat matrix` (the Matrix bot), `kbisect gitlab serve`
(the GitLab door) and `kbisect web` (the results pages on their own). kbisect.main puts
them beside the CLI's; the two never import each other."""

import argparse
import asyncio
import ipaddress
import logging
import re
import sys
from pathlib import Path

from kbisect.errors import UserError
from kbisect.infra.logs import service_logging
from kbisect.settings import Settings, read_small_file


def note(text: str) -> None:
    """A status line on stderr, as the CLI writes them."""
    print(text, file=sys.stderr, flush=True)


HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})")


def listen_address(text: str) -> tuple[str, int]:
    """--listen HOST:PORT ([IPv6]:PORT) as the host and port to bind."""
    host, _, port = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ok_host = _is_ip(host)
    else:
        ok_host = bool(HOSTNAME.fullmatch(host)) or _is_ip(host)
    if not ok_host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(
            f"--listen {text}: give host:port with a port from 1 to 65535, e.g. 0.0.0.0:8093 "
            "or [::1]:8093"
        )
    return host, int(port)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def read_secret(path: str, what: str) -> str:
    """A password or token from a file (never from the command line, where ps shows it)."""
    try:
        secret = read_small_file(Path(path)).decode(errors="replace").strip()
    except OSError as exc:
        raise UserError(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    if not secret or "\n" in secret:
        raise UserError(f"the {what} file {path} must hold one line: the {what}")
    return secret


def cmd_matrix(args: argparse.Namespace, settings: Settings) -> int:
    from kbisect.doors.matrix import BotConfig, MatrixBot, default_state_path
    from kbisect.jobs.series_client import alert_poll, check_name
    from kbisect.reports.sru_patch import SIGNOFF

    if not args.homeserver.startswith(("http://", "https://")):
        raise UserError(f"--homeserver {args.homeserver}: give its URL, e.g. https://matrix.org")
    for user in [args.user, *args.allow_user]:
        if not (user.startswith("@") and ":" in user):
            raise UserError(f"{user!r} is not a Matrix user id: write @name:server")
    for room in args.room:
        if not room.startswith("!") or len(room) < 2:  # room v12 ids have no ':server'
            raise UserError(f"{room!r} is not a room id: it starts with '!' (room settings)")
    for name in args.series:
        check_name(name)
    if args.signoff is not None and not SIGNOFF.fullmatch(args.signoff):
        raise UserError(f"--signoff {args.signoff!r}: write 'Your Name <you@example.com>'")
    config = BotConfig(
        homeserver=args.homeserver,
        user=args.user,
        password=read_secret(args.password_file, "password"),
        rooms=args.room,
        allowed=args.allow_user,
        state=Path(args.state) if args.state else default_state_path(settings, args.user),
        signoff=args.signoff,
        series=args.series,
        alerts_every=alert_poll(args.alerts_every),
    )
    service_logging()
    logging.getLogger("nio").setLevel(logging.WARNING)  # a line per event otherwise
    note(f"kbisect Matrix bot {args.user} in {', '.join(args.room)}; Ctrl-C stops it")

    async def run() -> None:
        bot = MatrixBot(config, settings)
        try:
            await bot.run()
        finally:
            await bot.close()

    asyncio.run(run())
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    c = sub.add_parser("chat", help="take commands from a chat room")
    csub = c.add_subparsers(dest="chat_command", required=True, metavar="NETWORK")
    m = csub.add_parser("matrix", help="a Matrix bot: '!kbisect help' in a room lists commands")
    m.add_argument("--homeserver", required=True, help="the homeserver's URL")
    m.add_argument("--user", required=True, help="the bot's user id, e.g. @kbisect:example.org")
    m.add_argument(
        "--password-file", required=True, metavar="F", help="a file holding the bot's password"
    )
    m.add_argument(
        "--room",
        required=True,
        action="append",
        metavar="ID",
        help="a room id to listen in (repeatable); the bot joins it",
    )
    m.add_argument(
        "--allow-user",
        required=True,
        action="append",
        metavar="ID",
        help="a user id whose commands are obeyed (repeatable); others get a refusal",
    )
    m.add_argument(
        "--state",
        metavar="FILE",
        help="where the bot keeps its login and its jobs' threads (default: in KBISECT_DATA)",
    )
    m.add_argument(
        "--signoff",
        metavar="'NAME <MAIL>'",
        help="the Signed-off-by of the SRU patches 'sru JOB' posts (default: git's user.name "
        "and user.email)",
    )
    m.add_argument(
        "--series",
        action="append",
        default=[],
        metavar="WATCH",
        help="post this series watch's alerts, with their plots, in the first room "
        "(repeatable; 'kbisect series watch')",
    )
    _alerts_every(m)
    m.set_defaults(func=cmd_matrix)

    w = sub.add_parser(
        "web",
        help="serve the results pages (every job, sweep and watch; read-only) on their own; "
        "the local service's Web UI has them at /kbisect/",
    )
    w.add_argument("--listen", required=True, metavar="ADDR", help="host:port to listen on")
    w.add_argument(
        "--host-name",
        action="append",
        default=[],
        metavar="NAME",
        help="a name browsers reach this host by, besides the --listen host and loopback "
        "(repeatable); other Host headers are refused (DNS rebinding)",
    )
    w.add_argument(
        "--token-file",
        metavar="F",
        help="a file holding a token the pages then ask for: a browser's password (any user "
        "name), or a tool's 'Authorization: Bearer TOKEN'; other requests get 401",
    )
    w.set_defaults(func=cmd_web)
    g = sub.add_parser("gitlab", help="take commands from GitLab notes")
    gsub = g.add_subparsers(dest="gitlab_command", required=True, metavar="ACTION")
    s = gsub.add_parser("serve", help="receive Note Hooks: '/kbisect help' in a note")
    s.add_argument("--listen", required=True, metavar="ADDR", help="host:port to listen on")
    s.add_argument("--url", required=True, help="the GitLab instance's URL")
    s.add_argument(
        "--token-file", required=True, metavar="F", help="a file holding the bot's access token"
    )
    s.add_argument(
        "--webhook-secret-file",
        required=True,
        metavar="S",
        help="a file holding the webhook's secret token (X-Gitlab-Token)",
    )
    who = s.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--allow-user",
        action="append",
        default=[],
        metavar="NAME",
        help="a GitLab username whose commands are obeyed (repeatable); others get a refusal",
    )
    who.add_argument(
        "--allow-anyone",
        action="store_true",
        help="obey everyone who can comment on a project that sends the hooks (jobs, SRU "
        "branches, merge requests)",
    )
    s.add_argument(
        "--signoff",
        metavar="'NAME <MAIL>'",
        help="the Signed-off-by of the SRU commits 'sru JOB branch=B' pushes (default: the "
        "token's user, its commit email)",
    )
    s.add_argument(
        "--state",
        metavar="FILE",
        help="where handled notes and followed jobs are kept (default: in KBISECT_DATA)",
    )
    s.add_argument(
        "--series",
        action="append",
        default=[],
        metavar="WATCH=PROJECT#IID",
        help="post this series watch's alerts, with their plots, as notes on that issue "
        "(repeatable; e.g. cloud=kernel/sru#12)",
    )
    _alerts_every(s)
    s.set_defaults(func=cmd_gitlab)


def _alerts_every(parser: argparse.ArgumentParser) -> None:
    from kbisect.jobs.series_client import ALERT_POLL_LIMITS, ALERT_POLL_SECONDS

    lo, hi = ALERT_POLL_LIMITS
    parser.add_argument(
        "--alerts-every",
        default=str(ALERT_POLL_SECONDS),
        metavar="SECONDS",
        help=f"how often to look for the --series watches' new alerts ({lo:g} to {hi:g}; "
        f"default {ALERT_POLL_SECONDS:g})",
    )


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    from aiohttp import web

    from kbisect.doors.web.app import standalone
    from kbisect.infra import http_errors
    from kbisect.infra.temporal_server import LOOPBACK_NAMES

    host, port = listen_address(args.listen)
    named = host if ":" not in host else f"[{host}]"
    hosts = (*LOOPBACK_NAMES, named, *args.host_name)
    token = read_secret(args.token_file, "token") if args.token_file else ""
    if host != "localhost" and (not _is_ip(host) or not ipaddress.ip_address(host).is_loopback):
        who = "and holds the token" if token else "(read-only, no sign-in: see --token-file)"
        note(
            f"warning: --listen {args.listen}: the results pages show every job's commits, "
            f"scores and reports to whoever reaches this address {who}: put them behind your "
            "own front with TLS for anything but a trusted network"
        )

    async def run() -> None:
        runner = http_errors.Runner(standalone(settings, hosts, token), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        note(
            f"kbisect results pages on http://{named}:{port}/kbisect/ ({settings.endpoint.address})"
        )
        await asyncio.Event().wait()

    asyncio.run(run())
    return 0


def cmd_gitlab(args: argparse.Namespace, settings: Settings) -> int:
    import gitlab
    from aiohttp import web

    from kbisect.doors.gitlab import GitLabConfig, GitLabDoor, SeriesIssue
    from kbisect.jobs.client import JobClient
    from kbisect.jobs.series_client import alert_poll
    from kbisect.reports.sru_patch import SIGNOFF
    from kbisect.settings import private_dir

    host, port = listen_address(args.listen)
    if not args.url.startswith(("http://", "https://")):
        raise UserError(
            f"--url {args.url}: give the GitLab instance's URL, e.g. https://gitlab.com"
        )
    config = GitLabConfig(
        url=args.url,
        token=read_secret(args.token_file, "token"),
        secret=read_secret(args.webhook_secret_file, "webhook secret"),
        state=Path(args.state) if args.state else private_dir(settings.data) / "gitlab.json",
        allowed=tuple(args.allow_user),
        signoff=args.signoff,
        series=tuple(SeriesIssue.parse(text) for text in args.series),
        alerts_every=alert_poll(args.alerts_every),
    )
    if args.signoff is not None and not SIGNOFF.fullmatch(args.signoff):
        raise UserError(f"--signoff {args.signoff!r}: write 'Your Name <you@example.com>'")
    service_logging()
    if args.allow_anyone:
        note(
            "warning: --allow-anyone: everyone who can comment on a project that sends these "
            "hooks can start jobs and have kbisect push SRU branches and open merge requests"
        )

    async def run() -> None:
        jobs = await JobClient.connect(settings)
        door = GitLabDoor(
            config, settings, jobs, gitlab.Gitlab(config.url, private_token=config.token)
        )
        await door.start()
        runner = web.AppRunner(door.app())
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        note(f"kbisect GitLab receiver on http://{args.listen}/webhook for {config.url}")
        await asyncio.Event().wait()

    asyncio.run(run())
    return 0
