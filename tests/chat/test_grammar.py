"""The doors' command grammar: what parses, and one-line refusals for everything else."""

import pytest

from kbisect.doors.grammar import help_text, parse
from kbisect.errors import UserError
from kbisect.jobs.investigation import Chain

BISECT = "bisect tree=lab good=lab-good bad=lab-bad testcase=nvme-snapshot-read"


def test_bisect_becomes_the_clis_job_options() -> None:
    cmd = parse(f"{BISECT} mode=fix profile=ebs-gp2 repetitions=3 parallel=2 metric=throughput")
    opts = cmd.options()
    assert (opts.tree, opts.repo, opts.good, opts.bad) == ("lab", None, ["lab-good"], "lab-bad")
    assert (opts.testcase, opts.mode, opts.profile) == ("nvme-snapshot-read", "fix", "ebs-gp2")
    assert (opts.repetitions, opts.parallel, opts.metric) == (3, 2, "throughput")


def test_a_testcase_kind_with_its_arguments_from_chat() -> None:
    cmd = parse(BISECT.replace("nvme-snapshot-read", "hackbench:pipe:8"))
    assert cmd.options().testcase == "hackbench:pipe:8"
    with pytest.raises(UserError):
        parse(BISECT.replace("nvme-snapshot-read", "stress-ng:$(id)"))


@pytest.mark.parametrize("key", ["flaky", "duets"])
def test_a_flaky_pass_fail_job_or_one_in_duets_from_chat(key: str) -> None:
    assert getattr(parse(f"{BISECT} {key}=yes").options(), key)
    assert not getattr(parse(BISECT).options(), key)
    assert not getattr(parse(f"{BISECT} {key}=no").options(), key)
    with pytest.raises(UserError, match=f"write {key}=yes or {key}=no"):
        parse(f"{BISECT} {key}=maybe")


def test_bisect_asks_the_clis_chain_of_stages() -> None:
    """cross-tree=, target=, explain= and kernels= as --cross-tree, --target, --explain /
    --no-explain and --kernels (then planned and checked by the CLI's own plan)."""
    cmd = parse(f"{BISECT} cross-tree=yes target=ubuntu/jammy~2 explain=no")
    assert cmd.chain() == Chain(cross_tree=True, kernels="", explain=False, target="ubuntu/jammy~2")
    assert parse(f"{BISECT} explain=yes").chain().explain is True  # a counter's too
    assert parse(BISECT).chain() == Chain()  # the CLI's defaults: a timing's explained
    kernels = "linux-image-6.1.0-1-amd64,linux-image-6.1.0-2-amd64"
    cmd = parse(f"bisect kernels={kernels} testcase=t")
    assert cmd.chain().kernels == kernels and (cmd.options().good, cmd.options().bad) == ([], "")
    assert cmd.options().tree is None
    mapped = "kernels=linux-image-6.1.0-1-amd64=v6.1,linux-image-6.1.0-2-amd64=v6.1.1"
    cmd = parse(f"bisect tree=lab {mapped} testcase=t target=v6.2")
    assert cmd.chain().kernels == mapped.removeprefix("kernels=") and cmd.options().tree == "lab"


def test_several_goods_and_git_revision_syntax() -> None:
    cmd = parse("bisect tree=lab good=v6.1~3,abc123 good=v6.0^ bad=HEAD~1 testcase=t")
    assert cmd.options().good == ["v6.1~3", "abc123", "v6.0^"]
    assert cmd.options().bad == "HEAD~1"


@pytest.mark.parametrize(
    ("text", "job", "rev", "verdict"),
    [
        ("status", None, None, None),
        ("STATUS bisect-x-1234", "bisect-x-1234", None, None),
        ("cancel bisect-x-1", "bisect-x-1", None, None),
        ("report bisect-x-1", "bisect-x-1", None, None),
        ("explain bisect-x-1", "bisect-x-1", None, None),
        ("mark bisect-x-1 abc123 Good", "bisect-x-1", "abc123", "good"),
        ("testcases", None, None, None),
        ("help", None, None, None),
    ],
)
def test_other_commands(text: str, job: str | None, rev: str | None, verdict: str | None) -> None:
    cmd = parse(text)
    assert (cmd.verb, cmd.job, cmd.rev, cmd.verdict) == (text.split()[0].lower(), job, rev, verdict)


def test_sru_takes_its_keys() -> None:
    cmd = parse("sru bisect-x-1 series=jammy bug=2012345 branch=sru/fix")
    assert cmd.job == "bisect-x-1"
    assert (cmd.one("series"), cmd.one("bug"), cmd.one("branch")) == ("jammy", "2012345", "sru/fix")


def test_backport_takes_a_target() -> None:
    cmd = parse("backport bisect-x-1 target=ubuntu/jammy~2")
    assert (cmd.verb, cmd.job, cmd.one("target")) == ("backport", "bisect-x-1", "ubuntu/jammy~2")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no command"),
        ("backport bisect-x-1", "backport needs target=REV"),
        ("backport bisect-x-1 target=-x", "starts with '-'"),
        ("backport bisect-x-1 target=$(id)", "'$' is not allowed"),
        ("rm -rf /", "unknown command 'rm'"),
        (f"{BISECT}; reboot", "';' is not allowed"),
        ("bisect tree=lab good=$(reboot) bad=x testcase=t", "'$' is not allowed"),
        ("bisect tree=lab good=`id` bad=x testcase=t", "'`' is not allowed"),
        ("bisect tree=lab good=a|b bad=x testcase=t", "'|' is not allowed"),
        ("bisect tree=lab good=a&&b bad=x testcase=t", "'&' is not allowed"),
        ("bisect tree=lab good=a>b bad=x testcase=t", "'>' is not allowed"),
        ("bisect tree=lab good='a' bad=x testcase=t", '"\'" is not allowed'),
        ("bisect tree=lab good=a\\nb bad=x testcase=t", "'\\\\' is not allowed"),
        (f"{BISECT} colour=red", "unknown key 'colour' for bisect; write one of tree="),
        (f"{BISECT} repo=/etc", "unknown key 'repo'"),
        ("bisect tree=lab good=--upload-pack=x bad=x testcase=t", "starts with '-'"),
        ("bisect tree=lab good=ok,-x bad=x testcase=t", "starts with '-'"),
        ("bisect tree=lab good=a bad=-x testcase=t", "starts with '-'"),
        ("mark bisect-x-1 -abc good", "options are written key=value"),
        ("bisect --tree lab", "options are written key=value"),
        (f"{BISECT} repetitions=three", "give a whole number"),
        (f"{BISECT} mode=sideways", "mode=regression or mode=fix"),
        (f"{BISECT} bad=y", "bad= given twice"),
        ("bisect tree=lab good=a", "bisect needs bad=... testcase=..."),
        ("bisect tree=lab good= bad=x testcase=t", "good= has no value"),
        (f"{BISECT} extra", "'extra' is not key=value"),
        ("mark bisect-x-1 abc maybe", "good, bad or skip"),
        ("cancel", "write: cancel JOB"),
        ("status a b", "write: status [JOB]"),
        ("report ../../etc", "is not a job id"),
        ("status x=1", "status takes no key=value"),
        ("sru bisect-x-1 signoff=me", "unknown key 'signoff' for sru"),
        ("bisect " + "x=1 " * 40, "at most 32 words"),
        (f"{BISECT} cross-tree=maybe", "write cross-tree=yes or cross-tree=no"),
        (f"{BISECT} explain=sometimes", "write explain=yes or explain=no"),
        (f"{BISECT} target=-x", "starts with '-'"),
        (f"{BISECT} target=a target=b", "target= given twice"),
        ("bisect tree=lab good=a,b bad=c testcase=t cross-tree=yes", "takes one good="),
        ("bisect kernels=/etc/shadow,/boot/vmlinuz testcase=t", "not a Debian linux-image-*"),
        ("bisect kernels=../k.deb,linux-image-a testcase=t", "not a Debian linux-image-*"),
        ("bisect kernels=linux-image-a testcase=t", "at least two kernels"),
        ("bisect kernels=linux-image-a,linux-image-a testcase=t", "names a kernel twice"),
        ("bisect kernels=linux-image-a=v1,linux-image-b tree=lab testcase=t", "or none"),
        ("bisect kernels=linux-image-a=-x,linux-image-b=v2 tree=lab testcase=t", "revision"),
        ("bisect kernels=linux-image-a,linux-image-b good=v1 testcase=t", "drop good= bad="),
        ("bisect kernels=linux-image-a,linux-image-b testcase=t cross-tree=yes", "drop kernels="),
        ("bisect kernels=linux-image-a,linux-image-b tree=lab testcase=t", "K1=REV1"),
        ("bisect kernels=linux-image-a,linux-image-b testcase=t target=v2", "target= needs"),
        ("bisect kernels=linux-image-a=v1,linux-image-b=v2 testcase=t", "needs tree=..."),
        ("bisect kernels=linux-image-a,linux-image-b", "bisect needs testcase=..."),
    ],
)
def test_refusals_are_one_line(text: str, says: str) -> None:
    with pytest.raises(UserError) as exc:
        parse(text)
    message = str(exc.value)
    assert says in message, message
    assert message.startswith("refused: ") and "\n" not in message


def test_help_lists_every_command() -> None:
    text = help_text()
    verbs = ("bisect", "status", "cancel", "report", "explain", "sru", "mark", "testcases",
             "backport")  # fmt: skip
    for verb in (*verbs, "help"):
        assert verb in text
    for key in ("cross-tree=yes", "kernels=K1,K2", "target=REV", "explain=yes|no"):
        assert key in text
