"""Starting the user's private daemon when no daemon answers, as every jqjail client does
(PROTOCOL.md, "Finding the socket"): `jqjaild` from this package's installation (the wheel
puts it beside the interpreter's scripts), else $PATH, else $JQJAIL_DAEMON; started detached
in the private directory, one starter at a time (flock on `start.lock`), and waited for until
it accepts. A daemon never replaces one that serves, so a race without the lock still ends
with one daemon."""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sysconfig
import tempfile
import threading
import time
from typing import List, Optional

from ._wire import CLIENT_NAME, ConnectionFailed, JqjailError, Limits, _usable, check_hello, own_temp_dir, temp_dir

DAEMON_EXECUTABLE = "jqjaild"
DAEMON_ENV = "JQJAIL_DAEMON"
#: How long a private daemon lives without clients (the CLI's figure).
IDLE_EXIT_MS = 600_000
#: How long to wait for a started daemon to accept: longer than a daemon waits (15 s) for the
#: store's previous owner, an idle daemon still exiting, to let it go.
START_TIMEOUT_S = 20.0


def executable(name: str, env: Optional[str] = None) -> str:
    """`name` from this package's installation, else $PATH, else the file `env` names."""
    places: List[str] = []
    for scheme in (None, f"{os.name}_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:
            continue
        if scripts:
            places.append(os.path.join(scripts, name))
    for candidate in places:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which(name)
    if on_path and os.path.isabs(on_path):
        return on_path
    named = os.environ.get(env) if env else None
    if named:
        return named
    also = f", nor named by ${env}" if env else ""
    raise ConnectionFailed(
        f"{name} is neither in this Python's scripts ({', '.join(places)}) nor on $PATH{also}: "
        "pip install the jqjail wheel (which carries it; packaging/dist builds it), or the .deb"
    )


#: What a program's own service manager set for it, never for the daemon it starts.
SERVICE_MANAGER_ENV = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC")


def _own_temp_dir(temp: str, uid: int) -> str:
    """The user's own temp/jqjail-UID-* directory, else a new one (mkdtemp), as the command
    line picks when no other directory is usable."""
    found = own_temp_dir(temp, uid)
    if found:
        return found
    made = tempfile.mkdtemp(prefix=f"jqjail-{uid}-", dir=temp)
    # Two starters that made one each both take the first by name.
    chosen = own_temp_dir(temp, uid) or made
    if chosen != made:
        os.rmdir(made)
    return chosen


def prepare(directory: str) -> str:
    """Makes the private directory (mode 0700) and checks it is the user's own and closed.
    When it is not usable (another user's, or open), the user's own fallback in the temp dir
    is taken instead, made with mkdtemp if need be. Returns the directory."""
    uid = os.getuid()
    if not _usable(directory, uid):
        directory = _own_temp_dir(temp_dir(), uid)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if not os.path.isdir(directory) or not _usable(directory, uid):
        raise ConnectionFailed(
            f"refusing the private daemon's directory {directory}: it must be a directory of "
            f"uid {uid}'s own, not a link, closed to others (`chmod 700` it, or remove it)"
        )
    return directory


def _accepts(path: str) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def start(socket_path: str) -> str:
    """Starts the private daemon for `socket_path` (in its directory) unless one accepts
    there; returns the socket to connect to once it does."""
    try:
        return _start(socket_path)
    except OSError as e:
        raise ConnectionFailed(f"starting the private daemon for {socket_path}: {e}") from None


def _start(socket_path: str) -> str:
    directory = prepare(os.path.dirname(socket_path))
    socket_path = os.path.join(directory, os.path.basename(socket_path))
    with open(os.path.join(directory, "start.lock"), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if _accepts(socket_path):
            return socket_path
        exe = executable(DAEMON_EXECUTABLE, DAEMON_ENV)
        log_path = os.path.join(directory, "daemon.log")
        with open(log_path, "ab") as log:
            try:
                child = subprocess.Popen(
                    [exe, "--socket", socket_path, "--store", os.path.join(directory, "store"),
                     "--idle-exit-ms", str(IDLE_EXIT_MS)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                    close_fds=True, cwd="/",
                    env={k: v for k, v in os.environ.items() if k not in SERVICE_MANAGER_ENV},
                    # Its own session: the terminal's Ctrl-C for this program does not reach it.
                    start_new_session=True,
                )
            except OSError as e:
                raise ConnectionFailed(f"starting the private daemon {exe}: {e}") from None
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _accepts(socket_path):
                # Reaped when it exits (its idle exit), so a long-lived program keeps no zombie.
                threading.Thread(target=child.wait, daemon=True).start()
                return socket_path
            status = child.poll()
            if status is not None:
                raise ConnectionFailed(
                    f"the private daemon {exe} exited at start (status {status}); see {log_path}"
                )
            time.sleep(0.005)
        # Neither left running nor a zombie in a long-lived program.
        child.kill()
        child.wait()
    raise ConnectionFailed(
        f"the private daemon {exe} did not accept connections within {START_TIMEOUT_S:.0f} s; see {log_path}"
    )


def other_version(path: str, pid: int, message: str, private: bool) -> ConnectionFailed:
    """The error for a daemon that refused this client's protocol: which process, and what to do."""
    try:
        exe = f" ({os.readlink(f'/proc/{pid}/exe')})"
    except OSError:
        exe = ""
    todo = (
        f"It is your private daemon: stop it (`kill {pid}`: it finishes what it runs and keeps its "
        "hides), and the next call starts this version's"
        if private
        else "Use a client of the daemon's version, or upgrade the daemon"
    )
    return ConnectionFailed(
        f"the daemon at {path} (pid {pid}{exe}) is another version of jqjaild: {message}; "
        f"this client is {CLIENT_NAME}. {todo}"
    )


def hello_limits(variant: str, fields: object, path: str, pid: int, private: bool) -> Limits:
    """The hello reply's limits; a refusal of this client's protocol is named as another
    version's daemon (`private`: the socket is the user's private daemon's)."""
    try:
        return check_hello(variant, fields)
    except JqjailError as e:
        if e.code != "UNSUPPORTED_VERSION":
            raise
        raise other_version(path, pid, e.message, private) from None
