"""One command grammar for every door (chat, GitLab notes): words and key=value pairs,
parsed into a Command that the actions turn into the CLI's own checked request. Text is
split on whitespace and never reaches a shell; a word with a character outside the
grammar's, an unknown key, a bad value or a revision that starts with '-' is refused in
one line that says what to write instead.

    bisect tree=NAME good=REV bad=REV testcase=NAME [mode=fix] [profile=P]
           [repetitions=N] [parallel=K] [metric=M] [flaky=yes] [duets=yes]
    status [JOB] | cancel JOB | report JOB | explain JOB | sru JOB [series=S] [bug=N] [branch=B]
    backport JOB target=REV
    mark JOB REV good|bad|skip | testcases | help
"""

import re
from dataclasses import dataclass, field

from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.jobs.request import JobOptions

# What a word may hold: git revision syntax (HEAD~2, v6.1^), names, numbers. Nothing a
# shell would read (; & | $ ` < > ( ) ' " \ * ? [ ] { } ! #), no whitespace escapes.
WORD = re.compile(r"[A-Za-z0-9._/~^@+:,=-]+")
JOB = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
MAX_WORDS = 32
MAX_LENGTH = 1000
MAX_COMMANDS = 5  # in one note or message: one note must not make hundreds of replies

BISECT_KEYS = ("tree", "good", "bad", "testcase", "mode", "profile", "repetitions", "parallel")
SWITCHES = ("flaky", "duets")  # yes or no
BISECT_EXTRA = ("metric", *SWITCHES)
YES, NO = ("yes", "true"), ("no", "false")
SRU_KEYS = ("series", "bug", "branch")
NUMBER_KEYS = {"repetitions", "parallel", "bug"}
REPEATABLE = {"good"}
USAGE = {
    "bisect": "bisect tree=NAME good=REV bad=REV testcase=NAME [mode=fix] [profile=P] "
    "[repetitions=N] [parallel=K] [metric=M] [flaky=yes] [duets=yes]",
    "status": "status [JOB]",
    "cancel": "cancel JOB",
    "report": "report JOB",
    "explain": "explain JOB",
    "backport": "backport JOB target=REV",
    "sru": "sru JOB [series=jammy] [bug=N] [branch=B]",
    "mark": "mark JOB REV good|bad|skip",
    "testcases": "testcases",
    "help": "help",
}


@dataclass
class Command:
    verb: str
    job: str | None = None
    rev: str | None = None
    verdict: str | None = None
    keys: dict[str, list[str]] = field(default_factory=dict)

    def one(self, key: str) -> str | None:
        values = self.keys.get(key)
        return values[-1] if values else None

    def options(self) -> JobOptions:
        """A bisect command as the CLI's job options (then checked the same way)."""
        good = [g for value in self.keys["good"] for g in value.split(",") if g]
        return JobOptions(
            good=good,
            bad=self.one("bad") or "",
            testcase=self.one("testcase") or "",
            tree=self.one("tree"),
            mode=self.one("mode") or Mode.REGRESSION.value,
            profile=self.one("profile"),
            repetitions=_int(self.one("repetitions")),
            parallel=_int(self.one("parallel")) or 1,
            metric=self.one("metric"),
            flaky=self.switch("flaky"),
            duets=self.switch("duets"),
        )

    def switch(self, key: str) -> bool:
        return (self.one(key) or "no").lower() in YES


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


def help_text() -> str:
    return "commands: " + "; ".join(USAGE.values())


def parse(text: str) -> Command:
    """The command in text (the door's prefix already removed)."""
    if len(text) > MAX_LENGTH:
        raise UserError(f"refused: a command is at most {MAX_LENGTH} characters")
    words = text.split()
    if not words:
        raise UserError(f"refused: no command; {help_text()}")
    if len(words) > MAX_WORDS:
        raise UserError(f"refused: at most {MAX_WORDS} words in a command")
    verb, rest = words[0].lower(), words[1:]
    if verb not in USAGE:
        raise UserError(f"refused: unknown command {verb[:40]!r}; {help_text()}")
    for w in rest:
        _check_word(w)
    positional = [w for w in rest if "=" not in w]
    pairs = [w for w in rest if "=" in w]
    if verb == "bisect":
        return _bisect(positional, pairs)
    if verb == "sru":
        cmd = _positional(verb, positional, 1, 1)
        cmd.keys = _keys(verb, pairs, SRU_KEYS)
        return cmd
    if verb == "backport":
        cmd = _positional(verb, positional, 1, 1)
        cmd.keys = _keys(verb, pairs, ("target",))
        if "target" not in cmd.keys:
            raise UserError(f"refused: backport needs target=REV; write: {USAGE[verb]}")
        return cmd
    if pairs:
        raise UserError(f"refused: {verb} takes no key=value; write: {USAGE[verb]}")
    if verb == "status":
        return _positional(verb, positional, 0, 1)
    if verb == "mark":
        cmd = _positional(verb, positional, 3, 3)
        cmd.rev, cmd.verdict = positional[1], positional[2].lower()
        if cmd.verdict not in ("good", "bad", "skip"):
            raise UserError(f"refused: mark takes good, bad or skip, not {cmd.verdict!r}")
        _check_value("revision", cmd.rev)
        return cmd
    if verb in ("cancel", "report", "explain"):
        return _positional(verb, positional, 1, 1)
    return _positional(verb, positional, 0, 0)


def _check_word(word: str) -> None:
    if not WORD.fullmatch(word):
        bad = next(c for c in word if not WORD.fullmatch(c))
        raise UserError(
            f"refused: {bad!r} is not allowed in a command (kbisect runs no shell); write "
            "revisions as hashes, tags or branch names and options as key=value"
        )
    if word.startswith("-"):
        raise UserError(f"refused: {word!r}: options are written key=value here, e.g. mode=fix")


def _check_value(key: str, value: str) -> None:
    if not value:
        raise UserError(f"refused: {key}= has no value")
    if value.startswith("-"):
        raise UserError(
            f"refused: {key}={value} starts with '-': give a commit hash, tag or branch name"
        )


def _positional(verb: str, words: list[str], least: int, most: int) -> Command:
    if not least <= len(words) <= most:
        raise UserError(f"refused: write: {USAGE[verb]}")
    cmd = Command(verb=verb)
    if words:
        if not JOB.fullmatch(words[0]):
            raise UserError(f"refused: {words[0]!r} is not a job id; 'status' lists them")
        cmd.job = words[0]
    return cmd


def _keys(verb: str, pairs: list[str], allowed: tuple[str, ...]) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        key = key.lower()
        if key not in allowed:
            known = " ".join(f"{k}=" for k in allowed)
            raise UserError(f"refused: unknown key {key!r} for {verb}; write one of {known}")
        _check_value(key, value)
        if key in NUMBER_KEYS and not value.isdigit():
            raise UserError(f"refused: {key}={value}: give a whole number, e.g. {key}=3")
        if key in keys and key not in REPEATABLE:
            raise UserError(f"refused: {key}= given twice")
        for part in value.split(",") if key in REPEATABLE else []:
            _check_value(key, part)
        keys.setdefault(key, []).append(value)
    return keys


def _bisect(positional: list[str], pairs: list[str]) -> Command:
    if positional:
        raise UserError(f"refused: {positional[0]!r} is not key=value; write: {USAGE['bisect']}")
    keys = _keys("bisect", pairs, BISECT_KEYS + BISECT_EXTRA)
    missing = [k for k in ("tree", "good", "bad", "testcase") if k not in keys]
    if missing:
        given = " ".join(f"{k}=..." for k in missing)
        raise UserError(f"refused: bisect needs {given}; write: {USAGE['bisect']}")
    mode = keys.get("mode", [Mode.REGRESSION.value])[-1]
    if mode not in tuple(Mode):
        raise UserError(f"refused: mode={mode}: write mode=regression or mode=fix")
    for key in SWITCHES:
        value = keys.get(key, ["no"])[-1].lower()
        if value not in YES + NO:
            raise UserError(f"refused: {key}={value[:20]}: write {key}=yes or {key}=no")
    return Command(verb="bisect", keys=keys)
