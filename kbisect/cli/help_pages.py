"""Each command's `--help`: what it does (the help its parent lists it with), an example
(EXAMPLES: the suite parses each, so none goes stale), and the placeholders docs/usage.md
writes (METAVARS, for an option that names none of its own)."""

import argparse
import textwrap

EXAMPLES = {
    "lab create": "kbisect lab create ~/kbisect-lab --commits 16 --culprit panic --seed 7",
    "try": "kbisect try --repo ~/linux --testcase nvme-snapshot-read v6.1",
    "testcases": "kbisect testcases --json",
    "testcase new": "kbisect testcase new my-hackbench --from hackbench:pipe:8",
    "testcase check": "kbisect testcase check my-hackbench --repo ~/linux --boots 5",
    "server": "kbisect server --port 7233",
    "worker": "kbisect worker --builds 2 --vms 1",
    "up": "kbisect up --builds 2 --vms 1",
    "down": "kbisect down",
    "bisect": "kbisect bisect --repo ~/linux --good v6.1 --bad v6.2 --testcase nvme-snapshot-read",
    "watch": "kbisect watch inv-nvme-snapshot-read-1a2b3c4d",
    "status": "kbisect status --limit 20",
    "cancel": "kbisect cancel inv-nvme-snapshot-read-1a2b3c4d",
    "report": "kbisect report inv-nvme-snapshot-read-1a2b3c4d --plot scores.png",
    "mark": "kbisect mark bisect-nvme-snapshot-read-1a2b3c4d HEAD~3 good",
    "resume": "kbisect resume bisect-nvme-snapshot-read-1a2b3c4d",
    "sweep": "kbisect sweep --repo ~/linux --testcase sched-pipe v6.1 v6.2 v6.3",
    "explain": "kbisect explain bisect-nvme-snapshot-read-1a2b3c4d --boots 5",
    "backport": "kbisect backport bisect-nvme-snapshot-read-1a2b3c4d --target ubuntu/jammy",
    "reproduce": "kbisect reproduce bisect-nvme-snapshot-read-1a2b3c4d ./repro",
    "series watch": (
        "kbisect series watch stable --tree stable --tags 'v6.6.*' --testcase sched-pipe"
    ),
    "series list": "kbisect series list --json",
    "series show": "kbisect series show stable",
    "series check": "kbisect series check stable",
    "series remove": "kbisect series remove stable",
    "gc": "kbisect gc --older-than 7 --dry-run",
    "tree add": (
        "kbisect tree add stable https://git.example.org/linux-stable.git --branch linux-6.6.y"
    ),
    "tree list": "kbisect tree list --json",
    "tree fetch": "kbisect tree fetch stable",
    "tree remove": "kbisect tree remove stable",
    "chat matrix": (
        "kbisect chat matrix --homeserver https://matrix.example.org --user @kbisect:example.org "
        "--password-file pw --room '!abc:example.org' --allow-user @you:example.org"
    ),
    "web": "kbisect web --listen 0.0.0.0:8080 --token-file token",
    "gitlab serve": (
        "kbisect gitlab serve --listen 127.0.0.1:9000 --url https://gitlab.example.org "
        "--token-file token --webhook-secret-file secret --allow-user you"
    ),
}

# a group of commands: its first command's
GROUPS = {
    "lab": "lab create",
    "testcase": "testcase new",
    "series": "series watch",
    "tree": "tree add",
    "chat": "chat matrix",
    "gitlab": "gitlab serve",
}
EXAMPLES |= {group: EXAMPLES[first] for group, first in GROUPS.items()}

# an option's placeholder as the docs write it, where its definition gives none
METAVARS = {
    "--boots": "N",
    "--max-boots": "N",
    "--limit": "N",
    "--repetitions": "N",
    "--commits": "N",
    "--builds": "N",
    "--vms": "N",
    "--culprit-at": "K",
    "--merges": "M",
    "--metric": "M",
    "--profile": "P",
    "--seed": "S",
    "--branch": "B",
    "--testcase": "NAME",
    "--tree": "NAME",
    "--repo": "DIR",
    "--modules": "DIR",
    "--kernel-rev": "REV",
    "--culprit-patch": "FILE",
    "--homeserver": "URL",
    "--user": "ID",
    "--port": "PORT",
    "--ui-port": "PORT",
    "--build-queue": "Q",
    "--control-queue": "Q",
    "--vm-queue": "Q",
}


def subcommands(
    parser: argparse.ArgumentParser, path: str = ""
) -> list[tuple[str, argparse.ArgumentParser, str]]:
    """(name path, parser, the help its parent lists it with) of every command below."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                here = f"{path} {name}".strip()
                found.append((here, sub, helps.get(name, "")))
                found += subcommands(sub, here)
    return found


def describe(parser: argparse.ArgumentParser) -> None:
    """Give every command its description, its example (EXAMPLES) and the docs'
    placeholders (METAVARS)."""
    for name, sub, help_text in subcommands(parser):
        for action in sub._actions:
            named = [METAVARS[o] for o in action.option_strings if o in METAVARS]
            if named and action.metavar is None and action.nargs != 0:
                action.metavar = named[0]
        if not sub.description:
            said = help_text[:1].upper() + help_text[1:]
            sub.description = textwrap.fill(said if said.endswith(".") else f"{said}.", 88)
        sub.epilog = f"example:\n  {EXAMPLES[name]}"
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
