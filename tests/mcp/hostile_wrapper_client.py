"""The wrapper in front of tests/mcp/hostile_upstream.py, driven by the official MCP Python
SDK: no result reaches the client with more than the threshold's worth of upstream data,
wherever the upstream put it (an error's text, a resource, structured content, an image, a
JSON-RPC error message), and the large ones are kept as hides that can be read by ID.

Usage: python hostile_wrapper_client.py JQJAIL_CLI SOCKET
"""

import asyncio
import json
import os
import re
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HIDE_OVER = 16_384
# A kept result's answer: the notice, the shape (at most 4 KiB) and page 1 (16 KiB).
ANSWER_MAX = HIDE_OVER + 4096 + 2048


async def main(cli, socket):
    upstream = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_upstream.py")
    server = StdioServerParameters(
        command=cli,
        args=["mcp", "--socket", socket, "--upstream", "--hide-over", str(HIDE_OVER), "--", sys.executable, upstream],
    )
    sizes = {}
    logged = []
    notified = []

    async def on_log(params):
        logged.append(params.data)

    async def on_message(message):
        notified.append(type(message).__name__ if not hasattr(message, "root") else type(message.root).__name__)

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log, message_handler=on_message) as session:
            await session.initialize()
            listed = (await session.list_tools()).tools
            # Issue 34: the listing carried 1.5 MB of upstream descriptions and a tool twice.
            names = [t.name for t in listed]
            assert names.count("small") == 1, names
            verbose = next(t for t in listed if t.name == "verbose")
            assert len(verbose.description) <= 2048 + 64, len(verbose.description)
            assert "schema" not in names, "a 1 MB input schema was offered"
            assert sum(n.startswith("many") for n in names) < 512, len(names)
            sizes["tools_list"] = len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in listed]))
            assert sizes["tools_list"] < 512 * 2200 + 100_000, sizes
            # An upstream output schema is offered, unless it is too large.
            shaped = next(t for t in listed if t.name == "shaped")
            assert shaped.output_schema["required"] == ["n"], shaped
            huge = next(t for t in listed if t.name == "huge_schema")
            assert huge.output_schema is None, "a 1 MB output schema was offered"
            # Only what clients check safely is offered: no schema no client compiles, no
            # pattern to run on every result.
            bad = next(t for t in listed if t.name == "bad_schema")
            assert bad.output_schema is None and "marked as an error" not in (bad.description or ""), bad
            redos = next(t for t in listed if t.name == "redos")
            assert redos.output_schema == {"type": "object", "properties": {"s": {"type": "string"}}}, redos
            result = await asyncio.wait_for(session.call_tool("redos", {}), 30)
            assert not result.is_error and result.structured_content == {"s": "a" * 40 + "b"}, result
            # Small: passed through, structured content and all (the SDK checks it). Large:
            # kept as a hide and so marked as an error (the SDK checks no error's schema).
            result = await asyncio.wait_for(session.call_tool("shaped", {}), 60)
            assert not result.is_error and result.structured_content == {"n": 7}, result
            result = await asyncio.wait_for(session.call_tool("shaped", {"big": True}), 60)
            assert result.is_error and "kept it as hide" in result.content[0].text, str(result)[:300]
            assert len(json.dumps(result.model_dump(mode="json", exclude_none=True))) < ANSWER_MAX
            for name, is_error in [("error_text", True), ("resource", False), ("structured", False), ("image", False)]:
                result = await asyncio.wait_for(session.call_tool(name, {}), 60)
                size = len(json.dumps(result.model_dump(mode="json", exclude_none=True)))
                sizes[name] = size
                assert size < ANSWER_MAX, f"{name}: {size} bytes reached the client"
                assert bool(result.is_error) == is_error, (name, result.is_error)
                text = result.content[0].text
                assert "kept it as hide" in text, text[:300]
                hide_id = re.search(r"\[HIDE id=(\S+) head: bytes 0\.\.", text).group(1)
                # The whole result is in the hide, readable by ID: its last page too.
                first = await session.call_tool("hide_jump", {"hide_id": hide_id, "page": 1})
                pages = int(re.search(r"page=1/(\d+) ", first.content[0].text).group(1))
                assert pages > 100, pages
                last = await session.call_tool("hide_jump", {"hide_id": hide_id, "page": pages})
                assert not last.is_error and f"page={pages}/{pages}" in last.content[0].text, last
            rpc = await asyncio.wait_for(session.call_tool("rpc_error", {}), 60)
            sizes["rpc_error"] = len(rpc.content[0].text)
            assert rpc.is_error and rpc.content[0].text.startswith("UPSTREAM_ERROR: "), rpc.content[0].text[:200]
            assert sizes["rpc_error"] < ANSWER_MAX, sizes
            small = await session.call_tool("small", {})
            assert (small.content[0].text, bool(small.is_error)) == ('{"ok": true}', False), small
            # The upstream's notifications are relayed to the client.
            chatty = await session.call_tool("chatty", {})
            assert chatty.content[0].text == "done", chatty
            for _ in range(50):
                if logged and any("ToolListChanged" in n for n in notified):
                    break
                await asyncio.sleep(0.1)
            assert logged == ["working on it"], logged
            assert any("ToolListChanged" in n for n in notified), notified
            # Issue 34: 400 notifications of 100 KB during one call were all relayed whole
            # (40 MB). Now each is cut to the threshold, and at most 20 a second pass.
            logged.clear()
            flood = await asyncio.wait_for(session.call_tool("flood", {}), 60)
            assert flood.content[0].text == "flooded", flood
            await asyncio.sleep(0.5)
            biggest = max(len(json.dumps(d)) for d in logged)
            assert biggest <= HIDE_OVER + 64, biggest
            assert 1 <= len(logged) <= 60, len(logged)
            sizes["flood"] = sum(len(json.dumps(d)) for d in logged)
            # Issue 34: an upstream failure's text carried 1 MB of the upstream's reply.
            bad = await asyncio.wait_for(session.call_tool("malformed", {}), 60)
            sizes["malformed"] = len(bad.content[0].text)
            assert bad.is_error and sizes["malformed"] < HIDE_OVER + 1024, sizes
    await modern(server)
    print(json.dumps(sizes))


async def modern(server):
    """On 2026-07-28: the upstream's tool-list changes come through `subscriptions/listen`, and
    a result passed through unchanged is a complete one (before, the SDK refused it)."""
    from mcp import Client
    from mcp.shared.subscriptions import ToolsListChanged

    async with Client(server, mode="auto") as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        small = await asyncio.wait_for(client.call_tool("small", {}), 30)
        assert small.content[0].text == '{"ok": true}', small
        async with client.listen(tools_list_changed=True) as sub:
            assert sub.honored.tools_list_changed, sub.honored
            await asyncio.wait_for(client.call_tool("chatty", {}), 30)
            event = await asyncio.wait_for(sub.__anext__(), 10)
            assert isinstance(event, ToolsListChanged), event


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
