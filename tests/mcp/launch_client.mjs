// Launches an MCP server as a client configuration does (COMMAND ARGS…, with this process's
// environment and working directory) and drives it with the official MCP TypeScript SDK:
// connect, list the tools, one `jq` call. Prints a JSON summary; any failed check throws.
//
// Usage: node launch_client.mjs SDK_DIR COMMAND ARGS…
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [sdk, command, ...args] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(join(sdk, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "dist/esm/client/stdio.js")).href);

const client = new Client({ name: "jqjail-launch-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, env: process.env, cwd: process.cwd() }));
const server = client.getServerVersion();
assert.equal(server.name, "jqjail");
const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
assert.ok(names.includes("jq") && names.includes("hide_next"), names.join());
const result = await client.callTool({ name: "jq", arguments: { filter: ".a[1]", input: '{"a": [1, 2]}' } });
assert.equal(result.content[0].text, "2", JSON.stringify(result));
assert.ok(!result.isError);
console.log(JSON.stringify({ server: server.name, version: server.version, tools: names }));
await client.close();
