// The private daemon's socket, found where the `jqjail` command line puts its daemon (issue
// 34, attack 10): a service account with no runtime dir and no home it may write in, whose
// $TMPDIR/jqjail-UID another user planted, gets a directory of its own from the command line,
// and this client finds the same one; with a home it may write in, both use its cache dir.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { REPO } from "./daemon.js";

const SERVICE = 4242;
const PLANTER = 65534;

function asService(argv: string[], env: Record<string, string>) {
  return spawnSync(argv[0], argv.slice(1), { env, uid: SERVICE, gid: SERVICE, cwd: "/", encoding: "utf8", timeout: 60_000 });
}

function foundByThisClient(env: Record<string, string>): string {
  const client = fileURLToPath(new URL("../src/client.js", import.meta.url));
  const code = `import(${JSON.stringify(client)}).then((m) => console.log(m.privateSocket()))`;
  const out = asService([process.execPath, "-e", code], env);
  assert.equal(out.status, 0, out.stderr);
  return out.stdout.trim();
}

test("the private socket is where the command line puts its daemon", (t) => {
  if (process.getuid!() !== 0) {
    t.skip("needs root, to act as a service account and as the user who planted its directory");
    return;
  }
  const daemon = process.env.JQJAIL_DAEMON || join(REPO, "target", "debug", "jqjaild");
  const cli = join(dirname(daemon), "jqjail");
  const tmp = mkdtempSync(join(tmpdir(), "jqjail-ts-private-"));
  try {
    chmodSync(tmp, 0o1777);
    const planted = join(tmp, `jqjail-${SERVICE}`);
    mkdirSync(planted, 0o755);
    chownSync(planted, PLANTER, PLANTER);
    const locked = join(tmp, "locked-home");
    mkdirSync(locked, 0o755);
    const home = join(tmp, "home");
    mkdirSync(home, 0o700);
    chownSync(home, SERVICE, SERVICE);
    let env = { HOME: locked, TMPDIR: tmp, PATH: "/usr/bin:/bin" };
    let out = asService([cli, "-n", "1"], env);
    assert.equal(out.status, 0, out.stderr);
    const made = /using (\S+) instead/.exec(out.stderr);
    assert.ok(made && made[1].startsWith(`${tmp}/jqjail-${SERVICE}-`), out.stderr);
    assert.equal(foundByThisClient(env), join(made![1], "jqjail.sock"));
    env = { HOME: home, TMPDIR: tmp, PATH: "/usr/bin:/bin" };
    out = asService([cli, "-n", "2"], env);
    assert.equal(out.status, 0, out.stderr);
    const cache = join(home, ".cache", "jqjail");
    assert.ok(existsSync(join(cache, "jqjail.sock")), out.stderr);
    assert.equal(foundByThisClient(env), join(cache, "jqjail.sock"));
  } finally {
    spawnSync("/bin/kill", ["-KILL", "-1"], { uid: SERVICE, gid: SERVICE });
    rmSync(tmp, { recursive: true, force: true });
  }
});
