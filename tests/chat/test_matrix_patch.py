"""`!kbisect test JOB` on a real Synapse: sent as a reply to a patch uploaded as a file (from
the homeserver's own media, never a URL), the bot applies it to the job's bad endpoint and
starts the sweep that measures it beside both endpoints; a file over a patch's bound is
refused unfetched. The job service is the recording stand-in of test_matrix_hardening."""

from tests.chat.test_matrix_from_report import answer, send, upload
from tests.chat.test_matrix_hardening import BISECT, Room, room
from tests.conftest import git

__all__ = ["room"]  # the bot-in-a-room fixture, used here by name


def post_patch(room: Room, data: bytes, size: int | None = None) -> str:
    mxc = upload(room.alice, data, "fix.diff")
    info = {"mimetype": "text/x-diff", "size": len(data) if size is None else size}
    content = {"msgtype": "m.file", "body": "fix.diff", "url": mxc, "info": info}
    return send(room.alice, room.room, content)


def test_a_reply_to_an_uploaded_patch_measures_it_on_the_bad_end(room: Room) -> None:
    started = room.answer(room.alice.say(room.room, BISECT))
    job = started.split()[1].rstrip(":")
    # the lab's last commit added file c: its revert is the candidate fix
    revert = git(room.upstream, "diff", "master", "master^").encode()
    command = f"!kbisect test {job}"
    said = room.answer(answer(room.alice, room.room, post_patch(room, revert), command))
    assert said.startswith("started sweep-00000001: "), said
    (sweep,) = room.jobs.sweeps
    bad = room.jobs.started[-1].bad
    assert sweep.kernels[0] == bad and sweep.names[1] == f"bad {bad[:12]} + the patch"
    big = post_patch(room, b"+x\n" * 10, size=5 << 20)
    said = room.answer(answer(room.alice, room.room, big, command))
    assert said == "refused: that file is over 4 MiB, not one patch", said
    assert len(room.jobs.sweeps) == 1
