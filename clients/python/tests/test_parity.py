"""What every jqjail client shares: the conformance vectors and error exchanges, the socket
discovery order, inputs as any JSON value, a buffer that takes over a hidden run, and the
package's version."""

import json
import os
import pathlib
import socket
import struct
import subprocess
import tempfile
import time

import pytest

import jqjail
from conftest import _accepts
from jqjail import _requests, _wire

REPO = pathlib.Path(__file__).resolve().parents[3]
VECTORS = REPO / "protocol" / "vectors"


def normal(v):
    """A JSON value without nulls, empty objects and empty arrays: what a request may omit."""
    if isinstance(v, dict):
        out = {}
        for k, e in v.items():
            e = normal(e)
            if e is None or e == {} or e == []:
                continue
            out[k] = e
        return out
    if isinstance(v, list):
        return [normal(e) for e in v]
    return v


def test_the_requests_written_mean_the_vectors_and_every_response_decodes():
    doc = json.loads((VECTORS / "messages.json").read_text())
    requests = {v["name"]: v for v in doc["requests"]}
    ours = {
        "run inline": _wire.run_request(".a", '{"a":1}', None),
        "run with every field": _wire.run_request(
            ".items[] | $x",
            '{"items":[1]}',
            None,
            args={"x": "text"},
            positional=[42],
            outputs="lines",
            on_oversize="hide",
            timeout_ms=300,
            max_output_bytes=1000,
            max_depth=64,
        ),
        "run over a hide": _wire.run_request("length", None, "github-1a2b3c4d"),
        "run over values": _wire.values_request("[inputs]", '1 2\n{"a":3}', True),
        "run in the path language": _wire.run_request("items[*].name", '{"items":[]}', None, lang="path"),
        "shape of a hide": _wire.run_request("", None, "github-1a2b3c4d", lang="shape"),
        "hide_page by number": _requests.hide_page("github-1a2b3c4d", 2, None, 600, True, "json"),
        "hide_page by path": _requests.hide_page("github-1a2b3c4d", None, "$[17].labels", None, False, "json"),
        "hide_page by offset": _requests.hide_page("github-1a2b3c4d", None, None, 64, False, "json", 70),
        "hide_page in bytes": _requests.hide_page("github-1a2b3c4d", 1, None, None, False, "bytes"),
    }
    for name, request in ours.items():
        assert normal(json.loads(request.body)) == normal(json.loads(requests[name]["json"])), name
        assert request.tail.hex() == requests[name]["tail_hex"], name
    for v in doc["responses"]:
        assert _wire.frame(v["json"].encode()).hex() == v["json_frame_hex"], v["name"]
        variant, fields = _wire.decode(v["json"].encode())
        assert _wire.tail_length(variant, fields, None) == len(v["tail_hex"]) // 2, v["name"]


def test_the_error_exchanges(socket_path):
    doc = json.loads((VECTORS / "exchanges.json").read_text())
    for ex in doc["exchanges"]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(socket_path)

        def read_exact(n):
            out = b""
            while len(out) < n:
                chunk = s.recv(n - len(out))
                assert chunk, f"{ex['name']}: closed early"
                out += chunk
            return out

        def recv():
            body = read_exact(_wire.frame_length(read_exact(4)))
            variant, fields = _wire.decode(body)
            return variant, fields, read_exact(_wire.tail_length(variant, fields, None))

        if ex["hello"]:
            s.sendall(_wire.frame(b'{"hello":{"protocol":2}}'))
            assert recv()[0] == "hello"
        for step in ex["steps"]:
            if "send" in step:
                s.sendall(_wire.frame(_wire.encode(step["send"])) + bytes.fromhex(step["tail_hex"]))
                continue
            want = step["expect"]
            variant, fields, tail = recv()
            assert variant == want["response"], (ex["name"], fields)
            if "code" in want:
                assert fields["code"] == want["code"], (ex["name"], fields)
            if "code_one_of" in want:
                assert fields["code"] in want["code_one_of"], (ex["name"], fields)
            for key in ("limit", "actual"):
                if key in want:
                    assert fields[key] == want[key], (ex["name"], fields)
            if "tail_hex" in want:
                assert tail.hex() == want["tail_hex"], ex["name"]
        if ex["closed"]:
            try:
                assert s.recv(1) == b"", ex["name"]
            except ConnectionResetError:
                pass
        s.close()


def test_discovery_finds_the_private_daemon_after_the_system_socket(monkeypatch):
    """Without a path or $JQJAIL_SOCKET, a client tries the system socket, then the private
    daemon the CLI starts, in $XDG_RUNTIME_DIR/jqjail first."""
    if os.path.exists(_wire.SYSTEM_SOCKET):
        pytest.skip(f"{_wire.SYSTEM_SOCKET} exists here, so discovery would (rightly) stop there")
    daemon = os.environ.get("JQJAIL_DAEMON") or str(REPO / "target" / "debug" / "jqjaild")
    with tempfile.TemporaryDirectory() as runtime:
        private = os.path.join(runtime, "jqjail")
        os.mkdir(private, 0o700)
        sock = os.path.join(private, "jqjail.sock")
        proc = subprocess.Popen([daemon, "--socket", sock, "--store", os.path.join(private, "store")], stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while not _accepts(sock):
                assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
                time.sleep(0.02)
            monkeypatch.delenv("JQJAIL_SOCKET", raising=False)
            monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
            assert _wire.candidate_sockets(None) == [_wire.SYSTEM_SOCKET, sock]
            with jqjail.Client() as c:
                assert c.socket_path == sock
                assert c.run("1+1", "null").output == "2"
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def test_inputs_are_json_text_or_any_json_value(socket_path):
    with jqjail.Client(socket_path) as c:
        assert c.run(".a", {"a": [1, "é"]}).value() == [1, "é"]
        assert c.run("length", [1, 2, 3]).output == "3"
        assert c.run(".", 2**70).output == str(2**70)
        assert c.run(".", '{"a":1}').output == '{"a":1}'
        assert c.run(".", b"[1]").output == "[1]"
        with pytest.raises(TypeError, match="not JSON text or a JSON value"):
            c.run(".", {"a": float("nan")})


def test_a_buffer_takes_over_a_hidden_run(socket_path):
    with jqjail.Client(socket_path) as c:
        hidden = c.run("[range(5000)]", "null", on_oversize="hide", max_output_bytes=1000)
        assert isinstance(hidden, jqjail.Hidden)
        buffer = jqjail.HideBuffer(c, pages="bytes")
        buffer.take_over(hidden)
        second = buffer.next()
        assert (second.hide_id, second.page) == (hidden.entry.id, 2)
        # A JSON page 1 ends between values, not where the byte page ends: page 1 again.
        json_pages = jqjail.HideBuffer(c)
        json_pages.take_over(hidden)
        first = json_pages.next()
        assert (first.page, first.pages) == (1, "json") and first.text.startswith("[0,1,2")
        # Page 1 was cut at 16,384 bytes: a buffer of another page size starts from page 1 at
        # its own size, rather than skip bytes or serve them twice.
        small = jqjail.HideBuffer(c, 4096)
        small.take_over(hidden)
        again = small.next()
        assert again.page == 1 and again.text.startswith("[0,1,2")


def test_the_package_has_the_workspaces_version():
    # The wheel's version is the Rust workspace's (maturin reads it from Cargo.toml).
    import importlib.metadata
    import re

    cargo = (REPO / "Cargo.toml").read_text()
    workspace = re.search(r'\[workspace\.package\]\nversion = "([^"]+)"', cargo).group(1)
    assert jqjail.__version__ == workspace
    assert importlib.metadata.version("jqjail") == workspace


def test_runs_over_a_stream_of_values(socket_path):
    with jqjail.Client(socket_path) as c:
        assert c.run_values("reduce inputs as $x (0; . + $x)", "1 2 3", null_input=True).output == "6"
        assert c.run_values(". * 10", "1 2", outputs="lines").output == "10\n20\n"
        with pytest.raises(jqjail.JqjailError) as e:
            c.run_values(".", "1 {")
        assert e.value.code == "INVALID_JSON"

    async def main():
        c = await jqjail.AsyncClient.connect(socket_path)
        try:
            return (await c.run_values("[., input]", "1 2")).output
        finally:
            await c.close()

    import asyncio

    assert asyncio.run(main()) == "[1,2]"
