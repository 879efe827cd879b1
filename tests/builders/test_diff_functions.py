"""The functions a commit's diff touches, read from a real git repository's C diff."""

from pathlib import Path

from kbisect.builders.diff_functions import changed_functions, functions_in
from kbisect.explain.layout import suggestion
from kbisect.infra.git import Git
from tests.conftest import git

BEFORE = """\
#include <linux/blk-mq.h>

static int nvme_setup_cmd(struct nvme_ns *ns, struct request *req)
{
\tint ret = 0;

\tif (req->cmd_flags & REQ_FUA)
\t\tret = 1;
\treturn ret;
}

static void nvme_unrelated(void)
{
\treturn;
}
"""
AFTER = """\
#include <linux/blk-mq.h>

static void nvme_pace_read(struct request *req,
\t\t\t   unsigned int ns)
{
\tudelay(ns);
}

static int nvme_setup_cmd(struct nvme_ns *ns, struct request *req)
{
\tint ret = 0;

\tif (req->cmd_flags & REQ_FUA)
\t\tret = 1;
\tnvme_pace_read(req, 30);
\treturn ret;
}

static void nvme_unrelated(void)
{
\treturn;
}
"""


def _commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", name)
    return git(repo, "rev-parse", "HEAD").strip()


def test_the_functions_a_commit_adds_or_changes_are_named(tmp_path: Path) -> None:
    repo = tmp_path / "kernel"
    repo.mkdir()
    git(repo, "init", "-q")
    parent = _commit(repo, "core.c", BEFORE)
    culprit = _commit(repo, "core.c", AFTER)
    docs = _commit(repo, "README", "a text file's lines are no functions (x)\n")
    assert changed_functions(Git(repo), parent, culprit) == ["nvme_pace_read", "nvme_setup_cmd"]
    assert changed_functions(Git(repo), culprit, docs) == []
    assert changed_functions(Git(repo), parent, docs) == ["nvme_pace_read", "nvme_setup_cmd"]


def test_calls_declarations_and_keywords_are_not_definitions() -> None:
    diff = "\n".join([
        "@@ -10,0 +11 @@ static int nvme_queue_rq(struct blk_mq_hw_ctx *hctx,",
        "+\tif (nvme_ready(ns))",
        "+int nvme_declared(void);",
        "+while (x) {",
        "+#define NVME_HELPER(x) (x)",
        "+++ b/drivers/nvme/host/core.c",
        "-static inline bool *nvme_gone(void)",
    ])  # fmt: skip
    assert functions_in(diff) == ["nvme_queue_rq", "nvme_gone"]


LABELLED = """\
static int nvme_submit(struct nvme_ns *ns, struct request *req)
{
\tint ret;

\tret = nvme_map(ns, req);
\tif (ret)
\t\tgoto out;
\tnvme_ring(ns);
out:
\tnvme_unmap(ns, req);
\treturn ret;
}
"""


def test_a_hunk_below_a_c_label_is_in_its_function(tmp_path: Path) -> None:
    repo = tmp_path / "kernel"
    repo.mkdir()
    git(repo, "init", "-q")
    parent = _commit(repo, "core.c", LABELLED)
    culprit = _commit(repo, "core.c", LABELLED.replace("\treturn ret;", "\treturn ret ?: 1;"))
    # git's default header for this hunk is "out:", which names no function
    touched = changed_functions(Git(repo), parent, culprit)
    assert touched == ["nvme_submit"]
    # so explain does not send the user to the alignment check for a culprit in its profile
    assert suggestion(touched, {"fio;nvme_submit;nvme_unmap": 90, "fio;memcpy": 10}, "j") == ""
