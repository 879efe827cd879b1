"""One command grammar for every door (chat, GitLab notes): words and key=value pairs,
parsed into a Command that the actions turn into the CLI's own checked request. Text is
split on whitespace and never reaches a shell; a word with a character outside the
grammar's, an unknown key, a bad value or a revision that starts with '-' is refused in
one line that says what to write instead.

    bisect tree=NAME good=REV bad=REV testcase=NAME [mode=fix] [profile=P]
           [repetitions=N] [parallel=K] [metric=M] [flaky=yes] [duets=yes]
           [cross-tree=yes] [target=REV] [explain=yes|no]
    bisect kernels=K1,K2,... testcase=NAME [...]        (prebuilt kernels, no tree)
    bisect tree=NAME kernels=K1=REV1,K2=REV2,... testcase=NAME [target=REV] [...]
    bisect from-report [dry-run=yes] [tree=NAME] [good=REV] [...]   (answering an LKP mail)
    status [JOB] | cancel JOB | report JOB [email=yes] | explain JOB
    sru JOB [series=S] [bug=N] [branch=B]
    backport JOB target=REV
    test JOB                  (answering a patch: the job's bad endpoint with it, measured)
    mark JOB REV good|bad|skip | testcases | help

`bisect` starts an investigation, as `kbisect bisect` does: cross-tree=yes checks the
distro endpoint's merge base first (--cross-tree), kernels= bisects prebuilt kernels first
(--kernels), target=REV backports the named change to REV and measures it there
(--target), explain=no leaves a timing's culprit unexplained (--no-explain) and explain=yes
explains a counter's too (--explain). The investigation's own checks are the CLI's
(kbisect.jobs.investigation.plan); the combinations the CLI refuses in its options' words
are refused here first in the door's. kernels= takes Debian linux-image-* package names
only: a file named from a chat would be a path on the door's host, which a chat user
must not probe or have booted (the CLI takes .deb and vmlinuz files).

`bisect from-report` takes its fields from an LKP report mail (kbisect.reports.lkp_job, as
`kbisect bisect --from-report`): the door hands the mail's text to the command (pasted
below it, or the message it answers); what the command gives wins, and dry-run=yes only
shows the fields.

`test JOB` answers a patch (a file uploaded to the door, a message, or pasted below the
command): the bisection's bad endpoint with the patch on it is measured beside the bad
endpoint and the good one, one sweep (`kbisect sweep BAD BAD GOOD --patch 2=FILE`), so its
pairs say whether the patch changes the bad kernel and whether it then reads as the good.

`report JOB email=yes` is `kbisect report JOB --email`: the bisection's answer as a mail
in the kernel lists' form, for the person to send (kbisect.reports.email_report).
"""

import re
from dataclasses import dataclass, field

from kbisect.builders.prebuilt import PACKAGE_RE
from kbisect.contract import Mode
from kbisect.errors import UserError
from kbisect.jobs.investigation import Chain
from kbisect.jobs.request import JobOptions

# What a word may hold: git revision syntax (HEAD~2, v6.1^), names, numbers. Nothing a
# shell would read (; & | $ ` < > ( ) ' " \ * ? [ ] { } ! #), no whitespace escapes.
WORD = re.compile(r"[A-Za-z0-9._/~^@+:,=-]+")
JOB = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
MAX_WORDS = 32
MAX_LENGTH = 1000
MAX_COMMANDS = 5  # in one note or message: one note must not make hundreds of replies

BISECT_KEYS = ("tree", "good", "bad", "testcase", "mode", "profile", "repetitions", "parallel")
SWITCHES = ("flaky", "duets", "cross-tree", "explain")  # yes or no
FROM_REPORT = "from-report"  # `bisect from-report`: the fields from the mail it answers
REPORT_SWITCHES = ("dry-run",)  # with from-report only: show the fields, start nothing
CHAIN_KEYS = ("kernels", "target")  # the investigation's stages beyond the bisection
BISECT_EXTRA = ("metric", *SWITCHES, *CHAIN_KEYS)
YES, NO = ("yes", "true"), ("no", "false")
SRU_KEYS = ("series", "bug", "branch")
REPORT_KEYS = ("email",)  # yes or no: the mail (kbisect report --email) or the markdown
NUMBER_KEYS = {"repetitions", "parallel", "bug"}
REPEATABLE = {"good"}
USAGE = {
    "bisect": "bisect tree=NAME good=REV bad=REV testcase=NAME [mode=fix] [profile=P] "
    "[repetitions=N] [parallel=K] [metric=M] [flaky=yes] [duets=yes] [cross-tree=yes] "
    "[target=REV] [explain=yes|no] (or kernels=K1,K2,... of linux-image-* packages in place of "
    "tree, good and bad; with tree=NAME, kernels=K1=REV1,K2=REV2,...; or from-report "
    "[dry-run=yes] answering an LKP report mail, which gives what the command does not)",
    "status": "status [JOB]",
    "cancel": "cancel JOB",
    "report": "report JOB [email=yes]",
    "explain": "explain JOB",
    "backport": "backport JOB target=REV",
    "test": "test JOB (as a reply to a patch, or with the patch pasted below)",
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
    from_report: bool = False  # `bisect from-report`: the rest from the mail it answers

    def one(self, key: str) -> str | None:
        values = self.keys.get(key)
        return values[-1] if values else None

    def options(self) -> JobOptions:
        """A bisect command as the CLI's job options (then checked the same way)."""
        good = [g for value in self.keys.get("good", []) for g in value.split(",") if g]
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

    def chain(self) -> Chain:
        """A bisect command's stages beyond the bisection, as the CLI's --cross-tree,
        --kernels, --target and --explain / --no-explain (then planned and checked the same
        way): explain=yes explains a counter's culprit too, explain=no none, and without it
        a timing's only."""
        explain = self.one("explain")
        return Chain(
            cross_tree=self.switch("cross-tree"),
            kernels=self.one("kernels") or "",
            explain=None if explain is None else explain.lower() in YES,
            target=self.one("target") or "",
        )

    def switch(self, key: str) -> bool:
        return (self.one(key) or "no").lower() in YES

    @property
    def answers(self) -> bool:
        """It reads what it answers: a report mail (`bisect from-report`), a patch (`test`)."""
        return self.from_report or self.verb == "test"


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
    if verb == "report":
        cmd = _positional(verb, positional, 1, 1)
        cmd.keys = _keys(verb, pairs, REPORT_KEYS)
        _check_switches(cmd.keys, REPORT_KEYS)
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
    if verb in ("cancel", "explain", "test"):
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
    from_report = positional[:1] == [FROM_REPORT]
    if positional[from_report:]:
        word = positional[from_report]
        raise UserError(f"refused: {word!r} is not key=value; write: {USAGE['bisect']}")
    keys = _keys("bisect", pairs, BISECT_KEYS + BISECT_EXTRA + REPORT_SWITCHES * from_report)
    if from_report:
        return _from_report(keys)
    mapped = _kernels(keys["kernels"][-1]) if "kernels" in keys else None
    needed = ["testcase"] if mapped is not None else ["tree", "good", "bad", "testcase"]
    if mapped:  # each kernel's revision is the tree's
        needed.insert(0, "tree")
    missing = [k for k in needed if k not in keys]
    if missing:
        given = " ".join(f"{k}=..." for k in missing)
        raise UserError(f"refused: bisect needs {given}; write: {USAGE['bisect']}")
    mode = keys.get("mode", [Mode.REGRESSION.value])[-1]
    if mode not in tuple(Mode):
        raise UserError(f"refused: mode={mode}: write mode=regression or mode=fix")
    _check_switches(keys, SWITCHES)
    if mapped is not None:
        _check_kernels(keys, mapped)
    cmd = Command(verb="bisect", keys=keys)
    if cmd.switch("cross-tree") and mode == Mode.REGRESSION and len(cmd.options().good) > 1:
        raise UserError("refused: cross-tree=yes takes one good= (the distro kernel that was good)")
    return cmd


def _from_report(keys: dict[str, list[str]]) -> Command:
    """`bisect from-report [key=value ...]`: the keys given win over the mail's fields, which
    are checked once the door has the mail (kbisect.reports.lkp_job)."""
    if "kernels" in keys:
        raise UserError("refused: from-report bisects the report's commits: drop kernels=")
    mode = keys.get("mode", [Mode.REGRESSION.value])[-1]
    if mode not in tuple(Mode):
        raise UserError(f"refused: mode={mode}: write mode=regression or mode=fix")
    _check_switches(keys, SWITCHES + REPORT_SWITCHES)
    return Command(verb="bisect", keys=keys, from_report=True)


def _check_switches(keys: dict[str, list[str]], switches: tuple[str, ...]) -> None:
    for key in switches:
        value = keys.get(key, ["no"])[-1].lower()
        if value not in YES + NO:
            raise UserError(f"refused: {key}={value[:20]}: write {key}=yes or {key}=no")


def _kernels(value: str) -> bool:
    """Whether kernels=K1,K2,... maps each kernel to its revision (K=REV); refused unless
    each is a Debian linux-image-* package name (a file is the command line's), at least
    two, none twice, and all mapped or none."""
    items = [part.partition("=") for part in value.split(",")]
    for spec, sep, rev in items:
        if not PACKAGE_RE.match(spec):
            raise UserError(
                f"refused: kernels=: {spec[:60]!r} is not a Debian linux-image-* package name "
                "(kbisect takes kernel files on the command line only)"
            )
        if sep and (not rev or rev.startswith("-")):
            raise UserError(
                f"refused: kernels=: {spec}={rev[:20]}: give the kernel's revision, a commit "
                "hash, tag or branch name"
            )
    if len(items) < 2:
        raise UserError("refused: kernels= needs at least two kernels, oldest first: K1,K2")
    if len({spec for spec, _, _ in items}) != len(items):
        raise UserError("refused: kernels= names a kernel twice")
    mapped = [bool(sep) for _, sep, _ in items]
    if any(mapped) and not all(mapped):
        raise UserError("refused: kernels=: map every kernel to its revision (K=REV), or none")
    return all(mapped)


def _check_kernels(keys: dict[str, list[str]], mapped: bool) -> None:
    """kernels= with the rest of a bisect command: what the CLI's --kernels refuses, in the
    door's words (the first kernel is the old side; revisions are the tree's)."""
    if "good" in keys or "bad" in keys:
        raise UserError("refused: kernels= takes the first kernel as the old side: drop good= bad=")
    if "cross-tree" in keys and keys["cross-tree"][-1].lower() in YES:
        raise UserError("refused: cross-tree=yes bisects revisions of one tree: drop kernels=")
    if not mapped and "tree" in keys:
        raise UserError(
            "refused: kernels= with tree= maps each kernel to its revision there: write "
            "kernels=K1=REV1,K2=REV2,..."
        )
    if not mapped and "target" in keys:
        raise UserError(
            "refused: target= needs the commits bisected: give tree=NAME and map each kernel "
            "to its revision, kernels=K1=REV1,K2=REV2,..."
        )
