"""Every error this host's web servers answer is one of kbisect's pages, naming the status
and what to do, and nothing of the request: aiohttp's own answers (a 404 of no route, a
500, and a request it could not parse, such as a request line over 8 KB, which it answers
before any application sees it) echo what they read, and name the server's software."""

from collections.abc import Callable
from html import escape
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

ErrorPage = Callable[[int], str]  # a status -> its whole HTML page
ERROR_PAGE: web.AppKey[ErrorPage] = web.AppKey("error_page")  # an application's own
SERVER = "kbisect"  # the Server header: no software or version to look up flaws of
ERROR_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
WHAT_TO_DO = {
    400: "This request could not be read (a line or a header too long, or not HTTP).",
    401: "These pages need their token: give it as the password (any user name).",
    403: "Refused: these pages answer their own host names, and not other sites' pages.",
    404: "No such page: the job id may be cut or wrong; the jobs list has them all.",
    405: "These pages are read-only: start, cancel or resume jobs with kbisect.",
    413: "This request is too large.",
    502: "The Temporal dev server's own Web UI did not answer: see `kbisect status`.",
}


def what_to_do(status: int) -> str:
    if status in WHAT_TO_DO:
        return WHAT_TO_DO[status]
    if status >= 500:
        return "kbisect failed on this page; the service's log says why."
    return "This request was refused."


def title(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def plain_page(status: int) -> str:
    """A page for a server with no pages of its own (the Web UI front alone)."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title(status))} · kbisect</title><style>"
        "body{margin:2rem;font:15px/1.45 system-ui,sans-serif;color:#1d2330}"
        "</style></head><body>"
        f"<h1>{escape(title(status))}</h1><p>{escape(what_to_do(status))}</p></body></html>"
    )


def styled(page: ErrorPage) -> Callable[[web.Request, web.StreamResponse], Any]:
    """An on_response_prepare hook: an error made as text (aiohttp's, or a refusal) becomes
    `page`; every response names its server as kbisect only."""

    async def hook(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = SERVER
        if (
            isinstance(response, web.Response)
            and response.status >= 400
            and response.content_type == "text/plain"
        ):
            text = page(response.status)
            response.text = text
            response.content_type = "text/html"
            response.headers["Content-Security-Policy"] = ERROR_CSP
            # counted from the text replaced, before this hook
            response.headers["Content-Length"] = str(len(text.encode()))

    return hook


class _Handler(RequestHandler):
    page: ErrorPage = staticmethod(plain_page)

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it and checks nothing went
        response = web.Response(
            status=status,
            text=self.page(status),
            content_type="text/html",
            headers={"Server": SERVER, "Content-Security-Policy": ERROR_CSP},
        )
        response.force_close()
        return response


class _Server(web.Server):
    page: ErrorPage = staticmethod(plain_page)

    def __call__(self) -> RequestHandler:
        handler = _Handler(self, loop=self._loop, **self._kwargs)
        handler.page = self.page
        return handler


class Runner(web.AppRunner):
    """An AppRunner whose server answers what it cannot parse with the application's error
    page (ERROR_PAGE), or plain_page; its hooks (styled) are the application's to add."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _Server  # aiohttp's, answering its parse errors as ours
        server.page = self.app.get(ERROR_PAGE, plain_page)  # type: ignore[attr-defined]
        return server
