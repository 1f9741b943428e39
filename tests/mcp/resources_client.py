"""Drives `jqjail mcp`'s resources with the official MCP Python SDK (PyPI `mcp`), on both
revisions it negotiates: a `ClientSession` (the initialize handshake) and a `Client` that
negotiates 2026-07-28, where list changes arrive through `subscriptions/listen`.

Checks: the templates; a tool result kept as a hide carries a `resource_link`; the client is
told the list changed; the list holds the hide (paginated: 102 hides take two pages); reading
the link gives the hide's shape and page 1, a page URI gives that page, and reads move no
`hide_next` cursor; a page past the end, an unknown hide and a foreign URI are errors.
Prints a JSON summary on success; any failed check raises.

Usage: python resources_client.py JQJAIL_CLI SOCKET
"""

import asyncio
import json
import re
import sys

from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged

TEMPLATES = {"jqjail://hide/{id}", "jqjail://hide/{id}/page/{n}"}
RESOURCE_NOT_FOUND = -32002


def blocks(result):
    """The text and the resource link of a tool result that kept a hide."""
    assert not result.is_error, result
    kinds = [c.type for c in result.content]
    assert kinds == ["text", "resource_link"], kinds
    text, link = result.content
    hide_id = re.search(r"kept it as hide (\S+)\.", text.text).group(1)
    assert link.uri == f"jqjail://hide/{hide_id}", (link.uri, hide_id)
    assert link.name == hide_id and link.size > 100_000, link
    return text.text, link


async def refused(read, uri):
    try:
        await read(uri)
    except MCPError as e:
        return e.error.code, e.error.message
    raise AssertionError(f"reading {uri} did not fail")


async def eventually(event, what):
    try:
        await asyncio.wait_for(event.wait(), 10)
    except TimeoutError:
        raise AssertionError(f"no notifications/resources/list_changed after {what}")
    event.clear()


async def handshake(server, report):
    changed = asyncio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/resources/list_changed":
            changed.set()

    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            assert init.capabilities.resources.list_changed, init.capabilities
            templates = (await session.list_resource_templates()).resource_templates
            assert {t.uri_template for t in templates} == TEMPLATES, templates
            assert (await session.list_resources()).resources == []

            result = await session.call_tool("jq", {"filter": "[range(30000)]", "input": "null"})
            text, link = blocks(result)
            await eventually(changed, "a hide was kept")
            listed = (await session.list_resources()).resources
            assert [r.uri for r in listed] == [link.uri], listed
            assert listed[0].title == "The output of jq", listed[0]
            assert f"[HIDE id={link.name} head: bytes 0.." in text, text[:300]
            pages = int(re.search(r"page=1/(\d+) ", (await session.read_resource(f"{link.uri}/page/1")).contents[0].text).group(1))
            assert pages >= 4, pages

            # The link: what the hide is, its shape and page 1, as the tool answered.
            whole = (await session.read_resource(link.uri)).contents
            assert len(whole) == 1 and whole[0].mime_type == "text/plain", whole
            assert f"kept it as hide {link.name}" in whole[0].text and "Shape: " in whole[0].text, whole[0].text[:300]
            assert f"[HIDE id={link.name} head: bytes 0.." in whole[0].text, whole[0].text[:300]
            third = (await session.read_resource(f"{link.uri}/page/3")).contents[0].text
            assert f"[HIDE id={link.name} page=3/{pages} " in third, third[:300]
            assert "[END page 3/" in third, third[-100:]
            # The model's cursor is where its own reading left it: the head and tail, so
            # hide_next reads page 1.
            first = (await session.call_tool("hide_next", {})).content[0].text
            assert f"page=1/{pages} " in first, first[:300]

            code, message = await refused(session.read_resource, f"{link.uri}/page/{pages + 1}")
            assert message.startswith("PAGE_OUT_OF_RANGE: "), (code, message)
            code, message = await refused(session.read_resource, "jqjail://hide/nosuch-0123456789abcdef")
            assert code == RESOURCE_NOT_FOUND and "NOT_FOUND" in message, (code, message)
            for uri in ["file:///etc/passwd", "jqjail://hide/", f"{link.uri}/page/0", f"{link.uri}/page/-1",
                        f"{link.uri}/page/x", f"{link.uri}/pages/1", "jqjail://hide/a b"]:
                await refused(session.read_resource, uri)

            # 101 more hides: the list comes in pages, newest first, each hide once.
            for n in range(101):
                more = await session.call_tool(
                    "jq", {"filter": "[range(20000)] | .[0] = $n", "input": "null", "args": {"n": n}}
                )
                blocks(more)
            first = await session.list_resources()
            assert len(first.resources) == 100 and first.next_cursor, (len(first.resources), first.next_cursor)
            rest = await session.list_resources(params=_cursor(first.next_cursor))
            assert len(rest.resources) == 2 and rest.next_cursor is None, rest
            uris = [r.uri for r in first.resources + rest.resources]
            assert len(set(uris)) == 102 and uris[-1] == link.uri, uris[-3:]
            code, message = await refused(lambda c: session.list_resources(params=_cursor(c)), "not-a-cursor")
            report["legacy"] = {"protocol_version": init.protocol_version, "pages": pages, "listed": len(uris)}


def _cursor(cursor):
    from mcp.types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)


async def modern(server, report):
    async with Client(server, mode="auto") as client:
        version = client.protocol_version
        async with client.listen(resources_list_changed=True) as sub:
            assert sub.honored.resources_list_changed, sub.honored
            result = await client.call_tool("jq", {"filter": ".[]", "input": json.dumps([list(range(25000))])})
            _, link = blocks(result)
            event = await asyncio.wait_for(sub.__anext__(), 10)
            assert isinstance(event, ResourcesListChanged), event
        listed = (await client.list_resources()).resources
        assert [r.uri for r in listed] == [link.uri], listed
        whole = (await client.read_resource(link.uri)).contents[0].text
        assert f"kept it as hide {link.name}" in whole, whole[:300]
        page = (await client.read_resource(f"{link.uri}/page/2")).contents[0].text
        assert f"[HIDE id={link.name} page=2/" in page, page[:300]
        # At most 16 streams a session: the 17th is refused before it is acknowledged.
        from contextlib import AsyncExitStack

        async with AsyncExitStack() as stack:
            for _ in range(16):
                await stack.enter_async_context(client.listen(resources_list_changed=True))
            try:
                async with client.listen(resources_list_changed=True):
                    raise AssertionError("a 17th subscriptions/listen was acknowledged")
            except MCPError:
                pass
        report["modern"] = {"protocol_version": version}


async def main(cli, socket):
    server = StdioServerParameters(command=cli, args=["mcp", "--socket", socket])
    report = {}
    await handshake(server, report)
    await modern(server, report)
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
