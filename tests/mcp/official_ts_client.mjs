// Drives `jqjail mcp` with the official MCP TypeScript SDK (npm `@modelcontextprotocol/sdk`),
// a client jqjail did not write: lists the tools, calls each, gets a hostile filter's code as
// a tool error, and pages an output too large for the limit; follows the `resource_link` a
// kept output carries, lists the session's hides and reads their pages as resources, told of
// each new one by `notifications/resources/list_changed`. Prints a JSON summary on success;
// any failed check throws.
//
// Usage: node official_ts_client.mjs JQJAIL_CLI SOCKET SDK_DIR
// (SDK_DIR: the installed package, node_modules/@modelcontextprotocol/sdk)
import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [cli, socket, sdk] = process.argv.slice(2);
const { Client } = await import(pathToFileURL(join(sdk, "dist/esm/client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "dist/esm/client/stdio.js")).href);
const { ResourceListChangedNotificationSchema } = await import(pathToFileURL(join(sdk, "dist/esm/types.js")).href);

const client = new Client({ name: "jqjail-test", version: "1.0.0" });
let listChanged = 0;
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => { listChanged += 1; });
await client.connect(new StdioClientTransport({ command: cli, args: ["mcp", "--socket", socket] }));
const server = client.getServerVersion();
assert.equal(server.name, "jqjail");

const { tools } = await client.listTools();
assert.deepEqual(tools.map((t) => t.name), ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]);
for (const t of tools) assert.equal(t.inputSchema.type, "object", t.name);

async function call(name, args, error = false, blocks = 1) {
  const result = await client.callTool({ name, arguments: args });
  assert.equal(result.content.length, blocks, JSON.stringify(result).slice(0, 500));
  const text = result.content[0].text;
  assert.equal(Boolean(result.isError), error, `${name} ${JSON.stringify(args)}: ${text}`);
  return text;
}

const doc = JSON.stringify({ a: [1, 2, { b: "é" }] }).replace("}]", "}],\"n\":12345678901234567890");
assert.equal(await call("jq", { filter: ".a[2].b", input: doc }), '"é"');
assert.equal(await call("jq", { filter: ".n", input: doc }), "12345678901234567890");
assert.equal(await call("json_path", { query: "a[1]", input: doc }), "2");
assert.equal(JSON.parse(await call("json_shape", { input: doc })).keys.a.type, "array");
// json_shape declares an output schema: its answer comes as structured content too (the SDK
// checks it against the schema).
const shaped = await client.callTool({ name: "json_shape", arguments: { input: doc } });
assert.deepEqual(shaped.structuredContent, JSON.parse(shaped.content[0].text));
assert.match(await call("jq", { filter: "[range(1e9)]", input: "null" }, true), /^MEMORY_LIMIT: /);
assert.match(await call("jq", { filter: ".[", input: "null" }, true), /^COMPILE_ERROR: /);
assert.match(await call("json_path", { query: "zzz", input: doc }, true), /^MISSING_PROPERTY: /);
const kept = await client.callTool({ name: "jq", arguments: { filter: "[range(30000)]", input: "null" } });
const hidden = kept.content[0].text;
// The first answer: head and tail, and what lies between; paging starts at page 1.
const headId = hidden.match(/\[HIDE id=(\S+) head: bytes 0\.\./);
assert.ok(headId && hidden.includes("[… left out: bytes "), hidden.slice(0, 300));
const match = (await call("hide_next", {})).match(/\[HIDE id=(\S+) page=1\/(\d+) /);
assert.ok(match && match[1] === headId[1]);
assert.ok((await call("hide_next", {})).includes(`[HIDE id=${match[1]} page=2/${match[2]} `));

// The kept output links to its hide; the link reads as the hide, a page URI as the page.
const link = kept.content[1];
assert.equal(link.type, "resource_link");
assert.equal(link.uri, `jqjail://hide/${match[1]}`);
const { resourceTemplates } = await client.listResourceTemplates();
assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate).sort(), ["jqjail://hide/{id}", "jqjail://hide/{id}/page/{n}"]);
const { resources } = await client.listResources();
assert.deepEqual(resources.map((r) => r.uri), [link.uri]);
const whole = (await client.readResource({ uri: link.uri })).contents[0].text;
assert.ok(whole.includes(`kept it as hide ${match[1]}`) && whole.includes(`[HIDE id=${match[1]} head: bytes 0..`), whole.slice(0, 300));
const last = (await client.readResource({ uri: `${link.uri}/page/${match[2]}` })).contents[0].text;
assert.ok(last.includes(`[HIDE id=${match[1]} page=${match[2]}/${match[2]} `), last.slice(0, 300));
await assert.rejects(client.readResource({ uri: `${link.uri}/page/${Number(match[2]) + 1}` }), /PAGE_OUT_OF_RANGE/);
await assert.rejects(client.readResource({ uri: "jqjail://hide/nosuch-0123456789abcdef" }), /NOT_FOUND/);
// Reading resources moved no cursor: the model reads on from page 2.
assert.ok((await call("hide_next", {})).includes(`page=3/${match[2]} `));
assert.ok((await call("hide_search", { query: "29999" })).startsWith('Found "29999" on page'));
for (let i = 0; i < 100 && listChanged < 1; i++) await new Promise((r) => setTimeout(r, 50));
assert.equal(listChanged, 1, "one notifications/resources/list_changed for the one hide kept");
// The SDK's newest revision, which it asked for and the server granted.
const { LATEST_PROTOCOL_VERSION: protocol } = await import(pathToFileURL(join(sdk, "dist/esm/types.js")).href);
await client.close();
console.log(JSON.stringify({ server: server.name, version: server.version, tools: tools.length, pages: Number(match[2]), protocol, listChanged }));
