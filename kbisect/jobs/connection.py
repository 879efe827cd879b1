"""The one place a Temporal connection is made (the CLI, workers, both doors): plaintext
to the embedded dev server, or TLS, a client certificate and an API key to a secured
cluster, each a KBISECT_TEMPORAL_* setting. Every failure is one line naming the setting."""

import re
from pathlib import Path

from temporalio.client import Client
from temporalio.service import TLSConfig

from kbisect.errors import InfraError, UserError
from kbisect.settings import Endpoint, Tls, read_small_file

HTTP_STATUS = re.compile(r"response with status: ([0-9]{3} [A-Za-z ]+)")
BAD_CERTIFICATE = re.compile(r"InvalidCertificate\((\w+)")
# TLS alerts a server sends about the client's certificate (rustls names them so); other
# alerts (HandshakeFailure, UnrecognisedName...) are not about it.
CLIENT_CERTIFICATE_ALERT = re.compile(
    r"fatal alert: (BadCertificate|CertificateExpired|CertificateRequired|"
    r"CertificateUnknown|CertificateRevoked|UnknownCA|UnsupportedCertificate)"
)


async def connect(endpoint: Endpoint) -> Client:
    try:
        return await Client.connect(
            endpoint.address,
            namespace=endpoint.namespace,
            tls=tls_config(endpoint.tls) if endpoint.tls else bool(endpoint.api_key),
            api_key=endpoint.api_key or None,
        )
    except RuntimeError as exc:
        raise InfraError(refused(endpoint, str(exc))) from exc


def tls_config(tls: Tls) -> TLSConfig:
    return TLSConfig(
        server_root_ca_cert=_read("CA", tls.ca),
        client_cert=_read("CERT", tls.cert),
        client_private_key=_read("KEY", tls.key),
        domain=tls.server_name,
    )


def _read(part: str, path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        data = read_small_file(path)  # not a FIFO, a device or a huge file
    except OSError as exc:
        raise UserError(
            f"KBISECT_TEMPORAL_TLS_{part}={path}: cannot read it ({exc.strerror}): "
            "fix the path or unset it"
        ) from exc
    if b"-----BEGIN " not in data:
        raise UserError(f"KBISECT_TEMPORAL_TLS_{part}={path} is not a PEM file: give a PEM")
    return data


def refused(endpoint: Endpoint, error: str) -> str:
    """The connection's failure as one line that says which setting to look at."""
    where = endpoint.address
    low = error.lower()
    if "connection refused" in low or "tcp connect error" in low:
        hint = (
            "check KBISECT_TEMPORAL_ADDRESS"
            if endpoint.secured
            else "start one with 'kbisect up' (or set KBISECT_TEMPORAL_ADDRESS)"
        )
        return f"no Temporal server at {where}: {hint}"
    if not endpoint.secured:
        # Something took the connection and did not answer: a TLS port (its words vary
        # from run to run), or a server still starting.
        return (
            f"Temporal at {where} took the connection but did not answer "
            f"({_last_words(error)}): if it takes TLS, set KBISECT_TEMPORAL_TLS=yes (and "
            "_CA, _CERT, _KEY as it needs); if it is starting, try again in a moment"
        )
    if CLIENT_CERTIFICATE_ALERT.search(error):  # the server's TLS refused our certificate
        return (
            f"Temporal at {where} refused this client's certificate ({_last_words(error)}): "
            "set KBISECT_TEMPORAL_TLS_CERT and _KEY to a current one its CA signed"
        )
    if "expired" in low and "certificate" in low:  # rustls: InvalidCertificate(Expired)
        return (
            f"Temporal at {where}: its certificate has expired ({_last_words(error)}): "
            "the server needs a new one"
        )
    if "certificate" in low and ("unknown" in low or "verify" in low or "invalid" in low):
        return (
            f"Temporal at {where}: its certificate is not trusted ({_last_words(error)}): "
            "set KBISECT_TEMPORAL_TLS_CA to the CA that signed it"
        )
    if "status: 400" in low or "certificate required" in low or "handshake" in low:
        return (
            f"Temporal at {where} refused this client's certificate ({_last_words(error)}): "
            "set KBISECT_TEMPORAL_TLS_CERT and _KEY to one its CA signed"
        )
    if any(w in low for w in ("status: 401", "status: 403", "unauthenticated", "permission")):
        return (
            f"Temporal at {where} refused the API key ({_last_words(error)}): "
            "set KBISECT_TEMPORAL_API_KEY to a valid one"
        )
    return f"cannot connect to Temporal at {where}: {_last_words(error)}"


def _last_words(error: str) -> str:
    """The core's error, on one line and short (it nests causes many levels deep); a
    proxy's HTTP answer (nginx: 400 without a good client certificate) is the gist."""
    if http := HTTP_STATUS.search(error):
        return f"HTTP {http[1].strip()}"
    if bad := BAD_CERTIFICATE.search(error):  # rustls's words, e.g. UnknownIssuer
        return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", bad[1]).lower()
    text = " ".join(error.split())
    return text if len(text) <= 200 else text[:197] + "..."
