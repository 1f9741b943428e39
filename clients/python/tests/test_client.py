"""The Python package against the real daemon: every request, typed errors, exact integers,
raw non-ASCII, hides and paging, the asyncio client, and the tool definitions."""

import asyncio
import json
import os
import socket
import struct
import threading

import pytest

import jqjail

ISSUES = json.dumps([{"id": i, "title": f"issue {i} é", "labels": [{"name": "bug"}] if i % 2 else []} for i in range(50)])


def test_runs_filters_and_keeps_integers_exact(socket_path):
    with jqjail.Client(socket_path) as c:
        assert c.limits.max_output_bytes == 100_000
        assert c.server.startswith("jqjaild/")
        reply = c.run(".[1].title", ISSUES)
        assert reply.output == '"issue 1 é"'
        assert reply.value() == "issue 1 é"
        assert reply.cost.input_bytes == len(ISSUES.encode())
        big = c.run(".n", '{"n": 12345678901234567890}')
        assert big.output == "12345678901234567890"
        assert big.value() == 12345678901234567890
        assert c.run(".[]", "[1,2]", outputs="lines").output == "1\n2\n"
        assert c.run("items[*].id", '{"items":[{"id":1},{"id":2}]}', lang="path").value() == [1, 2]


def test_arguments_are_data_never_code(socket_path):
    injected = '"); halt_error("x'
    with jqjail.Client(socket_path) as c:
        reply = c.run("[$q, $n, $ARGS.positional]", "null", args={"q": injected, "n": 2**70}, positional=["é", 1])
        assert reply.value() == [injected, 2**70, ["é", 1]]


def test_non_ascii_is_sent_raw(socket_path):
    # The frame carries the filter; if it were escaped its byte length would differ, which the
    # daemon cannot see. So check the encoder itself, then a round trip through the daemon.
    from jqjail import _requests, _wire

    body = _wire.run_request('"é"', "null", None).body
    assert "é".encode() in body and b"\\u00e9" not in body
    with jqjail.Client(socket_path) as c:
        assert c.run('"é" + .', '"ü"').value() == "éü"


def test_errors_carry_their_code_limit_and_value(socket_path):
    with jqjail.Client(socket_path) as c:
        with pytest.raises(jqjail.JqjailError) as e:
            c.run("[range(1e9)]", "null")
        assert e.value.code == "MEMORY_LIMIT"
        with pytest.raises(jqjail.JqjailError) as e:
            c.run(".[", "null")
        assert e.value.code == "COMPILE_ERROR"
        with pytest.raises(jqjail.JqjailError) as e:
            c.run(".", "{oops")
        assert e.value.code == "INVALID_JSON"
        with pytest.raises(jqjail.JqjailError) as e:
            c.run("[range(100000)]", "null", max_output_bytes=1000)
        assert (e.value.code, e.value.limit) == ("OUTPUT_TOO_LARGE", 1000)
        # The connection is still usable after each of them.
        assert c.run("1+1", "null").output == "2"


def test_hides_put_get_cut_search_list_delete_usage(socket_path):
    with jqjail.Client(socket_path) as c:
        put = c.hide_put(ISSUES, source="github", meta={"turn": "7"})
        entry = put["entry"]
        assert entry.id.startswith("github-") and entry.meta == {"turn": "7"}
        assert c.hide_get(entry.id).content == ISSUES.encode()
        cut = c.hide_cut(entry.id, 2, page_size=100, hint=False)
        assert (cut.page, cut.offset) == (2, 100)
        found = c.hide_search(entry.id, "issue 49", page_size=100)
        assert found["matches"]
        assert c.run("length", hide_id=entry.id).output == "50"
        assert c.shape(hide_id=entry.id)["items"]["keys"]["labels"]["type"] == "array"
        assert entry.id in [e.id for e in c.hide_list()]
        assert c.hide_usage()["entries"] >= 1
        assert c.hide_delete(entry.id).id == entry.id
        with pytest.raises(jqjail.JqjailError) as e:
            c.hide_get(entry.id)
        assert e.value.code == "NOT_FOUND"


def test_json_pages_by_number_and_by_path(socket_path):
    with jqjail.Client(socket_path) as c:
        hide_id = c.hide_put(ISSUES, source="github")["entry"].id
        first = c.hide_page(hide_id, 1, page_size=300, hint=True)
        assert first.pages == "json" and first.json.first == "$"
        pages = [first] + [c.hide_page(hide_id, n, page_size=300) for n in range(2, first.total_pages + 1)]
        assert b"".join(p.content for p in pages) == ISSUES.encode()
        assert pages[1].json.array == {"path": "$", "length": 50}
        assert f"It holds {first.json.first} through {first.json.last}" in first.preface
        at = c.hide_page(hide_id, path=".[49].title", page_size=300)
        value = ISSUES.encode().index(b'"issue 49 ')
        assert at.offset <= value < at.offset + len(at.content)
        assert c.hide_page(hide_id, offset=value, page_size=300).page == at.page
        with pytest.raises(jqjail.JqjailError) as e:
            c.hide_page(hide_id, path="$[50]")
        assert e.value.code == "NOT_FOUND"
        with pytest.raises(jqjail.JqjailError) as e:
            c.hide_page(hide_id, path="$[-1]")
        assert e.value.code == "INVALID_REQUEST"
        with pytest.raises(TypeError):
            c.hide_page(hide_id)
        assert c.hide_page(hide_id, 2, page_size=100, pages="bytes").content == c.hide_cut(hide_id, 2, 100).content
        text_id = c.hide_put("plain text " * 50, source="notes")["entry"].id
        text = c.hide_page(text_id, 1, page_size=64)
        assert text.pages == "bytes" and "not one JSON value" in text.not_json


def test_an_oversized_output_becomes_a_hide_and_the_buffer_pages_it(socket_path):
    with jqjail.Client(socket_path) as c:
        hidden = c.run("[range(30000)]", "null", on_oversize="hide")
        assert isinstance(hidden, jqjail.Hidden)
        assert hidden.first.page == 1 and hidden.first.preface
        buf = jqjail.HideBuffer(c, 16_384)
        buf.latest = (hidden.entry.id, hidden.entry.size)
        first = buf.call_tool("hide_next", {})
        assert f"[HIDE id={hidden.entry.id} page=1/" in first
        assert "page=2/" in buf.call_tool("hide_next", {})
        assert buf.call_tool("hide_search", {"query": "29999"}).startswith("Found '29999' on page")
        assert buf.call_tool("hide_jump", {"page": 999}).startswith("error: PAGE_OUT_OF_RANGE")
        # JSON pages: the header names the paths, a path finds its page.
        assert " · $[" in buf.call_tool("hide_jump", {"page": 2})
        jumped = buf.call_tool("hide_jump", {"path": "$[29999]"})
        assert "29999" in jumped and "· $[" in jumped, jumped[:300]
        assert buf.call_tool("hide_jump", {}).startswith("error: hide_jump needs")


def test_head_and_tail_name_what_lies_between_and_are_the_buffers_first_answer(socket_path):
    with jqjail.Client(socket_path) as c:
        hide_id = c.hide_put(ISSUES, source="github")["entry"].id
        ends = c.hide_ends(hide_id, page_size=600, hint=True)
        whole = ISSUES.encode()
        left = ends.left_out
        assert ends.head.offset == 0 and ends.content[: ends.head.length] == whole[: ends.head.length]
        assert left.offset == ends.head.length and ends.tail.offset == left.offset + left.bytes
        assert ends.content[ends.head.length :] == whole[ends.tail.offset :] and ends.tail.offset + ends.tail.length == len(whole)
        assert left.elements["array"] == "$" and left.elements["length"] == 50, left
        assert f"Left out between them: {left.bytes} bytes" in ends.preface
        assert c.hide_ends(hide_id, page_size=1 << 20).tail is None
        with pytest.raises(jqjail.JqjailError) as e:
            c.hide_ends(hide_id, page_size=100)
        assert e.value.code == "INVALID_REQUEST" and "page_size is 100" in e.value.message
        # The buffer's first answer is the head and tail; then paging starts at page 1.
        buf = jqjail.HideBuffer(c, 600)
        shown = buf.first_answer(hide_id)
        assert shown.startswith(ends.preface) and f"[HIDE id={hide_id} head: bytes 0.." in shown, shown[:300]
        assert "[… left out: bytes " in shown and " of $, in whole or in part (50 elements) …]" in shown, shown
        assert f"[HIDE id={hide_id} page=1/" in buf.call_tool("hide_next", {})
        by_page = jqjail.HideBuffer(c, 600, first="page")
        assert f"[HIDE id={hide_id} page=1/" in by_page.first_answer(hide_id)
        assert f"[HIDE id={hide_id} page=2/" in by_page.call_tool("hide_next", {})


def test_the_async_client(socket_path):
    async def main():
        async with await jqjail.AsyncClient.connect(socket_path) as c:
            replies = await asyncio.gather(*(c.run(".[%d].id" % i, ISSUES) for i in range(5)))
            assert [r.value() for r in replies] == list(range(5))
            with pytest.raises(jqjail.JqjailError) as e:
                await c.run("def f: f; f", "null", timeout_ms=200)
            assert e.value.code == "TIMEOUT"
            assert (await c.shape('{"a": [1]}'))["keys"]["a"]["length"] == 1

    asyncio.run(main())


def test_a_socket_served_by_an_untrusted_uid_is_refused(socket_path, monkeypatch):
    # The real daemon's uid (read by SO_PEERCRED) is ours or root's, which are always trusted;
    # trust only some other uid to see the refusal, which comes before anything is sent.
    monkeypatch.setattr(jqjail._wire, "trusted_uids", lambda: [4242])
    with pytest.raises(jqjail.ConnectionFailed, match="not trusted"):
        jqjail.Client(socket_path)

    async def connect():
        await jqjail.AsyncClient.connect(socket_path)

    with pytest.raises(jqjail.ConnectionFailed, match="not trusted"):
        asyncio.run(connect())


def test_a_lying_daemon_cannot_make_the_client_allocate(tmp_path):
    path = str(tmp_path / "liar.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)

    def lie():
        conn, _ = server.accept()
        conn.recv(4096)
        conn.sendall(struct.pack("<I", 0xFFFFFFF0))
        conn.close()

    t = threading.Thread(target=lie)
    t.start()
    with pytest.raises(jqjail.ConnectionFailed, match="over the"):
        jqjail.Client(path)
    t.join()
    server.close()


def test_a_deeply_nested_frame_is_the_clients_own_error(tmp_path):
    # A hello reply nested 100,000 deep: Python's json raised RecursionError through the client.
    path = str(tmp_path / "deep.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    body = b"[" * 100_000 + b"]" * 100_000

    def answer():
        conn, _ = server.accept()
        conn.recv(4096)
        conn.sendall(struct.pack("<I", len(body)) + body)
        conn.close()

    t = threading.Thread(target=answer)
    t.start()
    with pytest.raises(jqjail.ConnectionFailed, match="nested too deeply"):
        jqjail.Client(path)
    t.join()
    server.close()


def test_tool_definitions_in_each_format():
    names = [t["name"] for t in jqjail.definitions()]
    assert names == ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]
    assert jqjail.definitions("openai")[0]["function"]["name"] == "jq"
    assert "input_schema" in jqjail.definitions("anthropic")[0]


def test_an_interrupted_call_closes_the_connection_instead_of_answering_out_of_step(socket_path):
    slow = "reduce range(6000000) as $i (0; . + 1) | tostring"  # about 1.5 s
    c = jqjail.Client(socket_path, timeout=0.3)
    with pytest.raises(jqjail.ConnectionFailed, match="timed out"):
        c.run(slow, "null")
    # Before: this call got the slow filter's answer, and the next one this call's.
    with pytest.raises(jqjail.ConnectionFailed, match="unusable"):
        c.run(".b", '{"b": "second"}')
    c.close()

    async def main():
        a = await jqjail.AsyncClient.connect(socket_path)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(a.run(slow, "null"), 0.3)
        with pytest.raises(jqjail.ConnectionFailed, match="unusable"):
            await a.run(".b", '{"b": "second"}')
        await a.close()

    asyncio.run(main())


def test_a_lying_daemons_head_and_tail_is_refused():
    """An attacker's review found the decoder took any numbers: a negative head, a left-out
    part of 2**64 bytes, elements that were not an object."""
    from jqjail._wire import ConnectionFailed, ends_of

    good = {
        "hide_id": "x-00000000", "size": 100, "page_size": 40, "pages": "bytes",
        "head": {"offset": 0, "length": 20}, "tail": {"offset": 80, "length": 20},
        "left_out": {"offset": 20, "bytes": 60, "elements": {"array": "$", "from": 1, "to": 3, "length": 9}},
    }
    assert ends_of(good, b"a" * 40).left_out.elements["to"] == 3
    lies = [
        {"head": {"offset": 0, "length": -3}},
        {"head": {"offset": 0, "length": 41}},
        {"left_out": {"offset": 20, "bytes": 2**64 - 1}},
        {"left_out": {"offset": 20, "bytes": 60, "elements": "oops"}},
        {"left_out": {"offset": 20, "bytes": 60, "elements": {"array": "$", "from": 5, "to": 3}}},
        {"size": 99},
        {"tail": None},
    ]
    for lie in lies:
        with pytest.raises(ConnectionFailed):
            ends_of({**good, **lie}, b"a" * 40)
