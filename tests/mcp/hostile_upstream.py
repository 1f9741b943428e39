"""A hostile upstream MCP server (stdio, JSON-RPC by hand, standard library only): each tool
answers with about 2 MB in a different place of the result, to check that the wrapper keeps
every large result out of the model's context, whatever its shape."""

import json
import sys

BIG = "X" * 2_000_000
# The last: a name of upstream bytes (each kept result of it must not repeat them: issue 37).
NAMED = "X" * 100
TOOLS = ["error_text", "resource", "structured", "image", "rpc_error", "small", "chatty", "body", "meta", "flood", "malformed", "wide", "long", "keys", NAMED]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    rid, method = message["id"], message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        tools = [{"name": n, "description": n, "inputSchema": {"type": "object", "properties": {}}} for n in TOOLS]
        # Issue 34: a 1.5 MB description, and a name listed twice.
        tools.append({"name": "verbose", "description": "D" * 1_500_000, "inputSchema": {"type": "object"}})
        tools.append({"name": "small", "description": "the second `small`", "inputSchema": {"type": "object"}})
        # A 1 MB input schema, and 2,000 more tools.
        tools.append({"name": "schema", "description": "s", "inputSchema": {"type": "object", "description": "S" * 1_000_000}})
        # Output schemas (issue 37): one a tool follows, whose large result jqjail changes; and
        # one of 1 MB.
        tools.append({"name": "shaped", "inputSchema": {"type": "object"},
                      "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}})
        tools.append({"name": "huge_schema", "inputSchema": {"type": "object"},
                      "outputSchema": {"type": "object", "description": "O" * 1_000_000}})
        # A schema no client compiles (one made the TypeScript SDK refuse every tool), and
        # one whose pattern takes a client exponential time on a small result.
        tools.append({"name": "bad_schema", "inputSchema": {"type": "object"},
                      "outputSchema": {"type": "object", "properties": {"n": {"type": "nope"}}}})
        tools.append({"name": "redos", "inputSchema": {"type": "object"},
                      "outputSchema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}})
        tools += [{"name": f"many{i}", "inputSchema": {"type": "object"}} for i in range(2000)]
        result = {"tools": tools}
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "chatty":
            # Notifications while the call runs: a log message, and the tool list changed.
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "hostile", "data": "working on it"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "done"}]}})
            continue
        if name == "flood":
            # Issue 34: 400 notifications of 100 KB each during one call.
            for i in range(400):
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "logger": "hostile", "data": f"{i}:" + "N" * 100_000}})
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "flooded"}]}})
            continue
        if name == "malformed":
            # A result that is not a tool result, with 1 MB in it: the call fails upstream-side.
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": "M" * 1_000_000}})
            continue
        if name == "wide":
            # Issue 34: 40 MB of small objects in one answer (written as text: Python's own
            # objects for it would take a gigabyte).
            rows = ",".join(['{"a":1}'] * 5_000_000)
            sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"w"}],"structuredContent":{"rows":[%s]}}}\n' % (json.dumps(rid), rows))
            sys.stdout.flush()
            continue
        if name == "long":
            # An answer of 50 MB, over any message bound.
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "L" * 50_000_000}]}})
            continue
        if name == "shaped":
            big = message["params"].get("arguments", {}).get("big")
            n = {"n": 7, "pad": "Z" * 2_000_000} if big else {"n": 7}
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(n)}], "structuredContent": n}})
            continue
        if name == "redos":
            s = {"s": "a" * 40 + "b"}
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(s)}], "structuredContent": s}})
            continue
        if name == NAMED:
            n = message["params"].get("arguments", {}).get("n", 0)
            send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps({"n": n, "pad": "z" * 5000})}]}})
            continue
        if name == "rpc_error":
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32000, "message": BIG}})
            continue
        result = {
            "error_text": {"content": [{"type": "text", "text": BIG}], "isError": True},
            "resource": {"content": [{"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": BIG}}]},
            "structured": {"content": [{"type": "text", "text": "small"}], "structuredContent": {"data": BIG}},
            "image": {"content": [{"type": "image", "data": "QUFB" * 500_000, "mimeType": "image/png"}]},
            "small": {"content": [{"type": "text", "text": '{"ok": true}'}]},
            # A JSON result whose one field is 90,000 bytes: what a `jq` of `.body` returns.
            "body": {"content": [{"type": "text", "text": json.dumps({"id": 1, "body": "Z" * 90_000})}]},
            # JSON whose keys are long and nested deep: a JSON page names its paths, and keys
            # are the upstream's bytes too.
            "keys": {"content": [{"type": "text", "text": json.dumps([{"X" * 300: {"Z" * 200: [{"X" * 50: "Z" * 40}] * 20}} for _ in range(40)])}]},
            # A small result with 2 MB in its `_meta`.
            "meta": {"content": [{"type": "text", "text": "small"}], "_meta": {"blob": "Z" * 2_000_000}},
        }[name]
    else:
        result = {}
    send({"jsonrpc": "2.0", "id": rid, "result": result})
