"""A real Synapse homeserver for the chat tests: SQLite, 127.0.0.1, users registered with
the shared secret, rate limits raised. Synapse (AGPL) lives in its own virtualenv,
`.venv-synapse/`, made by infra/install.sh for the tests only; kbisect never ships it.

Test users talk to it over the plain client-server HTTP API, not through matrix-nio, so a
bug in how the bot uses nio cannot hide in the test's use of it.
"""

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.nginx import free_port

REPO = Path(__file__).resolve().parents[2]
SYNAPSE_VENV = REPO / ".venv-synapse"
SECRET = "kbisect-test-shared-secret"
LIMIT = "{per_second: 10000, burst_count: 10000}"

CONFIG = """\
server_name: "localhost"
pid_file: {dir}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: {dir}/homeserver.db
media_store_path: {dir}/media
registration_shared_secret: "{secret}"
enable_registration: false
report_stats: false
macaroon_secret_key: "kbisect-test-macaroon"
form_secret: "kbisect-test-form"
signing_key_path: {dir}/signing.key
trusted_key_servers: []
suppress_key_server_warning: true
enable_metrics: false
rc_message: {limit}
rc_registration: {limit}
rc_login:
  address: {limit}
  account: {limit}
  failed_attempts: {limit}
rc_joins:
  local: {limit}
  remote: {limit}
rc_invites:
  per_room: {limit}
  per_user: {limit}
"""


def _call(url: str, method: str, body: object | None, token: str | None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


@dataclass
class User:
    url: str
    user_id: str
    password: str
    token: str

    def api(self, method: str, path: str, body: object | None = None) -> Any:
        return _call(f"{self.url}/_matrix/client/v3{path}", method, body, self.token)

    def create_room(self) -> str:
        return str(self.api("POST", "/createRoom", {"preset": "public_chat"})["room_id"])

    def join(self, room: str) -> None:
        self.api("POST", f"/join/{urllib.parse.quote(room)}", {})

    def say(self, room: str, body: str, msgtype: str = "m.text") -> str:
        txn = uuid.uuid4().hex
        path = f"/rooms/{urllib.parse.quote(room)}/send/m.room.message/{txn}"
        return str(self.api("PUT", path, {"msgtype": msgtype, "body": body})["event_id"])

    def messages(self, room: str) -> list[dict[str, Any]]:
        """The room's messages, oldest first."""
        path = f"/rooms/{urllib.parse.quote(room)}/messages?dir=b&limit=1000"
        chunk = self.api("GET", path)["chunk"]
        return [e for e in reversed(chunk) if e.get("type") == "m.room.message"]


class Synapse:
    def __init__(self, workdir: Path) -> None:
        if not (SYNAPSE_VENV / "bin" / "python").exists():
            raise RuntimeError(f"{SYNAPSE_VENV} is missing: run infra/install.sh --tests")
        self.dir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = CONFIG.format(dir=workdir, port=self.port, secret=SECRET, limit=LIMIT)
        self.config = workdir / "homeserver.yaml"
        self.config.write_text(config)
        python = str(SYNAPSE_VENV / "bin" / "python")
        subprocess.run(
            [python, "-m", "synapse.app.homeserver", "-c", str(self.config), "--generate-keys"],
            check=True,
            capture_output=True,
        )
        self.log = open(workdir / "synapse.log", "ab")
        self.proc = subprocess.Popen(
            [python, "-m", "synapse.app.homeserver", "-c", str(self.config)],
            stdout=self.log,
            stderr=self.log,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 90
        while True:
            try:
                _call(f"{self.url}/_matrix/client/versions", "GET", None, None)
                break
            except (urllib.error.URLError, ConnectionError) as exc:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"Synapse did not start: see {workdir}/synapse.log") from exc
                time.sleep(0.3)

    def register(self, name: str) -> User:
        password = f"{name}-pw-{uuid.uuid4().hex[:8]}"
        subprocess.run(
            [
                str(SYNAPSE_VENV / "bin" / "register_new_matrix_user"),
                "--user",
                name,
                "--password",
                password,
                "--no-admin",
                "--shared-secret",
                SECRET,
                self.url,
            ],
            check=True,
            capture_output=True,
        )
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": name},
            "password": password,
        }
        token = _call(f"{self.url}/_matrix/client/v3/login", "POST", body, None)["access_token"]
        return User(self.url, f"@{name}:localhost", password, token)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
