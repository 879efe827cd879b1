"""The service's logs are set aside when it starts, so they do not grow forever."""

from pathlib import Path

import pytest

from kbisect.infra import temporal_server


def test_a_large_log_is_rotated_and_only_the_last_few_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(temporal_server, "LOG_MAX_BYTES", 100)
    log = tmp_path / "service.log"
    for run in range(temporal_server.LOG_KEEP + 3):
        log.write_text(f"run {run}\n" + "x" * 100)
        temporal_server.rotate_log(log)
        assert not log.exists()
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == [f"service.log.{n}" for n in range(1, temporal_server.LOG_KEEP + 1)]
    newest = temporal_server.LOG_KEEP + 2
    for n in range(1, temporal_server.LOG_KEEP + 1):  # .1 is the newest
        assert (tmp_path / f"service.log.{n}").read_text().startswith(f"run {newest - n + 1}\n")


def test_a_small_log_is_left_to_grow(tmp_path: Path) -> None:
    log = tmp_path / "temporal-server.log"
    log.write_text("a short run\n")
    temporal_server.rotate_log(log)
    temporal_server.rotate_log(tmp_path / "missing.log")  # nothing to do, no error
    assert log.read_text() == "a short run\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["temporal-server.log"]


def test_a_server_listening_but_not_answering_yet_is_waited_for(tmp_path: Path) -> None:
    # The dev server listens a moment before it answers: the wait for its search
    # attributes rides over refused connections to its deadline instead of failing.
    import asyncio
    import socket
    import threading
    import time

    from kbisect.jobs import service
    from kbisect.settings import Settings

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    accepted = []

    def hang_up() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()

    threading.Thread(target=hang_up, daemon=True).start()
    env = {
        "KBISECT_DATA": str(tmp_path),
        "KBISECT_CACHE": str(tmp_path / "c"),
        "KBISECT_TEMPORAL_ADDRESS": f"127.0.0.1:{sock.getsockname()[1]}",
    }
    started = time.monotonic()
    try:
        asyncio.run(service._search_attributes_ready(Settings.from_env(env), started + 3))
    finally:
        sock.close()
    assert len(accepted) >= 2  # it tried again
    assert 3 <= time.monotonic() - started < 30
