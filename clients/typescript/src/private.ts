/**
 * Starting the user's private daemon when no daemon answers, as every jqjail client does
 * (PROTOCOL.md, "Finding the socket"): `jqjaild` from this package's platform package
 * (`jqjail-linux-x64`, which npm installs beside it), else $PATH, else $JQJAIL_DAEMON; started
 * detached in the private directory and waited for until it accepts. Node has no flock, so
 * racing starters each start one; a daemon never replaces one that serves, and one that finds
 * the store held while another serves the socket exits at once, so one daemon remains.
 */
import { ChildProcess, spawn } from "node:child_process";
import { accessSync, constants as fsConstants, lstatSync, mkdirSync, mkdtempSync, openSync, closeSync, realpathSync, rmdirSync, statSync } from "node:fs";
import { ownTempDir, tempDir, usableDir } from "./client.js";
import { connect as netConnect } from "node:net";
import { basename, delimiter, dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { unavailable } from "./wire.js";

export const DAEMON_EXECUTABLE = "jqjaild";
export const DAEMON_ENV = "JQJAIL_DAEMON";
/** The package that carries the binaries for this platform (the esbuild pattern). */
export const PLATFORM_PACKAGE = `jqjail-${process.platform}-${process.arch}`;
/** How long a private daemon lives without clients (the CLI's figure). */
const IDLE_EXIT_MS = 600_000;
/** Longer than a daemon waits (15 s) for the store's previous owner, an idle daemon exiting. */
const START_TIMEOUT_MS = 20_000;

/**
 * This package's own directory: `dist/src/` is two levels below it. The platform package is
 * looked for only beside it, where npm installs it, never by Node's walk up every parent's
 * `node_modules` (a directory another user made above a project could hold one).
 */
function packageRoot(): string {
  return resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
}

/**
 * Why `path` (a file) may not be run: unless it and every directory above it belong to this
 * user or root and no other user may write to them (a sticky directory aside), a reason.
 */
function untrustedFile(path: string): string | undefined {
  const uid = process.getuid!();
  let real: string;
  try {
    real = realpathSync(path);
  } catch (e) {
    return (e as Error).message;
  }
  for (let at = real, first = true; ; at = dirname(at), first = false) {
    const st = statSync(at);
    const sticky = (st.mode & 0o1000) !== 0;
    if (st.uid !== uid && st.uid !== 0) return `${at} belongs to uid ${st.uid}`;
    if ((st.mode & 0o022) !== 0 && (first || !sticky)) return `${at} may be written by other users`;
    if (at === dirname(at)) return undefined;
  }
}

/** `name` in this package's platform package, installed beside this package as npm does
 * (`node_modules/jqjail/node_modules/PLATFORM` or the hoisted `node_modules/PLATFORM`), if it
 * is there and trusted. */
export function platformExecutable(name: string): { path?: string; looked: string[] } {
  const root = packageRoot();
  const places = [join(root, "node_modules", PLATFORM_PACKAGE, "bin", name)];
  if (basename(dirname(root)) === "node_modules") places.push(join(dirname(root), PLATFORM_PACKAGE, "bin", name));
  for (const candidate of places) {
    try {
      accessSync(candidate, fsConstants.X_OK);
    } catch {
      continue;
    }
    const why = untrustedFile(candidate);
    if (why === undefined && statSync(candidate).isFile()) return { path: candidate, looked: places };
  }
  return { looked: places };
}

/** `name` from this package's platform package, else $PATH, else the file `env` names. */
export function executable(name: string, env?: string): string {
  const platform = platformExecutable(name);
  if (platform.path) return platform.path;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    // Absolute entries only: an empty or relative one would mean the current directory.
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, fsConstants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not there
    }
  }
  const named = env ? process.env[env] : undefined;
  if (named) return named;
  throw unavailable(
    `${name} is neither in the ${PLATFORM_PACKAGE} package (${platform.looked.join(", ")}) nor on $PATH${env ? `, nor named by $${env}` : ""}: ` +
      "npm install the jqjail package with jqjail-linux-x64 (packaging/dist builds both), or the .deb",
  );
}

function accepts(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect(path);
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** What a program's own service manager set for it, never for the daemon it starts. */
const SERVICE_MANAGER_ENV = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC"];

/** Makes the private directory (mode 0700) and checks it is the user's own and closed to
 * others. When it is not usable (another user's, or open), the user's own fallback in the
 * temp dir is taken, made with mkdtemp if need be, as the command line picks it. */
function prepare(dir: string): string {
  const uid = process.getuid!();
  if (!usableDir(dir, uid)) {
    dir = ownTempDir(tempDir(), uid) ?? mkdtempSync(join(tempDir(), `jqjail-${uid}-`));
    // Two starters that made one each both take the first by name.
    const first = ownTempDir(tempDir(), uid);
    if (first && first !== dir) {
      rmdirSync(dir);
      dir = first;
    }
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0) {
    throw unavailable(
      `refusing the private daemon's directory ${dir}: it must be a directory of uid ${uid}'s own, not a link, closed to others (\`chmod 700\` it, or remove it)`,
    );
  }
  return dir;
}

/** Starts the private daemon for `socket` unless one accepts there; resolves to the socket
 * to connect to once one does. */
export async function startPrivate(socket: string): Promise<string> {
  const dir = prepare(dirname(socket));
  socket = join(dir, basename(socket));
  if (await accepts(socket)) return socket;
  const exe = executable(DAEMON_EXECUTABLE, DAEMON_ENV);
  const logPath = join(dir, "daemon.log");
  const log = openSync(logPath, "a", 0o600);
  let exited: string | undefined;
  let child: ChildProcess;
  try {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !SERVICE_MANAGER_ENV.includes(k)) env[k] = v;
    child = spawn(exe, ["--socket", socket, "--store", join(dir, "store"), "--idle-exit-ms", String(IDLE_EXIT_MS)], {
      // Not the caller's directory, nor its service manager's variables.
      cwd: "/",
      env,
      // Its own session: the terminal's Ctrl-C for this program does not reach it.
      detached: true,
      stdio: ["ignore", "ignore", log],
    });
    child.once("error", (e) => (exited = `cannot run it: ${e.message}`));
    child.once("exit", (code, signal) => (exited = `status ${code ?? signal}`));
    // Neither the child nor its pipes keep this program's event loop alive.
    child.unref();
  } finally {
    closeSync(log);
  }
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await accepts(socket)) return socket;
    // A daemon that lost a race to another starter exits only once the winner accepts.
    if (exited !== undefined && !(await accepts(socket))) {
      throw unavailable(`the private daemon ${exe} exited at start (${exited}); see ${logPath}`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  // Not left running.
  child.kill("SIGKILL");
  throw unavailable(`the private daemon ${exe} did not accept connections within ${START_TIMEOUT_MS / 1000} s; see ${logPath}`);
}

/** The error for a daemon that refused this client's protocol: where, and what to do. */
export function otherVersion(path: string, message: string, isPrivate: boolean, version: string): Error {
  const todo = isPrivate
    ? `It is your private daemon: stop it (\`pkill -f 'jqjaild --socket ${path}'\`: it finishes what it runs and keeps its hides), and the next call starts this version's`
    : "Use a client of the daemon's version, or upgrade the daemon";
  return unavailable(`the daemon at ${path} is another version of jqjaild: ${message}; this client is jqjail-typescript/${version}. ${todo}`);
}
