"""`!kbisect bisect from-report` on a real Synapse: sent as a reply to an LKP report, uploaded
as a file or pasted as a message, the bot reads that report (a file from the homeserver's
own media, never a URL of the mail's) and starts the job its fields make; a file over
the mail's bound is refused unfetched, and a command that answers nothing is one line. The
job service is the recording stand-in of test_matrix_hardening."""

import json
import urllib.parse
import urllib.request
import uuid

from tests.chat.homeserver import User
from tests.chat.test_door_from_report import lab_mail
from tests.chat.test_matrix_hardening import Room, room
from tests.conftest import git

__all__ = ["room"]  # the bot-in-a-room fixture, used here by name


def upload(user: User, data: bytes, name: str) -> str:
    """The file in the homeserver's media repository: its mxc:// URI."""
    query = urllib.parse.urlencode({"filename": name})
    req = urllib.request.Request(
        f"{user.url}/_matrix/media/v3/upload?{query}", data=data, method="POST"
    )
    req.add_header("Content-Type", "text/plain")
    req.add_header("Authorization", f"Bearer {user.token}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return str(json.loads(resp.read())["content_uri"])


def send(user: User, room_id: str, content: dict[str, object]) -> str:
    path = f"/rooms/{urllib.parse.quote(room_id)}/send/m.room.message/{uuid.uuid4().hex}"
    return str(user.api("PUT", path, content)["event_id"])


def post_file(user: User, room_id: str, data: bytes, size: int | None = None) -> str:
    mxc = upload(user, data, "lkp.eml")
    info = {"mimetype": "text/plain", "size": len(data) if size is None else size}
    return send(user, room_id, {"msgtype": "m.file", "body": "lkp.eml", "url": mxc, "info": info})


def answer(user: User, room_id: str, to: str, command: str) -> str:
    """`command` sent as a reply to event `to`."""
    relates = {"m.in_reply_to": {"event_id": to}}
    return send(user, room_id, {"msgtype": "m.text", "body": command, "m.relates_to": relates})


COMMAND = "!kbisect bisect from-report testcase=nvme-snapshot-read"


def test_a_reply_to_an_uploaded_or_pasted_report_starts_its_job(room: Room) -> None:
    master = git(room.upstream, "rev-parse", "master").strip()
    mail = lab_mail(room.upstream)
    for i, sent in enumerate(
        [post_file(room.alice, room.room, mail.encode()), room.alice.say(room.room, mail)], 1
    ):
        said = room.answer(answer(room.alice, room.room, sent, COMMAND))
        assert said.startswith(f"started inv-nvme-snapshot-read-{i:08x}: "), said
        assert f"\nbad: {master} (line 8 " in said and "\ntree: lab (line 9 " in said, said
        assert room.jobs.started[-1].bad == master and room.jobs.started[-1].tree == "lab"
    assert len(room.jobs.started) == 2


def test_a_report_it_cannot_take_is_one_line(room: Room) -> None:
    # a file that says it is over 1 MiB is not fetched; a command answering nothing
    big = post_file(room.alice, room.room, b"x" * 100, size=2 << 20)
    said = room.answer(answer(room.alice, room.room, big, COMMAND))
    assert said == "refused: that file is over 1 MiB, not one report mail", said
    said = room.answer(room.alice.say(room.room, COMMAND))
    assert said.startswith("refused: bisect from-report reads an LKP report: send the command as")
    # a pasted mail that names no commit: what is missing, in the door's words
    no_commit = lab_mail(room.upstream).replace("commit: ", "commit ", 1)
    said = room.answer(answer(room.alice, room.room, room.alice.say(room.room, no_commit), COMMAND))
    assert "it names no commit (give bad=REV)" in said and "\n" not in said, said
    assert room.jobs.started == []
