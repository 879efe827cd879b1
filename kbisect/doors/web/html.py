"""The pages' frame: one small stylesheet, escaped text, tables and the live updates'
script. No CDN and no framework: every byte is served from here, and the pages' Content
Security Policy lets a browser run or load nothing else."""

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from html import escape

from markdown_it import MarkdownIt

from kbisect.workflows.investigation_types import STATUS_HEAD, StageName

CSS = """
:root { --fg: #1d2330; --dim: #5b6475; --line: #dde1e8; --bg: #f7f8fa; --accent: #2458c6;
  --good: #1f8a3a; --bad: #c62828; --skip: #7a7a7a; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
header { background: #1d2330; color: #fff; padding: .6rem 1.4rem; display: flex; gap: 1.4rem;
  align-items: baseline; }
header a { color: #fff; text-decoration: none; font-weight: 600; }
header nav a { font-weight: 400; opacity: .85; margin-right: 1rem; }
main { max-width: 1180px; margin: 1.2rem auto; padding: 0 1.4rem; }
h1 { font-size: 1.35rem; margin: .2rem 0 .4rem; }
h2 { font-size: 1.1rem; margin: 1.6rem 0 .5rem; }
.dim { color: var(--dim); }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.2rem;
  margin: .8rem 0; }
.card.flush { padding: 0; }
.answer { font-size: 1.05rem; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--dim); }
tr:hover td { background: #f1f4fa; }
code, .hash { font: 13px/1.3 ui-monospace, monospace; }
.badge { display: inline-block; padding: .05rem .5rem; border-radius: 999px; font-size: .8rem;
  background: #e8ebf1; white-space: nowrap; }
.nowrap { white-space: nowrap; }
.badge.good { background: #dcefe1; color: var(--good); }
.badge.bad { background: #f8dddd; color: var(--bad); }
.badge.running { background: #dde7f8; color: var(--accent); }
.badge.warn { background: #fbe9c9; color: #8a5a00; }
a.job { display: inline-block; max-width: 15rem; overflow: hidden; white-space: nowrap;
  text-overflow: ellipsis; vertical-align: bottom; }
a.job.stage { padding-left: 1rem; }
.what { display: inline-block; max-width: 25rem; overflow: hidden; white-space: nowrap;
  text-overflow: ellipsis; vertical-align: bottom; }  /* one line a job: whole on hover */
dl.parts { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem;
  margin: .6rem 0 0; font-size: .95rem; }
dl.parts dt { color: var(--dim); }
dl.parts dd { margin: 0; }
.bar { display: flex; gap: .6rem; align-items: center; margin: .2rem 0; }
.bar .who { width: 16rem; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.bar .track { flex: 1; height: .75rem; appearance: none; border: 0; border-radius: 4px;
  background: var(--line); }
.bar .track::-webkit-progress-bar { background: var(--line); border-radius: 4px; }
.bar .track::-webkit-progress-value { background: var(--accent); border-radius: 4px; }
.bar .track::-moz-progress-bar { background: var(--accent); border-radius: 4px; }
.bar .p { width: 3.5rem; text-align: right; }
img.plot { max-width: 100%; background: #fff; border: 1px solid var(--line); border-radius: 8px; }
input[type=search] { width: 22rem; padding: .35rem .6rem; border: 1px solid var(--line);
  border-radius: 6px; font: inherit; }
pre { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: .8rem;
  overflow-x: auto; font: 13px/1.35 ui-monospace, monospace; }
.report table { font-size: .9rem; }
details summary { cursor: pointer; color: var(--accent); }
pre.note { white-space: pre-wrap; }  /* a note to paste: wrapped, never scrolled */
"""

# Live updates: the server-rendered #live section fetched again every few seconds and put
# in place (a page without JavaScript shows the same, reloaded by hand).
LIVE_JS = """
(function () {
  var live = document.getElementById("live");
  if (!live || !live.dataset.url) { return; }
  var last = null;  // the text last fetched (the DOM's own serialisation differs)
  function tick() {
    fetch(live.dataset.url, {headers: {"Accept": "text/html"}}).then(function (r) {
      return r.ok ? r.text() : null;
    }).then(function (html) {
      if (html !== null && html !== last) { last = html; live.innerHTML = html; }
      // ended while watched: the page again, with the report the live part leaves out
      if (live.querySelector("[data-done]")) { location.reload(); } else { setTimeout(tick, 3000); }
    }).catch(function () { setTimeout(tick, 6000); });
  }
  if (!live.querySelector("[data-done]")) { setTimeout(tick, 3000); }
})();
"""

FILTER_JS = """
(function () {
  var box = document.getElementById("filter");
  if (!box) { return; }
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    document.querySelectorAll("tbody tr").forEach(function (row) {
      row.hidden = q && row.textContent.toLowerCase().indexOf(q) < 0;
    });
  });
})();
"""

# The page's one script, as the page carries it.
SCRIPT = LIVE_JS + FILTER_JS


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# What a page may load or run: its own stylesheet and script (by their hashes: no style
# attribute, no other inline code), pictures and the live part from this origin, nothing
# from anywhere else (an image a commit subject names), and never inside another's frame.
PAGE_CSP = (
    f"default-src 'none'; style-src {_sha256(CSS)}; script-src {_sha256(SCRIPT)}; "
    "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)

# Reports hold no picture: an image, escaped or not, is never drawn (nor fetched).
_MD = MarkdownIt("commonmark", {"html": False}).enable("table").disable("image")
# The report folds its shared-kernel commits in <details>: put back exactly that markup
# (markdown's HTML is off; the text between stays escaped).
_FOLD = re.compile(r"<p>&lt;details&gt;&lt;summary&gt;([^&<]*)&lt;/summary&gt;</p>")


def markdown(text: str) -> str:
    """A report's markdown as HTML: raw HTML in it is shown as text, never run."""
    rendered = _FOLD.sub(r"<details><summary>\1</summary>", _MD.render(text))
    return rendered.replace("<p>&lt;/details&gt;</p>", "</details>")


def esc(text: object) -> str:
    return escape(str(text), quote=True)


# Each word a badge shows, by its tone; a word ending in "-ing" is work under way (running)
GOOD = frozenset(
    "good found completed same done confirmed verified explained fixed remains "
    "already-there not-affected sweep-done".split()
)
BAD = frozenset(
    "bad failed changed contradicted error terminated timed-out broken refused "
    "not-verified does-not-apply".split()
)
WARN = frozenset(
    "blocked ambiguous no-difference inconclusive cancelled canceled cannot-tell undecided skip "
    "unexplained no-effect vanishes not-measured".split()
)


STAGES = frozenset(
    v for k, v in vars(StageName).items() if not k.startswith("_") and isinstance(v, str)
)


def tone(word: str) -> str:
    """good, bad, warn or running: a badge's colour; "" for a word none of them names."""
    # an investigation's word is "investigation" and the stage it runs, or how it ended
    key = re.sub(r"[\s_]+", "-", word.strip().lower().removeprefix(STATUS_HEAD))
    if re.sub(r"-\d+$", "", key) in STAGES:  # sweep --bisect's "bisect-2"
        return "running"
    for name, words in (("good", GOOD), ("bad", BAD), ("warn", WARN)):
        if key in words:
            return name
    return "running" if key.endswith("ing") or key == "continued-as-new" else ""


def badge(word: str) -> str:
    return f'<span class="badge {tone(word)}">{esc(word)}</span>'


def table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Cells are HTML already (escape text with esc())."""
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def page(title: str, body: str, base: str) -> str:
    """A whole page; `base`: where the results pages are mounted ('/kbisect')."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)} · kbisect</title><style>{CSS}</style></head><body>"
        f"<header><a href='{base}/'>kbisect</a><nav><a href='{base}/'>jobs</a>"
        f"<a href='{base}/series'>series watches</a></nav></header>"
        f"<main>{body}</main><script>{SCRIPT}</script></body></html>"
    )
