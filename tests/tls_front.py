"""A secured Temporal for tests: certificates made with openssl, and nginx's gRPC proxy in
front of a plaintext dev server, taking TLS only, checking client certificates
(`ssl_verify_client on`) and an API key (the bearer token the SDK sends)."""

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from benchmarks.nginx import nginx

API_KEY = "kb-test-key-1"
SERVER_EXTENSIONS = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: tuple[Path, Path]  # certificate, key
    client: tuple[Path, Path]  # signed by ca
    stranger: tuple[Path, Path]  # signed by another CA
    expired: tuple[Path, Path]  # signed by ca, valid for one day in 2020
    expired_server: tuple[Path, Path]  # the same, a server's


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _ca(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    _openssl(
        *("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
        *("-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", f"/CN={name}"),
    )
    return cert, key


def _signed(folder: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    cert, key, csr, ext = (folder / f"{name}.{s}" for s in ("pem", "key", "csr", "ext"))
    _openssl(
        *("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
        *("-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"),
    )
    ext.write_text(extensions)
    _openssl(
        *("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1])),
        *("-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext)),
    )
    return cert, key


def _expired(folder: Path, name: str, ca: tuple[Path, Path], usage: str) -> tuple[Path, Path]:
    """A certificate of ca's that expired long ago (`openssl ca` takes dates); `usage`:
    its extensions' lines."""
    cert, key, csr, db = (
        folder / f"{name}.pem",
        folder / f"{name}.key",
        folder / f"{name}.csr",
        folder / f"{name}-db",
    )
    db.mkdir()
    (db / "index.txt").write_text("")
    (db / "serial").write_text("01\n")
    conf = folder / f"{name}.cnf"
    conf.write_text(
        f"[ca]\ndefault_ca = x\n[x]\ndatabase = {db}/index.txt\nserial = {db}/serial\n"
        f"new_certs_dir = {db}\ndefault_md = sha256\npolicy = p\nunique_subject = no\n"
        f"x509_extensions = e\n[e]\n{usage}[p]\ncommonName = supplied\n"
    )
    _openssl(
        *("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
        *("-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"),
    )
    _openssl(
        *("ca", "-batch", "-config", str(conf), "-cert", str(ca[0]), "-keyfile", str(ca[1])),
        *("-in", str(csr), "-out", str(cert), "-notext"),
        *("-startdate", "20200101000000Z", "-enddate", "20200102000000Z"),
    )
    return cert, key


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    ca, other = _ca(folder, "ca"), _ca(folder, "other-ca")
    server = _signed(folder, "server", ca, SERVER_EXTENSIONS)
    client = _signed(folder, "client", ca, "extendedKeyUsage=clientAuth\n")
    stranger = _signed(folder, "stranger", other, "extendedKeyUsage=clientAuth\n")
    expired = _expired(folder, "expired", ca, "extendedKeyUsage = clientAuth\n")
    old_server = _expired(folder, "expired-server", ca, SERVER_EXTENSIONS)
    return Certs(ca[0], server, client, stranger, expired, old_server)


def _server(port: int, upstream: str, certs: Certs) -> str:
    return f"""
        listen 127.0.0.1:{port} ssl http2;
        ssl_certificate {certs.server[0]};
        ssl_certificate_key {certs.server[1]};
        ssl_client_certificate {certs.ca};
        ssl_verify_client on;
        client_max_body_size 0;
        location / {{
            if ($http_authorization != "Bearer {API_KEY}") {{ return 401; }}
            grpc_read_timeout 300s;
            grpc_send_timeout 300s;
            grpc_pass grpc://{upstream};
        }}"""


@contextmanager
def tls_front(folder: Path, upstream: str, certs: Certs) -> Iterator[str]:
    """nginx on 127.0.0.1 in front of `upstream` (host:port): its address."""
    with nginx(folder, lambda port: _server(port, upstream, certs)) as port:
        yield f"127.0.0.1:{port}"


def secured_env(address: str, certs: Certs, **extra: str) -> dict[str, str]:
    """KBISECT_TEMPORAL_* for a client with the right certificate and key."""
    return {
        "KBISECT_TEMPORAL_ADDRESS": address,
        "KBISECT_TEMPORAL_TLS_CA": str(certs.ca),
        "KBISECT_TEMPORAL_TLS_CERT": str(certs.client[0]),
        "KBISECT_TEMPORAL_TLS_KEY": str(certs.client[1]),
        "KBISECT_TEMPORAL_API_KEY": API_KEY,
        **extra,
    }
