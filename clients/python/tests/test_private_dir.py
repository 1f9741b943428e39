"""The private daemon's socket, found where the `jqjail` command line puts its daemon (issue
34, attack 10): a service account with no runtime dir and no home it may write in, whose
$TMPDIR/jqjail-UID another user planted, gets a directory of its own from the command line,
and this client finds the same one; with a home it may write in, both use its cache dir."""

import os
import re
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO

SERVICE, PLANTER = 4242, 65534


def as_service(argv, env):
    return subprocess.run(
        argv, env=env, user=SERVICE, group=SERVICE, cwd="/", capture_output=True, text=True, timeout=60
    )


def found_by_this_client(env):
    code = "from jqjail._wire import private_socket; print(private_socket())"
    out = as_service([sys.executable, "-c", code], env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def plant(tmp):
    """Makes `tmp` a shared temp dir (sticky, open to all) in which another user made the
    service account's jqjail-UID first; returns a home the service account may not write in."""
    os.chmod(tmp, 0o1777)
    planted = os.path.join(tmp, f"jqjail-{SERVICE}")
    os.mkdir(planted)
    os.chown(planted, PLANTER, PLANTER)
    os.chmod(planted, 0o755)
    locked = os.path.join(tmp, "locked-home")
    os.mkdir(locked, 0o755)
    return locked


def test_the_private_socket_is_where_the_cli_puts_its_daemon():
    if os.getuid() != 0:
        pytest.skip("needs root, to act as a service account and as the user who planted its directory")
    daemon = os.environ.get("JQJAIL_DAEMON") or str(REPO / "target" / "debug" / "jqjaild")
    cli = os.path.join(os.path.dirname(daemon), "jqjail")
    with tempfile.TemporaryDirectory() as tmp:
        locked = plant(tmp)
        home = os.path.join(tmp, "home")
        os.mkdir(home, 0o700)
        os.chown(home, SERVICE, SERVICE)
        try:
            env = {"HOME": locked, "TMPDIR": tmp, "PATH": "/usr/bin:/bin"}
            out = as_service([cli, "-n", "1"], env)
            assert out.returncode == 0, out.stderr
            made = re.search(r"using (\S+) instead", out.stderr)
            assert made and made.group(1).startswith(f"{tmp}/jqjail-{SERVICE}-"), out.stderr
            assert found_by_this_client(env) == os.path.join(made.group(1), "jqjail.sock")
            env = {"HOME": home, "TMPDIR": tmp, "PATH": "/usr/bin:/bin"}
            out = as_service([cli, "-n", "2"], env)
            assert out.returncode == 0, out.stderr
            cache = os.path.join(home, ".cache", "jqjail")
            assert os.path.exists(os.path.join(cache, "jqjail.sock")), out.stderr
            assert found_by_this_client(env) == os.path.join(cache, "jqjail.sock")
        finally:
            subprocess.run(["/bin/kill", "-KILL", "-1"], user=SERVICE, group=SERVICE)


def test_a_service_account_whose_temp_dir_was_planted_starts_its_daemon_in_its_own():
    """Issue 36's attack: with no runtime dir, no home it may write in, and $TMPDIR/jqjail-UID
    planted by another user, the client starting the private daemon used the planted path and
    failed for good (a raw PermissionError); it takes a directory of its own, as the CLI does."""
    if os.getuid() != 0:
        pytest.skip("needs root, to act as a service account and as the user who planted its directory")
    daemon = os.environ.get("JQJAIL_DAEMON") or str(REPO / "target" / "debug" / "jqjaild")
    with tempfile.TemporaryDirectory() as tmp:
        locked = plant(tmp)
        env = {
            "HOME": locked,
            "TMPDIR": tmp,
            "PATH": "/usr/bin:/bin",
            "JQJAIL_DAEMON": daemon,
            "PYTHONPATH": str(REPO / "clients" / "python" / "src"),
        }
        code = "import jqjail; c = jqjail.Client(); print(c.run('.a', {'a': 1}).value(), c.socket_path)"
        try:
            out = as_service(["/usr/bin/python3", "-c", code], env)
            assert out.returncode == 0, out.stderr
            value, socket_path = out.stdout.split()
            assert value == "1"
            assert socket_path.startswith(f"{tmp}/jqjail-{SERVICE}-"), socket_path
            assert os.stat(os.path.dirname(socket_path)).st_uid == SERVICE
        finally:
            subprocess.run(["/bin/kill", "-KILL", "-1"], user=SERVICE, group=SERVICE)
