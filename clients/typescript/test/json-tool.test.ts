// Seed 001's documented queries and errors, run unchanged through the drop-in `json` tool.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { jsonTool, JsonQueryError } from "../src/index.js";
import { Daemon, startDaemon } from "./daemon.js";

let daemon: Daemon;
let tool: ReturnType<typeof jsonTool>;
before(async () => {
  daemon = await startDaemon();
  tool = jsonTool();
});
after(async () => {
  tool.close();
  await daemon.stop();
});

const doc = {
  items: [{ name: "hello", tags: ["a", "b"] }, { name: "b", tags: ["c"] }, { other: true }, { name: null, tags: [] }],
  "complex-key": "ok",
  data: { items: [{ name: "deep" }] },
  constructor: "plain",
  __proto__x: 1,
};

const rejectsWith = (code: string, pattern?: RegExp) => (e: unknown) => {
  assert.ok(e instanceof JsonQueryError, String(e));
  assert.equal(e.code, code, e.message);
  assert.match(e.message, /^json: /);
  if (pattern) assert.match(e.message, pattern);
  return true;
};

test("the tool is declared as the seed declares it", () => {
  assert.equal(tool.name, "json");
  assert.deepEqual(Object.keys(tool.parameters), ["input", "query"]);
  assert.equal(tool.parameters.input.type, "json");
  assert.equal(tool.parameters.query.required, true);
  assert.equal(tool.timeoutMs, 1000);
  assert.deepEqual(tool.output.render({}, ["a"]), [{ type: "text", text: '["a"]' }]);
});

test("the seed's usage examples", async () => {
  assert.equal(await tool.execute({ input: doc, query: "items[0].name" }), "hello");
  // Missing properties are skipped inside a projection; a real null is kept.
  assert.deepEqual(await tool.execute({ input: doc, query: "items[*].name" }), ["hello", "b", null]);
  assert.equal(await tool.execute({ input: doc, query: "['complex-key']" }), "ok");
  assert.equal(await tool.execute({ input: doc, query: "data.items[0].name" }), "deep");
  // Nested wildcards give nested arrays, not a flattened projection.
  assert.deepEqual(await tool.execute({ input: doc, query: "items[*].tags[*]" }), [["a", "b"], ["c"], []]);
  // Both input forms: a value, or the JSON text as a string.
  assert.equal(await tool.execute({ input: JSON.stringify(doc), query: "items[1].name" }), "b");
  // Quoted properties with the three escapes, in either quote.
  assert.equal(await tool.execute({ input: { "q'uote": 2 }, query: "['q\\'uote']" }), 2);
  assert.equal(await tool.execute({ input: { 'd"q': 3 }, query: '["d\\"q"]' }), 3);
  // `constructor` is a plain property, not the prototype's.
  assert.equal(await tool.execute({ input: doc, query: "constructor" }), "plain");
  await assert.rejects(tool.execute({ input: { a: 1 }, query: "__proto__" }), rejectsWith("MISSING_PROPERTY"));
});

test("the seed's error classes, with json: messages", async () => {
  await assert.rejects(tool.execute({ input: doc, query: "nope" }), rejectsWith("MISSING_PROPERTY"));
  await assert.rejects(tool.execute({ input: doc, query: "items.name" }), rejectsWith("TYPE_MISMATCH"));
  await assert.rejects(tool.execute({ input: doc, query: "items[9]" }), rejectsWith("INDEX_OUT_OF_BOUNDS"));
  await assert.rejects(tool.execute({ input: doc, query: "items[" }), rejectsWith("INVALID_QUERY"));
  await assert.rejects(tool.execute({ input: doc, query: "['bad\\x']" }), rejectsWith("INVALID_QUERY"));
  // Filters, pipes and functions are not the path language.
  await assert.rejects(tool.execute({ input: doc, query: "items[?name > 1]" }), rejectsWith("INVALID_QUERY"));
  await assert.rejects(tool.execute({ input: doc, query: "items | length" }), rejectsWith("INVALID_QUERY"));
});

test("the seed's limits", async () => {
  await assert.rejects(tool.execute({ input: doc, query: "a".repeat(201) }), rejectsWith("INVALID_QUERY"));
  await assert.rejects(tool.execute({ input: doc, query: Array(21).fill("a").join(".") }), rejectsWith("INVALID_QUERY"));
  await assert.rejects(tool.execute({ input: "x".repeat(1_000_001), query: "a" }), rejectsWith("INPUT_TOO_LARGE"));
  let deep: unknown = 1;
  for (let i = 0; i < 101; i++) deep = [deep];
  await assert.rejects(tool.execute({ input: deep, query: "[0]" }), rejectsWith("INPUT_TOO_DEEP"));
  await assert.rejects(tool.execute({ input: JSON.stringify(deep), query: "[0]" }), rejectsWith("INPUT_TOO_DEEP"));
  // Only JSON values: no undefined, BigInt, functions, Dates, non-finite numbers or cycles.
  for (const bad of [{ a: undefined }, { a: 1n }, { a: () => 1 }, { a: new Date(0) }, { a: NaN }, { a: Infinity }]) {
    await assert.rejects(tool.execute({ input: bad, query: "a" }), rejectsWith("INVALID_JSON"));
  }
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  await assert.rejects(tool.execute({ input: cycle, query: "self" }), rejectsWith("INVALID_JSON"));
  await assert.rejects(tool.execute({ input: "{not json", query: "a" }), rejectsWith("INVALID_JSON"));
  // One projection is bounded too.
  await assert.rejects(tool.execute({ input: Array(100_001).fill({ a: 1 }), query: "[*].a" }), rejectsWith("PROJECTION_TOO_LARGE"));
});

// Issue 36: the seed bounds a projection by its elements, not its answer by bytes. An answer
// over the daemon's 100,000-byte output limit was OUTPUT_TOO_LARGE, a class the seed does not
// have; it is answered whole now, and the hide it passed through is gone.
test("an answer over the daemon's output limit is answered whole, as the seed answers it", async () => {
  const input = Array.from({ length: 100_000 }, (_, i) => ({ a: i % 10 }));
  const got = (await tool.execute({ input, query: "[*].a" })) as number[];
  assert.equal(got.length, 100_000);
  assert.equal(got[99_999], 9);
  assert.ok(JSON.stringify(got).length > 100_000);
  const { Client } = await import("../src/index.js");
  const c = await Client.connect();
  try {
    assert.deepEqual(await c.hideList(), []);
  } finally {
    c.close();
  }
});
