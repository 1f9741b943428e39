"""`jqjail mcp --upstream --hide-over N` in front of tests/mcp/hostile_upstream.py, driven by
the official MCP Python SDK, for N in 64, 1000 and 16384: no reply to the client carries more
than N bytes of upstream or filter output, counting every field of the result (the hostile
upstream's data is runs of `X` and `Z`, which jqjail's own text never holds). Then a `jq`
call with a 20 MiB input is answered, and one with a larger input gets an error at once.

Usage: python threshold_client.py JQJAIL_CLI SOCKET
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_upstream.py")


def upstream_bytes(result):
    text = json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))
    return text.count("X") + text.count("Z")


async def with_threshold(cli, socket, n, report):
    server = StdioServerParameters(
        command=cli,
        args=["mcp", "--socket", socket, "--upstream", "--hide-over", str(n), "--", sys.executable, UPSTREAM],
    )
    worst = 0
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()

            async def call(name, args):
                nonlocal worst
                result = await asyncio.wait_for(session.call_tool(name, args), 60)
                seen = upstream_bytes(result)
                worst = max(worst, seen)
                assert seen <= n, f"--hide-over {n}: {name} {args}: {seen} bytes of upstream data reached the client: {str(result)[:300]}"
                return result

            for name in ["error_text", "resource", "structured", "rpc_error", "body", "meta"]:
                await call(name, {})
            # A wrapped tool's `jq` output over the threshold is kept like any other result.
            narrowed = await call("body", {"jq": ".body"})
            text = narrowed.content[0].text
            assert "kept it as hide" in text, text[:300]
            hide = text.split("[HIDE id=")[1].split(" ")[0]
            # Paging it, filtering it and searching it stay under the threshold too.
            for page in range(3):
                await call("hide_next", {"hide_id": hide})
            await call("hide_jump", {"hide_id": hide, "page": 2})
            await call("hide_search", {"hide_id": hide, "query": "zz", "ignore_case": True})
            await call("jq", {"hide_id": hide, "filter": "."})
            await call("jq", {"hide_id": hide, "filter": "error(.)"})
            await call("json_path", {"hide_id": hide, "query": "$"})
            # JSON pages name their paths; long keys in them count against the threshold.
            keys = (await call("keys", {})).content[0].text
            assert "kept it as hide" in keys, keys[:300]
            kept = keys.split("[HIDE id=")[1].split(" ")[0]
            for page in range(4):
                await call("hide_next", {"hide_id": kept})
            await call("hide_jump", {"hide_id": kept, "path": "$[3]." + "X" * 300})
            await call("json_shape", {"input": json.dumps({"Z" * 5000: 1})})
            # The hides read as resources (issue 37): the list, each hide's own URI and its
            # pages stay under the threshold as the tools' answers do.
            async def read(uri):
                nonlocal worst
                result = await asyncio.wait_for(session.read_resource(uri), 60)
                seen = upstream_bytes(result)
                worst = max(worst, seen)
                assert seen <= n, f"--hide-over {n}: read {uri}: {seen} bytes of upstream data reached the client: {str(result)[:300]}"

            # Hides of a tool whose name is upstream bytes: neither their answers nor the
            # list repeat it (each listed hide named it four times before).
            for i in range(40):
                await call("X" * 100, {"n": i})
            listed = await session.list_resources()
            assert upstream_bytes(listed) <= n, str(listed)[:300]
            assert len(listed.resources) >= 2, listed
            for resource in listed.resources:
                await read(resource.uri)
                for page in (1, 2, 5):
                    await read(f"{resource.uri}/page/{page}")
            # A filter error quoting the document is cut, too.
            await call("body", {"jq": "error(.body)"})
    report[str(n)] = worst


async def large_inputs(cli, socket, report):
    server = StdioServerParameters(command=cli, args=["mcp", "--socket", socket])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # 20 MiB (the daemon's input limit) of JSON: answered.
            length = (20 << 20) - 8
            doc = '{"a":"' + "x" * length + '"}'
            assert len(doc) == 20 << 20, len(doc)
            start = time.monotonic()
            result = await asyncio.wait_for(session.call_tool("jq", {"input": doc, "filter": ".a | length"}), 120)
            report["20MiB"] = [result.content[0].text[:120], round(time.monotonic() - start, 2)]
            assert not result.is_error and result.content[0].text == str(length), report
            # Past what one message may hold (twice the input limit and a MiB): an error at once.
            big = "[" + ",".join(["1"] * (22 << 20)) + "]"
            start = time.monotonic()
            result = await asyncio.wait_for(session.call_tool("jq", {"input": big, "filter": "length"}), 60)
            report["44MiB"] = [result.content[0].text[:160], round(time.monotonic() - start, 2)]
            assert result.is_error and result.content[0].text.startswith("INPUT_TOO_LARGE: "), report
            # The session goes on.
            small = await session.call_tool("jq", {"input": "[1,2]", "filter": "add"})
            assert small.content[0].text == "3", small


async def main(cli, socket):
    report = {}
    for n in [64, 1000, 16384]:
        await with_threshold(cli, socket, n, report)
    await large_inputs(cli, socket, report)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
