// Issue 36: jqjail as the Cordis plugin a DSH-style host loads by package name, in place of
// dsh-tool-json. A real Cordis context (npm `cordis`) with a `tools` service loads the package
// by its name, as the host does, and the tool it registers executes the seed's queries.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { Context, Service } from "cordis";
import { Daemon, startDaemon } from "./daemon.js";

interface Tool {
  name: string;
  execute(args: { input: unknown; query: string }): Promise<unknown>;
  timeoutMs: number;
}

/** The host's tool registry: what the seed's `ctx.tools.register(...)` talks to. */
class Tools extends Service {
  readonly registered = new Map<string, Tool>();
  constructor(ctx: Context) {
    super(ctx, "tools", true);
  }
  register(tool: Tool): () => void {
    this.registered.set(tool.name, tool);
    return () => this.registered.delete(tool.name);
  }
  execute(name: string, args: { input: unknown; query: string }): Promise<unknown> {
    const tool = this.registered.get(name);
    if (!tool) throw new Error(`no tool ${name}`);
    return tool.execute(args);
  }
}

declare module "cordis" {
  interface Context {
    tools: Tools;
  }
}

let daemon: Daemon;
before(async () => {
  daemon = await startDaemon();
});
after(async () => {
  await daemon.stop();
});

test("a Cordis host loads the package by name and its json tool answers", async () => {
  const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  // As the host resolves a bundle: the package's name, its patch file, its main module.
  assert.equal(manifest.dsh.bundle.patch, "cordis.patch.yml");
  const patch = readFileSync(new URL(`../../${manifest.dsh.bundle.patch}`, import.meta.url), "utf8");
  assert.match(patch, /^- insert:\n {4}- id: tool-json\n {6}name: jqjail$/m);
  assert.ok(manifest.files.includes("cordis.patch.yml"));
  const plugin = await import(manifest.name);
  assert.equal(typeof plugin.apply, "function");
  assert.deepEqual(plugin.inject, ["tools"]);

  const ctx = new Context();
  ctx.plugin(Tools);
  const fiber = ctx.plugin(plugin);
  await ctx.lifecycle.flush();
  const tools = ctx.tools;
  assert.ok(tools.registered.has("json"), [...tools.registered.keys()].join());
  assert.equal(tools.registered.get("json")!.timeoutMs, 1000);
  assert.equal(await tools.execute("json", { input: { data: { items: [{ name: "deep" }] } }, query: "data.items[0].name" }), "deep");
  assert.deepEqual(await tools.execute("json", { input: '{"items":[{"name":"a"},{"name":"b"}]}', query: "items[*].name" }), ["a", "b"]);
  // Disposing the plugin closes its connection: the process exits with no close() of its own.
  fiber.dispose();
});
