"""`kbisect tree add|list|fetch|remove`: named kernel trees (local mirrors) that a job can
give as `--tree NAME` (or `tree=NAME` in chat) instead of a repository path."""

import argparse

from kbisect.builders.trees import Trees
from kbisect.cli.output import note, out
from kbisect.contract import strict_json
from kbisect.reports.lines import columns
from kbisect.settings import Settings, redact


def cmd_add(args: argparse.Namespace, settings: Settings) -> int:
    trees = Trees(settings)
    trees.check_new(args.name, args.url, args.branch, args.web)  # refused before "fetching"
    url = redact(args.url)  # fetched with its credentials, printed without
    note(f"fetching {url} into tree {args.name} (a whole kernel history takes a while)")
    tree = trees.add(args.name, args.url, args.branch, args.web)
    branch = tree.branch or "all branches"
    out(f"added tree {tree.name}: {tree.shown_url} ({branch}) at {tree.path}")
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    trees = Trees(settings).all()
    if args.json:
        out(strict_json([t.to_json() for t in trees], indent=2))
    elif not trees:
        out("no trees yet: add one with 'kbisect tree add NAME URL'")
    else:
        rows = [(t.name, t.shown_url, t.branch or "*", str(t.path)) for t in trees]
        out(columns(("TREE", "URL", "BRANCH", "MIRROR"), rows))
    return 0


def cmd_fetch(args: argparse.Namespace, settings: Settings) -> int:
    trees = Trees(settings)
    for name in args.names or [t.name for t in trees.all()]:
        tree = trees.fetch(name)
        out(f"fetched tree {tree.name} from {tree.shown_url}")
    return 0


def cmd_remove(args: argparse.Namespace, settings: Settings) -> int:
    tree = Trees(settings).remove(args.name)
    out(f"removed tree {tree.name} ({tree.path})")
    return 0


def add_commands(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    t = sub.add_parser("tree", help="named kernel trees: local mirrors a job can name")
    tsub = t.add_subparsers(dest="tree_command", required=True, metavar="ACTION")

    a = tsub.add_parser("add", help="mirror a git URL under a name and fetch it")
    a.add_argument("name", help="the tree's name, e.g. linux-6.1 (lower case, digits, . _ -)")
    a.add_argument("url", help="where to fetch from: git://, http(s)://, ssh://, file:// or a path")
    a.add_argument("--branch", help="follow only this branch (default: all), plus tags")
    a.add_argument(
        "--web",
        metavar="URL",
        help="a web view of a commit, {hash} where its hash goes (e.g. "
        "'https://git.kernel.org/linus/{hash}'): the results pages link each commit there "
        "(default: none)",
    )
    a.set_defaults(func=cmd_add)

    ls = tsub.add_parser("list", help="the trees, their URLs and mirrors")
    ls.add_argument("--json", action="store_true", help="a JSON list on stdout")
    ls.set_defaults(func=cmd_list)

    f = tsub.add_parser("fetch", help="bring trees up to date (jobs also fetch before starting)")
    f.add_argument("names", nargs="*", metavar="NAME", help="the trees (default: all)")
    f.set_defaults(func=cmd_fetch)

    r = tsub.add_parser("remove", help="delete a tree's mirror")
    r.add_argument("name", help="the tree's name")
    r.set_defaults(func=cmd_remove)
