// Drives `jqjail mcp` with the official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`),
// a client jqjail did not write: lists the tools, calls each, gets a hostile filter's code as
// a tool error, and pages an output too large for the limit. Prints a JSON summary on
// success; any failed check throws.
//
// Usage: node official_ts_client.mjs JQJAIL_CLI SOCKET SDK_DIR
// (SDK_DIR: the installed package, node_modules/@modelcontextprotocol/sdk)
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [cli, socket, sdk] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(join(sdk, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "dist/esm/client/stdio.js")).href);

const client = new Client({ name: "jqjail-test", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: cli, args: ["mcp", "--socket", socket] }));
const server = client.getServerVersion();
assert.equal(server.name, "jqjail");

const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name), ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]);
for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);

async function call(name, args, error = false) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.content.length, 1, JSON.stringify(result));
  const text = result.content[0].text;
  assert.equal(Boolean(result.isError), error, `${name} ${JSON.stringify(args)}: ${text}`);
  return text;
}

const doc = JSON.stringify({ a: [1, 2, { b: "é" }] }).replace("}]", "}],\"n\":12345678901234567890");
assert.equal(await call("jq", { filter: ".a[2].b", input: doc }), '"é"');
assert.equal(await call("jq", { filter: ".n", input: doc }), "12345678901234567890");
assert.equal(await call("json_path", { query: "a[1]", input: doc }), "2");
assert.equal(JSON.parse(await call("json_shape", { input: doc })).keys.a.type, "array");
assert.match(await call("jq", { filter: "[range(1e9)]", input: "null" }, true), /^MEMORY_LIMIT: /);
assert.match(await call("jq", { filter: ".[", input: "null" }, true), /^COMPILE_ERROR: /);
assert.match(await call("json_path", { query: "zzz", input: doc }, true), /^MISSING_PROPERTY: /);
const hidden = await call("jq", { filter: "[range(30000)]", input: "null" });
const match = hidden.match(/\[HIDE id=(\S+) page=1\/(\d+) /);
assert.ok(match, hidden.slice(0, 300));
assert.ok((await call("hide_next", {})).includes(`[HIDE id=${match[1]} page=2/${match[2]} `));
assert.ok((await call("hide_search", { query: "29999" })).startsWith('Found "29999" on page'));
await client.close();
console.log(JSON.stringify({ server: server.name, version: server.version, tools: tools.length, pages: Number(match[2]) }));
