"""Every knob kbisect reads from the environment, read once into one frozen object.

A process builds `Settings.from_env()` at start and passes it down; nothing else reads
`KBISECT_*` variables. A malformed value is a UserError that names the variable.
"""

import os
import re
import socket
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from kbisect.contract import DEFAULT_QUEUE, QueueKind
from kbisect.errors import UserError

DEFAULT_KERNEL_SOURCE = "/usr/src/linux-source-6.1.tar.xz"
# Kept as a module attribute so tests can point the lab at a stand-in tarball.
KERNEL_SOURCE_TARBALL = Path(os.environ.get("KBISECT_KERNEL_SOURCE", DEFAULT_KERNEL_SOURCE))
USERINFO = re.compile(r"(?<=://)[^/\s]*@")  # a URL's user and password
ADDRESS_RE = re.compile(r"^(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})$")
ACCELS = ("kvm", "tcg")
STORE_SCHEMES = ("file", "http", "https", "s3")  # KBISECT_STORE's
CCACHE_SCHEMES = ("file", "http", "https", "redis", "rediss")  # ccache 4.7's remote storage
MACHINES = ("qemu", "libvirt")  # infra.machines: direct QEMU, or a libvirt domain
# One folder for the whole host, whoever runs kbisect: infra/install.sh makes it, root's and
# sticky (infra/host_lock.py refuses one that another user could swap files in).
DEFAULT_LOCK_DIR = "/run/lock/kbisect" if os.access("/run/lock", os.W_OK) else "/tmp/kbisect-locks"


@dataclass(frozen=True)
class Tls:
    """TLS to the Temporal service (KBISECT_TEMPORAL_TLS_*): paths, read when connecting."""

    ca: Path | None = None  # the server's CA (None: the system's)
    cert: Path | None = None  # a client certificate, with its key (mTLS)
    key: Path | None = None
    server_name: str | None = None  # the name the server's certificate carries


@dataclass(frozen=True)
class Endpoint:
    """Where the Temporal service is; defaults to the embedded dev server."""

    address: str = "127.0.0.1:7233"
    namespace: str = "default"
    ui: str = "http://127.0.0.1:8233"
    tls: Tls | None = None  # None: plaintext (an API key turns TLS on by itself)
    api_key: str = field(default="", repr=False)  # KBISECT_TEMPORAL_API_KEY: a bearer token

    @property
    def secured(self) -> bool:
        """TLS or an API key: a service kbisect must not start a plaintext one in place of."""
        return self.tls is not None or bool(self.api_key)

    @property
    def host(self) -> str:
        return self.address.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    @property
    def local(self) -> bool:
        return self.host in ("127.0.0.1", "localhost", "::1")

    def job_url(self, job_id: str) -> str:
        return f"{self.ui}/namespaces/{self.namespace}/workflows/{job_id}"


@dataclass(frozen=True)
class Queues:
    control: str = DEFAULT_QUEUE[QueueKind.WORKFLOW]
    build: str = DEFAULT_QUEUE[QueueKind.BUILD]
    vm: str = DEFAULT_QUEUE[QueueKind.VM]

    def name(self, kind: QueueKind) -> str:
        return {QueueKind.WORKFLOW: self.control, QueueKind.BUILD: self.build}.get(kind, self.vm)


@dataclass(frozen=True)
class Settings:
    cache: Path  # build slots, artifacts, guest images, runs (KBISECT_CACHE)
    data: Path  # the dev server's database, service pid and logs (KBISECT_DATA)
    kernel_source: Path = Path(DEFAULT_KERNEL_SOURCE)  # the lab's tarball
    jobs: int = 3  # make -j (KBISECT_JOBS)
    accel: str | None = None  # kvm or tcg; None: probe with a real boot (KBISECT_ACCEL)
    testcase_dirs: tuple[Path, ...] = ()  # user testcase folders (KBISECT_TESTCASES)
    locks: Path = Path(DEFAULT_LOCK_DIR)  # the host's measurement lock (KBISECT_LOCK_DIR)
    machine: str = "qemu"  # how a VM worker runs guests (KBISECT_MACHINE)
    libvirt_uri: str = "qemu:///session"  # the libvirt machine's daemon (KBISECT_LIBVIRT_URI)
    endpoint: Endpoint = field(default_factory=Endpoint)
    queues: Queues = field(default_factory=Queues)
    # Kernels shared through an object store instead of a shared cache folder
    # (builders/artifact_store.py): file:///..., http(s)://... (WebDAV) or s3://bucket/...
    store: str = ""
    # A file holding the key the hosts share to sign and check the store's entries
    # (KBISECT_STORE_KEY_FILE): what the job's history does not carry (modules, config,
    # logs) is then the build host's, not whatever a writer to the store put there.
    store_key_file: Path | None = None
    # ccache's remote storage, shared by the build hosts (CCACHE_REMOTE_STORAGE's syntax:
    # http://host/path for WebDAV, redis://host; ccache 4.7 has no S3)
    ccache_remote: str = ""
    # The VM host's name in results and reports, and whose references a boot is judged
    # against ("": the machine's hostname; set it for several VM workers on one machine)
    host_name: str = ""

    @property
    def this_host(self) -> str:
        """This worker's host name in results: host_name, else the machine's hostname
        (a libvirt VM host names its URI's host instead: infra.machines)."""
        return self.host_name or socket.gethostname()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if env is None else env
        return cls(
            cache=Path(env.get("KBISECT_CACHE") or platformdirs.user_cache_dir("kbisect")),
            data=Path(env.get("KBISECT_DATA") or platformdirs.user_data_dir("kbisect")),
            kernel_source=Path(env.get("KBISECT_KERNEL_SOURCE") or KERNEL_SOURCE_TARBALL),
            jobs=_positive_int(env, "KBISECT_JOBS", (os.cpu_count() or 1) + 1),
            accel=_choice(env, "KBISECT_ACCEL", ACCELS),
            testcase_dirs=tuple(Path(p) for p in env.get("KBISECT_TESTCASES", "").split(":") if p),
            locks=Path(env.get("KBISECT_LOCK_DIR") or DEFAULT_LOCK_DIR),
            machine=_choice(env, "KBISECT_MACHINE", MACHINES) or "qemu",
            libvirt_uri=env.get("KBISECT_LIBVIRT_URI", "").strip() or "qemu:///session",
            endpoint=Endpoint(
                address=_address(env),
                namespace=env.get("KBISECT_TEMPORAL_NAMESPACE") or "default",
                ui=(env.get("KBISECT_TEMPORAL_UI") or Endpoint.ui).rstrip("/"),
                tls=_tls(env),
                api_key=env.get("KBISECT_TEMPORAL_API_KEY", "").strip(),
            ),
            host_name=_host_name(env),
            store=_url(
                env,
                "KBISECT_STORE",
                STORE_SCHEMES,
                "file:///path, http(s)://host/path (WebDAV) or s3://bucket/path",
            ),
            store_key_file=_path(env, "KBISECT_STORE_KEY_FILE"),
            ccache_remote=_url(
                env,
                "KBISECT_CCACHE_REMOTE",
                CCACHE_SCHEMES,
                "http://host/ccache (WebDAV) or redis://host (ccache 4.7 has no S3)",
            ),
            queues=Queues(
                control=env.get("KBISECT_CONTROL_QUEUE") or Queues.control,
                build=env.get("KBISECT_BUILD_QUEUE") or Queues.build,
                vm=env.get("KBISECT_VM_QUEUE") or Queues.vm,
            ),
        )

    def cache_dir(self) -> Path:
        return private_dir(self.cache)

    def data_dir(self) -> Path:
        return private_dir(self.data)


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    # ASCII digits only: str.isdigit() also takes '²', which int() refuses.
    if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) < 1:
        raise UserError(
            f"{name}={text[:40]!r} must be a whole number (digits 0-9), 1 or more: fix or unset it"
        )
    return int(text)


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    text = env.get(name, "").strip()
    if text and text not in choices:
        raise UserError(f"{name}={text!r} must be one of {', '.join(choices)}: fix or unset it")
    return text or None


def _address(env: Mapping[str, str]) -> str:
    text = env.get("KBISECT_TEMPORAL_ADDRESS", "").strip() or Endpoint.address
    m = ADDRESS_RE.match(text)
    if not m or not 0 < int(m["port"]) < 65536:
        raise UserError(
            f"KBISECT_TEMPORAL_ADDRESS={text!r} must be host:port, e.g. 127.0.0.1:7233: "
            "fix or unset it"
        )
    return text


def _host_name(env: Mapping[str, str]) -> str:
    text = env.get("KBISECT_HOST_NAME", "").strip()
    if text and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", text):
        raise UserError(
            f"KBISECT_HOST_NAME={text[:80]!r} must be a host name (letters, digits, '.', '_', "
            "'-'; at most 63): fix or unset it"
        )
    return text


def _path(env: Mapping[str, str], name: str) -> Path | None:
    text = env.get(name, "").strip()
    return Path(text) if text else None


def _url(env: Mapping[str, str], name: str, schemes: tuple[str, ...], examples: str) -> str:
    text = env.get(name, "").strip()
    scheme, _, rest = text.partition("://")
    if text and (scheme not in schemes or not rest.strip("/") or any(c.isspace() for c in text)):
        shown = redact(text)[:80]
        raise UserError(f"{name}={shown!r} must be a URL: {examples}: fix or unset it")
    return text


def redact(text: str) -> str:
    """text with every URL's user and password (`https://user:token@host`) as `***`: what
    an error, a log line or a status may show of a tree's or a store's URL."""
    return USERINFO.sub("***@", text)


def _tls(env: Mapping[str, str]) -> Tls | None:
    """KBISECT_TEMPORAL_TLS=yes, or any of its _CA, _CERT, _KEY or _SERVER_NAME settings."""
    on = _choice(env, "KBISECT_TEMPORAL_TLS", ("yes", "no"))
    paths = {
        part: Path(text) if (text := env.get(f"KBISECT_TEMPORAL_TLS_{part}", "").strip()) else None
        for part in ("CA", "CERT", "KEY")
    }
    server_name = env.get("KBISECT_TEMPORAL_TLS_SERVER_NAME", "").strip() or None
    if (paths["CERT"] is None) != (paths["KEY"] is None):
        given, missing = ("CERT", "KEY") if paths["KEY"] is None else ("KEY", "CERT")
        raise UserError(
            f"KBISECT_TEMPORAL_TLS_{given} is set without KBISECT_TEMPORAL_TLS_{missing}: "
            "a client certificate needs both"
        )
    if on == "no" or (on is None and server_name is None and not any(paths.values())):
        return None
    return Tls(paths["CA"], paths["CERT"], paths["KEY"], server_name)


SMALL_FILE_BYTES = 1 << 20  # a key, a certificate, a password or a token: far less


def read_small_file(path: Path, limit: int = SMALL_FILE_BYTES) -> bytes:
    """A small regular file's bytes. OSError (with a strerror) for a path that cannot be
    read, and for a FIFO, a device or a file over `limit` bytes: never a hang on a FIFO,
    never all of /dev/zero in memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(0, "not a regular file", str(path))
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(0, f"over {limit >> 10} KiB, too big for what it should hold", str(path))
    return data


def private_dir(path: Path) -> Path:
    """The directory, made if missing, readable by this user only: it holds job data,
    build logs and the service's database."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        why = "a file is there" if isinstance(exc, FileExistsError) else exc.strerror
        raise UserError(
            f"cannot make the folder {path} ({why}): point KBISECT_CACHE or KBISECT_DATA at "
            "a folder you can write to"
        ) from exc
    st = path.stat()
    if st.st_mode & 0o077 and st.st_uid == os.getuid():
        path.chmod(0o700)
    return path


# Shorthands for code not yet handed a Settings object (read the environment each call,
# so tests that set KBISECT_CACHE per test keep working).
def cache_dir() -> Path:
    return Settings.from_env().cache_dir()


def data_dir() -> Path:
    return Settings.from_env().data_dir()


def build_jobs() -> int:
    return Settings.from_env().jobs
