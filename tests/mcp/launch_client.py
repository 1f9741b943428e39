"""Launches an MCP server as a client configuration does (COMMAND ARGS…, with this process's
environment and working directory) and drives it with the official MCP Python SDK: initialize,
list the tools, one `jq` call. Prints a JSON summary on success; any failed check raises.

Usage: python launch_client.py COMMAND ARGS…
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(command, args):
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ), cwd=os.getcwd())
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "jqjail", init.server_info
            tools = [t.name for t in (await session.list_tools()).tools]
            assert "jq" in tools and "hide_next" in tools, tools
            result = await session.call_tool("jq", {"filter": ".a[1]", "input": '{"a": [1, 2]}'})
            text = result.content[0].text
            assert not result.is_error and text == "2", result
            print(json.dumps({"server": init.server_info.name, "version": init.server_info.version, "tools": tools}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
