import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, decodeResponse, endsOf, endsRequest, frame, HideBuffer, JqjailError, runRequest, tailLength, toolDefinitions } from "../src/index.js";
import { Daemon, REPO, startDaemon } from "./daemon.js";

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon.stop();
});

const vectors = JSON.parse(readFileSync(join(REPO, "protocol", "vectors", "messages.json"), "utf8"));

/** A JSON value with nulls, empty objects and empty arrays left out: what a request may omit. */
function normal(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normal);
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, e] of Object.entries(v)) {
      const n = normal(e);
      if (n === null || (Array.isArray(n) && n.length === 0) || (typeof n === "object" && n !== null && Object.keys(n).length === 0)) continue;
      out[k] = n;
    }
    return out;
  }
  return v;
}

test("the requests it writes mean what the conformance vectors' do, and every response vector decodes", () => {
  const byName = (list: any[]) => new Map(list.map((v) => [v.name, v]));
  const requests = byName(vectors.requests);
  const ours: Record<string, unknown> = {
    "run inline": runRequest(".a", { inline: 7 }),
    "run with every field": runRequest(".items[] | $x", { inline: 13 }, {
      maxOutputBytes: 1000, timeoutMs: 300, maxDepth: 64, onOversize: "hide", outputs: "lines", args: { x: "text" }, positional: [42],
    }),
    "run over a hide": runRequest("length", { hide: "github-1a2b3c4d" }),
    "run over values": runRequest("[inputs]", { values: { values: 11, null_input: true } }),
    "run in the path language": runRequest("items[*].name", { inline: 12 }, { lang: "path" }),
    "shape of a hide": runRequest("", { hide: "github-1a2b3c4d" }, { lang: "shape" }),
  };
  const page = { id: "github-1a2b3c4d", page_size: null, hint: false, pages: "json" };
  ours["hide_page by number"] = { hide_page: { ...page, at: { page: 2 }, page_size: 600, hint: true } };
  ours["hide_page by path"] = { hide_page: { ...page, at: { path: "$[17].labels" } } };
  ours["hide_page by offset"] = { hide_page: { ...page, at: { offset: 70 }, page_size: 64 } };
  ours["hide_page in bytes"] = { hide_page: { ...page, at: { page: 1 }, pages: "bytes" } };
  ours["hide_ends"] = { hide_ends: endsRequest("github-1a2b3c4d", { pageSize: 1200, hint: true, maxPathBytes: 64 }) };
  for (const [name, request] of Object.entries(ours)) {
    assert.deepEqual(normal(request), normal(JSON.parse(requests.get(name).json)), name);
  }
  for (const v of vectors.responses) {
    assert.equal(frame(JSON.parse(v.json)).toString("hex"), v.json_frame_hex, v.name);
    const r = decodeResponse(Buffer.from(v.json, "utf8"));
    assert.equal(tailLength(r, 1 << 30), v.tail_hex.length / 2, v.name);
  }
});

test("the error exchanges every client replays", async () => {
  const doc = JSON.parse(readFileSync(join(REPO, "protocol", "vectors", "exchanges.json"), "utf8"));
  for (const ex of doc.exchanges) {
    const sock = connect(daemon.socket);
    const chunks: Buffer[] = [];
    let closed: (v: unknown) => void;
    const closedP = new Promise((r) => (closed = r));
    sock.on("data", (d) => chunks.push(d));
    sock.on("error", () => closed(true));
    sock.on("close", () => closed(true));
    await new Promise((r) => sock.once("connect", r));
    let buf = Buffer.alloc(0);
    const take = async (n: number): Promise<Buffer> => {
      const until = Date.now() + 30_000;
      while (buf.length + chunks.reduce((s, c) => s + c.length, 0) < n) {
        if (Date.now() > until) throw new Error(`${ex.name}: no answer`);
        await new Promise((r) => setTimeout(r, 5));
      }
      buf = Buffer.concat([buf, ...chunks.splice(0)]);
      const out = buf.subarray(0, n);
      buf = buf.subarray(n);
      return out;
    };
    const recv = async () => {
      const n = (await take(4)).readUInt32LE(0);
      const r = decodeResponse(await take(n));
      return { r, tail: await take(tailLength(r, 1 << 30)) };
    };
    if (ex.hello) {
      sock.write(frame({ hello: { protocol: 2 } }));
      assert.equal((await recv()).r.kind, "hello", ex.name);
    }
    for (const step of ex.steps) {
      if (step.expect === undefined) {
        sock.write(Buffer.concat([frame(step.send), Buffer.from(step.tail_hex, "hex")]));
        continue;
      }
      const want = step.expect;
      const { r, tail } = await recv();
      assert.equal(r.kind, want.response, `${ex.name}: ${JSON.stringify(r.fields)}`);
      if (want.code !== undefined) assert.equal(r.fields.code, want.code, ex.name);
      if (want.code_one_of !== undefined) assert.ok(want.code_one_of.includes(r.fields.code), `${ex.name}: ${r.fields.code}`);
      if (want.limit !== undefined) assert.equal(r.fields.limit, want.limit, ex.name);
      if (want.actual !== undefined) assert.equal(r.fields.actual, want.actual, ex.name);
      if (want.tail_hex !== undefined) assert.equal(tail.toString("hex"), want.tail_hex, ex.name);
    }
    if (ex.closed) {
      await Promise.race([closedP, new Promise((_, reject) => setTimeout(() => reject(new Error(`${ex.name}: not closed`)), 10_000))]);
      assert.equal(chunks.reduce((s, c) => s + c.length, 0) + buf.length, 0, ex.name);
    }
    sock.destroy();
  }
});

test("runs, their options, and the whole protocol", async () => {
  const c = await Client.connect();
  try {
    assert.match(c.server, /^jqjaild\//);
    assert.equal((await c.run(".a", '{"a":12345678901234567890}')).output, "12345678901234567890");
    assert.equal((await c.run("[.[] * 2]", [1, 2])).output, "[2,4]");
    assert.equal((await c.run(".", { k: "v" })).output, '{"k":"v"}');
    assert.equal((await c.run(".[]", "[1,[2]]", { outputs: "lines" })).output, "1\n[2]\n");
    assert.equal((await c.run("[$x, $ARGS.positional[0]]", "null", { args: { x: { k: 1 } }, positional: ["p"] })).output, '[{"k":1},"p"]');
    assert.equal((await c.runValues("reduce inputs as $x (0; . + $x)", "1 2 3", true)).output, "6");
    assert.equal((await c.run("items[*].name", '{"items":[{"name":"a"},{}]}', { lang: "path" })).output, '["a"]');
    assert.equal(((await c.shape({ a: [1] })) as any).type, "object");
    await assert.rejects(c.run(".[", "null"), (e: JqjailError) => e.code === "COMPILE_ERROR");
    // The README tour's hostile filters, answered by their codes; the connection goes on.
    await assert.rejects(c.run("[range(1e9)]", "null"), (e: JqjailError) => ["MEMORY_LIMIT", "CPU_LIMIT", "TIMEOUT"].includes(e.code));
    await assert.rejects(c.run("def f: f; f", "null", { timeoutMs: 500 }), (e: JqjailError) => ["TIMEOUT", "CPU_LIMIT"].includes(e.code));
    await assert.rejects(c.run("def f: [f]; f", "null"), (e: JqjailError) => ["STACK_LIMIT", "MEMORY_LIMIT"].includes(e.code));
    await assert.rejects(c.run("[range(100000)]", "null", { maxOutputBytes: 1000 }), (e: JqjailError) => e.code === "OUTPUT_TOO_LARGE" && e.limit === 1000);
    await assert.rejects(c.run('include "/etc/passwd"; .', "null"), (e: JqjailError) => e.code === "COMPILE_ERROR");
    assert.equal((await c.run("env", "null")).output, "{}");
    const stats = await c.stats();
    assert.ok(stats.outcomes.length > 0 && stats.connections > 0);

    // Hides: put, get, cut, search, list, usage, delete; a hidden output taken over by a buffer.
    const put = await c.hidePut("ab".repeat(100), { kind: "k", source: "Tool X", meta: { turn: "7" } });
    assert.match(put.entry.id, /^toolx-/);
    assert.equal((await c.hideGet(put.entry.id)).content.toString(), "ab".repeat(100));
    const cut = await c.hideCut(put.entry.id, 4, { pageSize: 64, hint: true });
    assert.equal(cut.content.toString(), "abababab");
    assert.match(cut.preface!, /page 4 of 4/);
    const found = await c.hideSearch(put.entry.id, "BA", { ignoreCase: true, maxMatches: 2 });
    assert.deepEqual(found.matches, [{ page: 1, offset: 1 }, { page: 1, offset: 3 }]);
    await assert.rejects(c.hideCut(put.entry.id, 9, { pageSize: 64 }), (e: JqjailError) => e.code === "PAGE_OUT_OF_RANGE" && e.limit === 4 && e.actual === 9);
    // JSON pages, by number and by path; text in byte pages, saying why.
    const doc = '[{"id":0,"labels":["bug"]},{"id":1,"labels":["p1","p2"]},{"id":2,"labels":[]}]';
    const jid = (await c.hidePut(doc, { source: "json" })).entry.id;
    const pages = [await c.hidePage(jid, { page: 1 }, { pageSize: 64, hint: true })];
    while (pages.length < pages[0].total_pages) pages.push(await c.hidePage(jid, { page: pages.length + 1 }, { pageSize: 64 }));
    assert.equal(Buffer.concat(pages.map((p) => p.content)).toString(), doc);
    assert.deepEqual(pages[1].json?.array, { path: "$", length: 3 });
    assert.match(pages[0].preface!, /It holds \$ through/);
    const at = await c.hidePage(jid, { path: ".[2].labels" }, { pageSize: 64 });
    const value = doc.indexOf("[]}");
    assert.ok(at.offset <= value && value < at.offset + at.content.length, JSON.stringify(at));
    assert.equal((await c.hidePage(jid, { offset: value }, { pageSize: 64 })).page, at.page);
    await assert.rejects(c.hidePage(jid, { path: "$[3]" }), (e: JqjailError) => e.code === "NOT_FOUND");
    const text = await c.hidePage(put.entry.id, { page: 1 }, { pageSize: 64 });
    assert.ok(text.pages === "bytes" && text.not_json !== null);
    const hidden = await c.run("[range(5000)]", "null", { onOversize: "hide", maxOutputBytes: 1000 });
    assert.ok(hidden.hidden && hidden.hidden.first.content.toString().startsWith("[0,1,2"));
    assert.equal((await c.runHide("length", hidden.hidden.entry.id)).output, "5000");
    const buffer = new HideBuffer(c, 16_384, "bytes");
    buffer.takeOver(hidden.hidden);
    assert.equal((await buffer.next()).page, 2);
    // JSON pages: page 1 ends between values, not where the daemon's byte page 1 did.
    const json = new HideBuffer(c);
    json.takeOver(hidden.hidden);
    const again = await json.next();
    assert.ok(again.page === 1 && again.pages === "json" && again.json?.first === "$");
    assert.match(await json.callTool("hide_next", {}), / · \$\[\d+\] … \$/);
    assert.match(await json.callTool("hide_jump", { path: "$[4999]" }), /4999\]/);
    assert.match(await json.callTool("hide_jump", {}), /^error: hide_jump needs/);
    const list = await c.hideList();
    assert.equal(list[0].id, hidden.hidden.entry.id);
    assert.ok((await c.hideUsage()).entries >= 2);
    assert.equal((await c.hideDelete(put.entry.id)).id, put.entry.id);
    await assert.rejects(c.hideGet(put.entry.id), (e: JqjailError) => e.code === "NOT_FOUND");
  } finally {
    c.close();
  }
});

test("a hide buffer pages, searches and answers a model's tool calls", async () => {
  const c = await Client.connect();
  try {
    const b = new HideBuffer(c, 100);
    assert.equal(b.needsPaging(), false);
    let text = "";
    for (let i = 0; i < 50; i++) text += `row ${String(i).padStart(2, "0")}\n`;
    const entry = await b.store(text, "search_tool");
    assert.equal(b.needsPaging(), true);
    const first = await b.firstCut();
    assert.equal(first.total_pages, 4);
    assert.ok(first.preface);
    assert.equal((await b.next()).page, 2);
    assert.equal((await b.search(entry.id, "row 40"))!.page, 3);
    assert.equal(await b.search(entry.id, "absent"), null);
    assert.match(await b.callTool("hide_jump", { page: 4 }), /page=4\/4/);
    assert.match(await b.callTool("hide_search", { query: "ROW 07", ignore_case: true }), /on page 1/);
    assert.match(await b.callTool("hide_jump", { page: 9 }), /^error: PAGE_OUT_OF_RANGE/);
  } finally {
    c.close();
  }
});

test("a buffer's first answer is the head and tail, naming what lies between; then paging starts at page 1", async () => {
  const c = await Client.connect();
  try {
    const doc = JSON.stringify(Array.from({ length: 60 }, (_, i) => ({ id: i, title: `issue ${i}` })));
    const b = new HideBuffer(c, 400);
    const entry = await b.store(doc, "issues");
    const shown = await b.firstAnswer();
    for (const want of [`[HIDE id=${entry.id} head: bytes 0..`, "[… left out: bytes ", " of $, in whole or in part (60 elements) …]", `[HIDE id=${entry.id} tail: bytes `, "Left out between them: "]) {
      assert.ok(shown.includes(want), `no ${want} in ${shown}`);
    }
    assert.match(await b.callTool("hide_next", {}), /page=1\//);
    const ends = await c.hideEnds(entry.id, { pageSize: 400 });
    const left = ends.left_out!;
    assert.equal(left.offset, ends.head.length);
    assert.equal(ends.tail!.offset, left.offset + left.bytes);
    assert.equal(ends.tail!.offset + ends.tail!.length, doc.length);
    assert.equal(ends.content.toString("utf8"), doc.slice(0, ends.head.length) + doc.slice(ends.tail!.offset));
    await assert.rejects(c.hideEnds(entry.id, { pageSize: 100 }), /page_size is 100/);
    const byPage = new HideBuffer(c, 400, "json", "page");
    assert.match(await byPage.firstAnswer(entry.id), /page=1\//);
    assert.match(await byPage.callTool("hide_next", {}), /page=2\//);
  } finally {
    c.close();
  }
});

test("a lying daemon's head and tail is refused, never sliced or summed", () => {
  const good = {
    hide_id: "x-00000000", size: 100, page_size: 40, pages: "bytes",
    head: { offset: 0, length: 20 }, tail: { offset: 80, length: 20 },
    left_out: { offset: 20, bytes: 60, elements: { array: "$", from: 1, to: 3, length: 9 } },
  };
  const content = Buffer.alloc(40, 97);
  assert.equal(endsOf(good, content).left_out!.elements!.to, 3);
  for (const lie of [
    { head: { offset: 0, length: -3 } },
    { head: { offset: 0, length: 41 } },
    { left_out: { offset: 20, bytes: 2 ** 64 } },
    { left_out: { offset: 20, bytes: 60, elements: { array: "$", from: 5, to: 3 } } },
    { left_out: { offset: 20, bytes: 60, elements: "oops" } },
    { size: 99 },
    { tail: null },
  ]) {
    assert.throws(() => endsOf({ ...good, ...lie }, content), /hide_ends answer/, JSON.stringify(lie));
  }
});

test("a lying daemon's frame is refused before it is allocated", async () => {
  const dir = mkdtempSync(join(tmpdir(), "jqjail-liar-"));
  const path = join(dir, "liar.sock");
  const server = createServer((s) => {
    s.once("data", () => {
      const prefix = Buffer.alloc(4);
      prefix.writeUInt32LE(0xfffffff0, 0);
      s.write(prefix);
    });
  });
  try {
    await new Promise<void>((r, j) => server.once("error", j).listen(path, r));
    await assert.rejects(Client.connect(path), (e: JqjailError) => e.code === "UNAVAILABLE" && /over the 8388608-byte maximum/.test(e.message));
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("aborting a request abandons it and closes the connection", async () => {
  const c = await Client.connect();
  const controller = new AbortController();
  setTimeout(() => controller.abort(new Error("the caller gave up")), 200);
  const start = Date.now();
  await assert.rejects(c.run("def f: f; f", "null", { signal: controller.signal }), /the caller gave up/);
  assert.ok(Date.now() - start < 3000);
  await assert.rejects(c.stats());
  c.close();
});

test("the tool definitions are the CLI's", () => {
  const names = (toolDefinitions() as { name: string }[]).map((t) => t.name);
  assert.deepEqual(names, ["jq", "json_path", "json_shape", "hide_next", "hide_jump", "hide_search"]);
  const shipped = readFileSync(join(REPO, "clients", "python", "src", "jqjail", "tools.json"), "utf8");
  assert.equal(readFileSync(join(REPO, "clients", "typescript", "tools.json"), "utf8"), shipped);
});

test("a socket another user could have put there or could swap is not trusted", async () => {
  const dir = mkdtempSync(join(tmpdir(), "jqjail-open-"));
  const { chmodSync } = await import("node:fs");
  const path = join(dir, "open.sock");
  const server = createServer(() => undefined);
  try {
    await new Promise<void>((r, j) => server.once("error", j).listen(path, r));
    chmodSync(dir, 0o777); // writable by every user, not sticky: the socket could be replaced
    await assert.rejects(Client.connect(path), /another user could change/);
    chmodSync(dir, 0o700);
    process.env.JQJAIL_DAEMON_UIDS = "1000,nobody";
    await assert.rejects(Client.connect(path), /"nobody", which is not a uid/);
  } finally {
    delete process.env.JQJAIL_DAEMON_UIDS;
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A fake listener: answers the hello with `hello`, then runs `after` on the socket. */
async function liar(hello: unknown, after: (s: import("node:net").Socket) => void): Promise<{ path: string; close: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), "jqjail-liar-"));
  const path = join(dir, "liar.sock");
  const server = createServer((s) => {
    s.on("error", () => undefined);
    s.once("data", () => {
      s.write(frame(hello));
      after(s);
    });
  });
  try {
    await new Promise<void>((r, j) => server.once("error", j).listen(path, r));
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    path,
    close: () => {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const limits = { max_input_bytes: 1000, max_filter_bytes: 1000, max_depth: 10, max_output_bytes: 1000, timeout_ms: 1000, max_heap_bytes: 1000 };

test("a peer that floods the client cannot make it buffer without bound", async () => {
  let flooding = true;
  const chunk = Buffer.alloc(1 << 20, 0x41);
  const l = await liar({ hello: { protocol: 2, server: "liar", limits } }, (s) => {
    const pump = () => {
      while (flooding && s.write(chunk));
      if (flooding) s.once("drain", pump);
    };
    pump();
  });
  try {
    const before = process.memoryUsage().rss;
    const c = await Client.connect(l.path);
    await new Promise((r) => setTimeout(r, 1500));
    const grew = process.memoryUsage().rss - before;
    flooding = false;
    assert.ok(grew < 64 << 20, `the client grew by ${grew} bytes`);
    await assert.rejects(c.stats(), /answer nothing|does not decode|not JSON|frame/);
    c.close();
  } finally {
    flooding = false;
    l.close();
  }
});

test("a hello without usable limits is refused", async () => {
  const l = await liar({ hello: { protocol: 2, server: "liar", limits: {} } }, () => undefined);
  try {
    await assert.rejects(Client.connect(l.path), /no usable max_input_bytes/);
  } finally {
    l.close();
  }
});

test("a silent daemon cannot hang a call past the client's bound", async () => {
  const l = await liar({ hello: { protocol: 2, server: "liar", limits } }, () => undefined);
  try {
    const c = await Client.connect(l.path, { timeoutMs: 300 });
    const start = Date.now();
    await assert.rejects(c.stats());
    assert.ok(Date.now() - start < 3000);
    c.close();
  } finally {
    l.close();
  }
});

test("named arguments: any name, in order, never twice, only JSON values", async () => {
  const c = await Client.connect();
  try {
    const r = await c.run("[$__proto__, $ARGS.named]", "null", { args: [["__proto__", 1], ["b", "x"]] });
    assert.equal(r.output, '[1,{"__proto__":1,"b":"x"}]');
    await assert.rejects(c.run("$x", "null", { args: [["x", 1], ["x", 2]] }), /given twice/);
    await assert.rejects(c.run("$x", "null", { args: { x: undefined } }), /no JSON form/);
    await assert.rejects(c.run(".", "null", { positional: [() => 1] }), /no JSON form/);
    // Nothing was sent for those: the connection serves on.
    assert.equal((await c.run("1", "null")).output, "1");
  } finally {
    c.close();
  }
});

test("a buffer takes over a hidden run cut at another page size from page 1", async () => {
  const c = await Client.connect();
  try {
    const r = await c.run("[range(5000)]", "null", { onOversize: "hide", maxOutputBytes: 1000 });
    const small = new HideBuffer(c, 4096);
    small.takeOver(r.hidden!);
    const again = await small.next();
    assert.equal(again.page, 1);
    assert.ok(again.content.toString().startsWith("[0,1,2"));
  } finally {
    c.close();
  }
});

// Issue 36: a one-shot script that uses the client and never calls close() exits (the kept
// socket held Node's event loop, so it never did; the seed's tool has no close()).
test("a one-shot script exits without close()", async () => {
  const { spawn } = await import("node:child_process");
  const script = `
    import { Client } from ${JSON.stringify(new URL("../src/index.js", import.meta.url).href)};
    const c = await Client.connect(${JSON.stringify(daemon.socket)});
    console.log((await c.run(".a", { a: 7 })).output);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (err += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`the script did not exit within 10 s (it printed ${JSON.stringify(out)}): the idle socket holds the event loop`));
    }, 10_000);
    child.once("exit", (c) => (clearTimeout(timer), resolve(c)));
  });
  assert.equal(code, 0, err);
  assert.match(out, /7/);
});
