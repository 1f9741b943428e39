"""Drives `jqjail mcp` with the official MCP Python SDK (PyPI `mcp`), a client jqjail did not
write: lists the tools, calls each, gets a hostile filter's code as a tool error, and pages an
output too large for the limit. Prints a JSON summary on success; any failed check raises.

Usage: python official_client.py JQJAIL_CLI SOCKET
"""

import asyncio
import json
import re
import sys

from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

EXPECTED_TOOLS = ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]


def text_of(result, blocks=1):
    assert len(result.content) == blocks, str(result)[:500]
    return result.content[0].text


async def call(session, name, args, *, error=False, blocks=1):
    result = await session.call_tool(name, args)
    text = text_of(result, blocks)
    assert bool(result.is_error) == error, f"{name} {args}: is_error={result.is_error}: {text}"
    return text


async def main(cli, socket):
    server = StdioServerParameters(command=cli, args=["mcp", "--socket", socket])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "jqjail", init.server_info

            tools = (await session.list_tools()).tools
            names = [t.name for t in tools]
            assert names == EXPECTED_TOOLS, names
            for tool in tools:
                assert tool.input_schema["type"] == "object", tool
                assert tool.description, tool

            doc = json.dumps({"a": [1, 2, {"b": "é"}], "n": 12345678901234567890})
            assert await call(session, "jq", {"filter": ".a[2].b", "input": doc}) == '"é"'
            # Big integers stay exact; a value passed as an argument stays data.
            assert await call(session, "jq", {"filter": ".n", "input": doc}) == "12345678901234567890"
            injected = '"); halt_error("x'
            got = await call(session, "jq", {"filter": "$q", "input": "null", "args": {"q": injected}})
            assert json.loads(got) == injected, got
            assert await call(session, "json_path", {"query": "a[1]", "input": doc}) == "2"
            shape = json.loads(await call(session, "json_shape", {"input": doc}))
            assert shape["keys"]["a"]["type"] == "array", shape
            # json_shape has an output schema: the shape comes as structured content too (the
            # SDK checks it against the schema).
            shaped = await session.call_tool("json_shape", {"input": doc})
            assert shaped.structured_content == shape, shaped

            # Hostile filters come back as tool errors naming the code; the server lives on.
            memory = await call(session, "jq", {"filter": "[range(1e9)]", "input": "null"}, error=True)
            assert memory.startswith("MEMORY_LIMIT: "), memory
            compile_error = await call(session, "jq", {"filter": ".[", "input": "null"}, error=True)
            assert compile_error.startswith("COMPILE_ERROR: "), compile_error
            missing = await call(session, "json_path", {"query": "zzz", "input": doc}, error=True)
            assert missing.startswith("MISSING_PROPERTY: "), missing
            usage = await call(session, "jq", {"input": "null"}, error=True)
            assert usage.startswith("INVALID_REQUEST: "), usage
            unknown = await call(session, "no_such_tool", {}, error=True)
            assert "no_such_tool" in unknown, unknown

            # An output over the limit is kept as a hide: ID, shape and page 1, then paging.
            # (with a link to the hide: see resources_client.py)
            hidden = await call(session, "jq", {"filter": "[range(30000)]", "input": "null"}, blocks=2)
            assert "kept it as hide" in hidden and "Shape: " in hidden, hidden[:500]
            # The first answer is its head and tail, and what lies between (issue 37).
            match = re.search(r"\[HIDE id=(\S+) head: bytes 0\.\.", hidden)
            assert match, hidden[:500]
            hide_id = match.group(1)
            assert f"[HIDE id={hide_id} tail: bytes " in hidden and "[… left out: bytes " in hidden, hidden[-800:]
            assert "elements " in hidden and " of $, in whole or in part (30000 elements)" in hidden, hidden[-800:]
            # Then paging starts at page 1.
            page1 = await call(session, "hide_next", {})
            pages = int(re.search(rf"\[HIDE id={hide_id} page=1/(\d+) ", page1).group(1))
            assert pages >= 2, pages
            second = await call(session, "hide_next", {})
            assert f"[HIDE id={hide_id} page=2/{pages} " in second, second[:300]
            first = await call(session, "hide_jump", {"hide_id": hide_id, "page": 1})
            assert f"page=1/{pages} " in first, first[:300]
            found = await call(session, "hide_search", {"query": "29999"})
            assert found.startswith('Found "29999" on page'), found[:300]
            assert await call(session, "jq", {"filter": "length", "hide_id": hide_id}) == "30000"
            assert await call(session, "json_path", {"query": "[-1]", "hide_id": hide_id}) == "29999"
            hide_shape = json.loads(await call(session, "json_shape", {"hide_id": hide_id}))
            assert hide_shape["length"] == 30000, hide_shape
            gone = await call(session, "hide_jump", {"hide_id": hide_id, "page": pages + 1}, error=True)
            assert gone.startswith("PAGE_OUT_OF_RANGE: ") and "PAGE_OUT_OF_RANGE" not in gone[19:], gone

    # The SDK's high-level client negotiates the newest revision when the server offers it
    # (discovery instead of the initialize handshake): the same tools and errors there.
    async with Client(server, mode="auto") as modern:
        modern_version = modern.protocol_version
        names = [t.name for t in (await modern.list_tools()).tools]
        assert names == EXPECTED_TOOLS, names
        ok = await modern.call_tool("jq", {"filter": ".[1]", "input": "[1, 2]"})
        assert (ok.content[0].text, bool(ok.is_error)) == ("2", False), ok
        bad = await modern.call_tool("jq", {"filter": "def f: [f]; f", "input": "null"})
        assert bad.is_error and bad.content[0].text.startswith("STACK_LIMIT: "), bad

    print(json.dumps({
        "protocol_version": init.protocol_version,
        "modern_protocol_version": modern_version,
        "server": init.server_info.name,
        "hidden_pages": pages,
    }))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
