// The client starts the user's private daemon when none answers, as the `jqjail` command line
// does (issue 36): from the platform package, $PATH or $JQJAIL_DAEMON; programs racing to
// start it get one daemon; with none to start, or one of another version at the socket, the
// error says where it looked and what to do.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { REPO } from "./daemon.js";

const DAEMON = process.env.JQJAIL_DAEMON || join(REPO, "target", "debug", "jqjaild");
const INDEX = fileURLToPath(new URL("../src/index.js", import.meta.url));

/** The pids of running jqjaild processes whose command line names `needle`. */
function daemonsNaming(needle: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0");
    } catch {
      continue;
    }
    if (basename(argv[0]) === "jqjaild" && argv.some((a) => a.includes(needle))) found.push(Number(name));
  }
  return found;
}

function withRuntime(t: { skip(why: string): void }, body: (runtime: string) => Promise<void>): Promise<void> | void {
  if (existsSync("/run/jqjail/jqjail.sock")) {
    t.skip("a system jqjail daemon is installed here; the client would use it");
    return;
  }
  const runtime = mkdtempSync(join(tmpdir(), "jqjail-ts-start-"));
  return body(runtime).finally(() => {
    for (const pid of daemonsNaming(runtime)) process.kill(pid, "SIGTERM");
    rmSync(runtime, { recursive: true, force: true });
  });
}

function program(code: string, env: Record<string, string>): Promise<{ status: number | null; out: string }> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && k !== "JQJAIL_SOCKET" && k !== "JQJAIL_DAEMON") base[k] = v;
  }
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], { env: { ...base, PATH: "/usr/bin:/bin", ...env } });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (out += d));
  return new Promise((resolve) => child.on("close", (status) => resolve({ status, out })));
}

test("programs racing to start the private daemon get one", (t) =>
  withRuntime(t, async (runtime) => {
    const code = (i: number) =>
      `import { Client } from ${JSON.stringify(INDEX)}; const c = await Client.connect(); console.log((await c.run(".a", '{"a":${i}}')).output);`;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => program(code(i), { XDG_RUNTIME_DIR: runtime, JQJAIL_DAEMON: DAEMON })),
    );
    results.forEach((r, i) => assert.deepEqual(r, { status: 0, out: `${i}\n` }));
    // Every starter but one started a daemon that saw the winner serve and exited.
    const deadline = Date.now() + 5_000;
    while (daemonsNaming(runtime).length > 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(daemonsNaming(runtime).length, 1);
  }));

test("with no daemon to start, the error says where it looked", (t) =>
  withRuntime(t, async (runtime) => {
    const code = `import { Client } from ${JSON.stringify(INDEX)}; await Client.connect();`;
    const r = await program(code, { XDG_RUNTIME_DIR: runtime, PATH: "/nonexistent" });
    assert.notEqual(r.status, 0);
    assert.match(r.out, /jqjaild is neither in the jqjail-linux-x64 package \(.*\) nor on \$PATH, nor named by \$JQJAIL_DAEMON/);
  }));

test("a daemon of another version is named with what to do", (t) =>
  withRuntime(t, async (runtime) => {
    const dir = join(runtime, "jqjail");
    mkdirSync(dir, { mode: 0o700 });
    const socket = join(dir, "jqjail.sock");
    const server = createServer((conn) => {
      conn.once("data", () => {
        const body = Buffer.from(JSON.stringify({ error: { code: "UNSUPPORTED_VERSION", message: "client speaks protocol 2, this server speaks 3 to 3" } }));
        const prefix = Buffer.alloc(4);
        prefix.writeUInt32LE(body.length);
        conn.end(Buffer.concat([prefix, body]));
      });
    });
    await new Promise<void>((r) => server.listen(socket, r));
    try {
      const code = `import { Client } from ${JSON.stringify(INDEX)}; await Client.connect();`;
      const r = await program(code, { XDG_RUNTIME_DIR: runtime });
      assert.notEqual(r.status, 0);
      assert.match(r.out, /is another version of jqjaild: .*client speaks protocol 2/);
      assert.match(r.out, /It is your private daemon: stop it/);
    } finally {
      server.close();
    }
  }));
