"""Drives `jqjail mcp --upstream -- mcp-server-filesystem DIR` with the official MCP Python SDK:
the filesystem server (npm, @modelcontextprotocol/server-filesystem) is a real third-party MCP
server. Checks that its tools are offered with a `jq` argument and their output schemas, that a
small result passes through untouched (its structured content too, which the SDK checks against
the schema), that a large JSON file comes back as a hide that jq can filter by ID and that its
`resource_link` reads, that `jq` narrows a result in a worker (and refuses text that is not
JSON), that upstream errors are forwarded, and that a dead upstream is reported as a tool error
while jqjail's tools still work. A result jqjail changes does not follow the tool's output
schema, so it comes marked as an error (which the SDK does not check against the schema).

Usage: python wrapper_client.py JQJAIL_CLI SOCKET FILESYSTEM_SERVER
"""

import asyncio
import json
import os
import re
import signal
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

OWN = ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]


def text_of(result):
    return "\n".join(c.text for c in result.content if c.type == "text")


async def call(session, name, args, *, error=False):
    result = await asyncio.wait_for(session.call_tool(name, args), 60)
    text = text_of(result)
    assert bool(result.is_error) == error, f"{name} {args}: is_error={result.is_error}: {text[:500]}"
    return text


def upstream_pids(marker):
    """The node processes serving `marker` (the temp dir only the upstream's command names)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv and any(b"node" in a or b"mcp-server-filesystem" in a for a in argv[:2]):
            if not any(a.endswith(b"jqjail-mcp") or a.endswith(b"jqjail") for a in argv[:1]):
                pids.append(int(pid))
    return pids


async def main(cli, socket, fs_server):
    with tempfile.TemporaryDirectory(prefix="jqjail-fs-") as root:
        root = os.path.realpath(root)
        big = [{"id": i, "name": f"item {i}", "tags": ["a", "b"] if i % 3 else []} for i in range(4000)]
        big_text = json.dumps(big, indent=1)
        with open(os.path.join(root, "big.json"), "w") as f:
            f.write(big_text)
        with open(os.path.join(root, "small.txt"), "w") as f:
            f.write("hello, not JSON\n")
        server = StdioServerParameters(
            command=cli,
            args=["mcp", "--socket", socket, "--upstream", "--hide-over", "16384", "--", fs_server, root],
        )
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                tools = {t.name: t for t in (await session.list_tools()).tools}
                for name in OWN:
                    assert name in tools, sorted(tools)
                read_tool = "read_text_file" if "read_text_file" in tools else "read_file"
                assert read_tool in tools, sorted(tools)
                upstream_names = sorted(set(tools) - set(OWN))
                for name in upstream_names:
                    assert "jq" in tools[name].input_schema["properties"], tools[name].input_schema
                # The upstream's output schema is offered (it was dropped before issue 37).
                schema = tools[read_tool].output_schema
                assert schema and schema["properties"]["content"]["type"] == "string", schema
                assert "marked as an error" in tools[read_tool].description, tools[read_tool].description

                # Small: untouched, structured content and all.
                result = await asyncio.wait_for(session.call_tool(read_tool, {"path": os.path.join(root, "small.txt")}), 60)
                assert not result.is_error and text_of(result) == "hello, not JSON\n", result
                assert result.structured_content == {"content": "hello, not JSON\n"}, result

                # Large JSON: a hide, with its shape and page 1 and a link to it; then filtered
                # by ID. Not the tool's schema: marked as an error.
                result = await asyncio.wait_for(session.call_tool(read_tool, {"path": os.path.join(root, "big.json")}), 60)
                kept = text_of(result)
                assert result.is_error and result.structured_content is None, str(result)[:600]
                assert "kept it as hide" in kept and "Shape: " in kept, kept[:600]
                link = result.content[-1]
                assert link.type == "resource_link" and link.title == "The upstream tool's result", link
                page3 = (await session.read_resource(f"{link.uri}/page/3")).contents[0].text
                assert f"page=3/" in page3 and len(page3) < 20_000, page3[:300]
                assert len(kept) < 20_000, len(kept)
                hide_id = re.search(r"\[HIDE id=(\S+) head: bytes 0\.\.", kept).group(1)
                assert await call(session, "jq", {"filter": "length", "hide_id": hide_id}) == "4000"
                assert await call(session, "jq", {"filter": "[.[] | select(.tags == [])] | length", "hide_id": hide_id}) == "1334"
                page1 = await call(session, "hide_next", {})
                assert f"[HIDE id={hide_id} page=1/" in page1, page1[:300]

                # The `jq` argument narrows the result in a worker before it is returned.
                narrowed = await call(
                    session, read_tool, {"path": os.path.join(root, "big.json"), "jq": ".[1234].name"}, error=True
                )
                assert narrowed == '"item 1234"', narrowed
                not_json = await call(
                    session, read_tool, {"path": os.path.join(root, "small.txt"), "jq": "."}, error=True
                )
                assert not_json.startswith("INVALID_JSON: "), not_json
                hostile = await call(
                    session, read_tool, {"path": os.path.join(root, "big.json"), "jq": "[range(1e9)]"}, error=True
                )
                assert hostile.startswith("MEMORY_LIMIT: "), hostile

                # The upstream's own error comes back as its tool error.
                missing = await call(session, read_tool, {"path": os.path.join(root, "nope.json")}, error=True)
                assert "nope.json" in missing or "ENOENT" in missing, missing

                # A dead upstream: a clear tool error, no hang; jqjail's tools still work.
                pids = upstream_pids(root)
                assert pids, "no upstream process found"
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
                await asyncio.sleep(0.5)
                dead = await call(session, read_tool, {"path": os.path.join(root, "small.txt")}, error=True)
                assert dead.startswith("UPSTREAM_FAILED: "), dead
                assert await call(session, "jq", {"filter": ".a", "input": '{"a": 5}'}) == "5"

                print(json.dumps({
                    "protocol_version": init.protocol_version,
                    "upstream_tools": upstream_names,
                    "read_tool": read_tool,
                    "hide_id": hide_id,
                }))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
