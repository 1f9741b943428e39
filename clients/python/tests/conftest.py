"""Starts the real daemon (`jqjaild`, from $JQJAIL_DAEMON or the repository's debug build) on
a socket in a temporary directory, once per test module."""

import os
import pathlib
import subprocess
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]


def _accepts(sock):
    """Whether a daemon accepts connections on `sock`: its file exists a moment before the
    daemon listens on it (bind, then listen), and a connect in between is refused."""
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(sock)
            return True
        except OSError:
            return False


@pytest.fixture(scope="module")
def socket_path():
    daemon = os.environ.get("JQJAIL_DAEMON") or str(REPO / "target" / "debug" / "jqjaild")
    if not os.path.exists(daemon):
        pytest.fail(f"no daemon at {daemon}: build it (cargo build) or set JQJAIL_DAEMON")
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "jqjail.sock")
        proc = subprocess.Popen(
            [daemon, "--socket", sock, "--store", os.path.join(d, "store")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 20
            while not _accepts(sock):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the daemon did not start: {proc.stderr.read().decode()}")
                time.sleep(0.02)
            yield sock
        finally:
            proc.terminate()
            proc.wait(timeout=20)
