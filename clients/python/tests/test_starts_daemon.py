"""The client starts the user's private daemon when none answers, as the `jqjail` command line
does (issue 36): from this Python's scripts, $PATH or $JQJAIL_DAEMON; racing processes get
one daemon; with no daemon to start, or one of another version at the socket, the error says
where it looked and what to do."""

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from conftest import REPO

import jqjail
from jqjail import _wire

DAEMON = os.environ.get("JQJAIL_DAEMON") or str(REPO / "target" / "debug" / "jqjaild")


@pytest.fixture
def runtime():
    if os.path.exists(_wire.SYSTEM_SOCKET):
        pytest.skip("a system jqjail daemon is installed here; the client would use it")
    with tempfile.TemporaryDirectory() as d:
        try:
            yield d
        finally:
            for pid in daemons_naming(d):
                os.kill(pid, 15)


def daemons_naming(needle):
    """The pids of running jqjaild processes whose command line names `needle`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"jqjaild" and any(needle.encode() in a for a in argv):
            found.append(int(name))
    return found


def env_for(runtime, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("JQJAIL_SOCKET", "JQJAIL_DAEMON")}
    env.update({"XDG_RUNTIME_DIR": runtime, "PATH": "/usr/bin:/bin", **extra})
    return env


def test_racing_programs_start_one_private_daemon(runtime):
    code = "import jqjail, sys; print(jqjail.Client().run('.a', {'a': int(sys.argv[1])}).value())"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(i)],
            env=env_for(runtime, JQJAIL_DAEMON=DAEMON),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    for i, racer in enumerate(racers):
        out, err = racer.communicate(timeout=60)
        assert (racer.returncode, out) == (0, f"{i}\n"), err
    sock = os.path.join(runtime, "jqjail", "jqjail.sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(sock)
    # One daemon serves them all: the start lock let one start it, and the rest found it.
    assert len(daemons_naming(runtime)) == 1


def test_the_asyncio_client_starts_it_too(runtime, monkeypatch):
    for name, value in env_for(runtime, JQJAIL_DAEMON=DAEMON).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("JQJAIL_SOCKET", raising=False)

    async def main():
        async with await jqjail.AsyncClient.connect() as c:
            return (await c.run(".[1]", [1, 2])).value()

    assert asyncio.run(main()) == 2
    assert len(daemons_naming(runtime)) == 1


def test_with_no_daemon_to_start_the_error_says_where_it_looked(runtime):
    # Debian's Python and this package's source: a venv with the wheel has jqjaild among its
    # scripts, which is where the client looks first.
    code = "import jqjail; jqjail.Client()"
    source = str(REPO / "clients" / "python" / "src")
    out = subprocess.run(
        ["/usr/bin/python3", "-c", code],
        env=env_for(runtime, PATH="/nonexistent", PYTHONPATH=source),
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "jqjaild is neither in this Python's scripts" in out.stderr, out.stderr
    assert "nor named by $JQJAIL_DAEMON" in out.stderr and "pip install the jqjail wheel" in out.stderr, out.stderr


def test_a_daemon_of_another_version_is_named_with_what_to_do(runtime, monkeypatch):
    directory = os.path.join(runtime, "jqjail")
    os.mkdir(directory, 0o700)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(os.path.join(directory, "jqjail.sock"))
    listener.listen(1)

    def refuse():
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            refusal = {"error": {"code": "UNSUPPORTED_VERSION", "message": "client speaks protocol 2, this server speaks 3 to 3"}}
            conn.sendall(_wire.frame(_wire.encode(refusal)))

    threading.Thread(target=refuse, daemon=True).start()
    monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    monkeypatch.delenv("JQJAIL_SOCKET", raising=False)
    try:
        with pytest.raises(jqjail.ConnectionFailed) as e:
            jqjail.Client(timeout=10)
    finally:
        listener.close()
    message = str(e.value)
    assert f"(pid {os.getpid()}" in message and "another version of jqjaild" in message, message
    assert f"`kill {os.getpid()}`" in message and _wire.CLIENT_NAME in message, message
