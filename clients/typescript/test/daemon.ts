// Starts the real jqjaild (from $JQJAIL_DAEMON, or the repository's debug build) on a socket
// in a temporary directory, and sets $JQJAIL_SOCKET so tests also go through discovery.
import { spawn, ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository's root (this file is compiled to clients/typescript/dist/test/). */
export const REPO = fileURLToPath(new URL("../../../../", import.meta.url));

export interface Daemon {
  socket: string;
  stop(): Promise<void>;
}

export async function startDaemon(): Promise<Daemon> {
  const binary = process.env.JQJAIL_DAEMON || join(REPO, "target", "debug", "jqjaild");
  if (!existsSync(binary)) throw new Error(`no daemon at ${binary}: build it (cargo build) or set JQJAIL_DAEMON`);
  const dir = mkdtempSync(join(tmpdir(), "jqjail-ts-test-"));
  const socket = join(dir, "jqjail.sock");
  const child: ChildProcess = spawn(binary, ["--socket", socket, "--store", join(dir, "store")], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr += d));
  const deadline = Date.now() + 20_000;
  // Ready once a connection is accepted: the socket file exists a moment before the daemon
  // listens on it (bind, then listen), and a connect in between is refused.
  const accepts = () =>
    new Promise<boolean>((done) => {
      const c = connect(socket);
      c.once("connect", () => (c.destroy(), done(true)));
      c.once("error", () => done(false));
    });
  while (!(existsSync(socket) && (await accepts()))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the daemon did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  process.env.JQJAIL_SOCKET = socket;
  return {
    socket,
    stop: async () => {
      const exited = new Promise((r) => child.once("exit", r));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
