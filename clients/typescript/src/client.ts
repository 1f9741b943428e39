import { accessSync, constants as fsConstants, existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { connect as netConnect, Socket } from "node:net";
import { dirname, isAbsolute, join, resolve } from "node:path";
import {
  Cost, decodeResponse, errorOf, cutOf, endsOf, pageOf, HideEnds, HidePage, frame, Hidden, HideCut, HideEntry, JqjailError, Limits,
  MAX_RESPONSE_FRAME_BYTES, MAX_TAIL_BYTES, NotListening, PROTOCOL_VERSION, Response, tailLength, unavailable, UntrustedSocket, VERSION,
} from "./wire.js";
import { otherVersion, startPrivate } from "./private.js";

/** The most hides `hideList` gathers: the store's own cap per tenant. */
export const MAX_LISTED = 10_000;
export const SYSTEM_SOCKET = "/run/jqjail/jqjail.sock";
export const SOCKET_ENV = "JQJAIL_SOCKET";
export const DAEMON_UIDS_ENV = "JQJAIL_DAEMON_UIDS";

/** The uids whose daemon this client talks to: the user's, root's, and $JQJAIL_DAEMON_UIDS'. */
/** `signal`, also aborted after `timeoutMs` when that is given. */
function withTimeout(signal: AbortSignal | undefined, timeoutMs: number | undefined): AbortSignal | undefined {
  if (timeoutMs === undefined) return signal;
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal ? AbortSignal.any([signal, timeout]) : timeout;
}

/** The hello reply's limits, each a safe non-negative integer (they bound what is read). */
/** The `hide_ends` request's fields (also what the conformance vectors hold). */
export function endsRequest(id: string, options: { pageSize?: number; hint?: boolean; maxPathBytes?: number } = {}): Record<string, unknown> {
  return { id, page_size: options.pageSize ?? null, hint: options.hint ?? false, max_path_bytes: options.maxPathBytes ?? null };
}

function limitsOf(fields: any, path: string): Limits {
  const names = ["max_input_bytes", "max_filter_bytes", "max_depth", "max_output_bytes", "timeout_ms", "max_heap_bytes"] as const;
  const limits = fields?.limits;
  for (const name of names) {
    const v = limits?.[name];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw unavailable(`the hello reply of ${path} has no usable ${name}`);
    }
  }
  return limits as Limits;
}

export function trustedUids(): number[] {
  const uids = [process.getuid!(), 0];
  for (const part of (process.env[DAEMON_UIDS_ENV] ?? "").split(",")) {
    const p = part.trim();
    if (p === "") continue;
    if (!/^[0-9]+$/.test(p)) throw unavailable(`$${DAEMON_UIDS_ENV} holds "${p}", which is not a uid`);
    uids.push(Number(p));
  }
  return uids;
}

/**
 * Who serves a socket. Node cannot read a connected socket's peer (SO_PEERCRED), so this checks
 * the socket file instead: it must be a socket owned by a trusted uid, in a directory owned by
 * a trusted uid that no other user can write to (or a sticky one), so that nobody else can have
 * put it there or swap it between this check and the connection; the check is made again
 * after connecting. The Rust, Python and Go clients check the peer process itself.
 */
export function checkSocketFile(path: string): { dev: number; ino: number } {
  const trusted = trustedUids();
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    throw new NotListening(`cannot connect to ${path}: ${(e as Error).message}`);
  }
  if (!st.isSocket()) throw unavailable(`${path} is not a socket`);
  if (!trusted.includes(st.uid)) {
    throw new UntrustedSocket(`${path} belongs to uid ${st.uid}, which is not trusted (trusted: ${trusted.join(", ")}); set $${DAEMON_UIDS_ENV} if that uid runs your daemon`);
  }
  // Every directory on the way (as OpenSSH's secure_path): one another user could rename
  // could be swapped for theirs between the checks and back.
  for (let dir = dirname(resolve(path)); ; dir = dirname(dir)) {
    const d = statSync(dir);
    const othersMayWrite = (d.mode & 0o022) !== 0;
    const sticky = (d.mode & 0o1000) !== 0;
    if (!trusted.includes(d.uid) || (othersMayWrite && !sticky)) {
      throw new UntrustedSocket(`${path} is under ${dir}, which another user could change (owner ${d.uid}, mode ${(d.mode & 0o7777).toString(8)}); not trusting the socket`);
    }
    if (dir === dirname(dir)) break;
  }
  return { dev: st.dev, ino: st.ino };
}

/**
 * The socket of the user's private daemon (the one the `jqjail` CLI starts), found as the CLI
 * finds its directory: the first usable of $XDG_RUNTIME_DIR/jqjail, $TMPDIR/jqjail-UID and
 * ${XDG_CACHE_HOME:-$HOME/.cache}/jqjail, where usable is a directory of the user's own, not a
 * link, closed to others, or nothing yet in a directory the user may write in. When none is (a
 * service account with no runtime dir, no writable home, and a jqjail-UID another user
 * planted), the CLI made $TMPDIR/jqjail-UID-XXXXXX instead: the first by name of the user's
 * own is it.
 */
export function privateSocket(): string {
  const uid = process.getuid!();
  const candidates: string[] = [];
  // Absolute paths only: a relative one would be under whatever directory the program runs in.
  const runtime = process.env.XDG_RUNTIME_DIR;
  if (runtime && isAbsolute(runtime)) {
    try {
      if (statSync(runtime).isDirectory()) candidates.push(join(runtime, "jqjail"));
    } catch {
      // not there: skipped
    }
  }
  const temp = tempDir();
  candidates.push(join(temp, `jqjail-${uid}`));
  const absolute = (p: string | undefined) => (p && isAbsolute(p) ? p : "");
  const home = absolute(process.env.HOME);
  const cache = absolute(process.env.XDG_CACHE_HOME) || (home ? join(home, ".cache") : "");
  if (cache) candidates.push(join(cache, "jqjail"));
  for (const dir of candidates) {
    if (usableDir(dir, uid)) return join(dir, "jqjail.sock");
  }
  const own = ownTempDir(temp, uid);
  if (own) return join(own, "jqjail.sock");
  return join(candidates[candidates.length - 1], "jqjail.sock");
}

/** $TMPDIR when it is an absolute path, else /tmp. */
export function tempDir(): string {
  const temp = process.env.TMPDIR;
  return temp && isAbsolute(temp) ? temp : "/tmp";
}

/** The first (by name) `temp/jqjail-UID-*` directory of the user's own, if any. */
export function ownTempDir(temp: string, uid: number): string | undefined {
  let names: string[] = [];
  try {
    names = readdirSync(temp).sort();
  } catch {
    // an unreadable temp dir: no fallback to find
  }
  for (const name of names) {
    const dir = join(temp, name);
    if (name.startsWith(`jqjail-${uid}-`) && usableDir(dir, uid, true)) return dir;
  }
  return undefined;
}

/** A directory of `uid`'s own (not a link) closed to others, or (unless `existing`) nothing
 * there yet in a directory this process may write in. */
export function usableDir(dir: string, uid: number, existing = false): boolean {
  try {
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === uid && (st.mode & 0o077) === 0;
  } catch (e) {
    if (existing || (e as NodeJS.ErrnoException).code !== "ENOENT") return false;
  }
  let parent = dirname(dir);
  while (!existsSync(parent) && parent !== dirname(parent)) parent = dirname(parent);
  try {
    accessSync(parent, fsConstants.W_OK | fsConstants.X_OK);
    return statSync(parent).isDirectory();
  } catch {
    return false;
  }
}

/** A named argument: bound as `$name`; its value is sent as JSON text, data and never code. */
export type Args = Record<string, unknown> | Array<[string, unknown]>;

export interface RunOptions {
  lang?: "jq" | "path" | "shape";
  /** Every output as compact JSON and a newline, rather than the collapsed answer. */
  outputs?: "collapsed" | "lines";
  /** Keep an output over the output limit as a hide (`RunResult.hidden`). */
  onOversize?: "error" | "hide";
  timeoutMs?: number;
  maxOutputBytes?: number;
  maxDepth?: number;
  args?: Args;
  positional?: unknown[];
  /** Abandons the request (the connection is closed). */
  signal?: AbortSignal;
}

/** A run's answer: `output` is JSON text (integers keep every digit), or `hidden`. */
export interface RunResult {
  output: string;
  cost: Cost;
  hidden: Hidden | null;
}

/** What may be given as input: JSON text (string or bytes), or any JSON value. */
export type Input = string | Uint8Array | unknown;

function inputBytes(input: Input): Buffer {
  if (typeof input === "string") return Buffer.from(input, "utf8");
  if (input instanceof Uint8Array) return Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const text = JSON.stringify(input);
  if (text === undefined) throw new TypeError("the input has no JSON form");
  return Buffer.from(text, "utf8");
}

/** A value's JSON text; a value without one (undefined, a function, a BigInt, a cycle) is refused. */
function jsonText(value: unknown, what: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (e) {
    throw new TypeError(`${what} has no JSON form: ${(e as Error).message}`);
  }
  if (text === undefined) throw new TypeError(`${what} has no JSON form`);
  return text;
}

/** A run request's fields (PROTOCOL.md, "run (request)"). */
export function runRequest(filter: string, input: object, options: RunOptions = {}): object {
  const run: Record<string, unknown> = {
    filter,
    lang: options.lang ?? "jq",
    input,
    outputs: options.outputs ?? "collapsed",
    on_oversize: options.onOversize ?? "error",
    limits: {
      timeout_ms: options.timeoutMs ?? null,
      max_output_bytes: options.maxOutputBytes ?? null,
      max_depth: options.maxDepth ?? null,
    },
  };
  if (options.args || options.positional) {
    const pairs = Array.isArray(options.args) ? options.args : Object.entries(options.args ?? {});
    // A prototype-free object: `__proto__` is a name like any other. String keys keep their
    // order (integer-like ones would not, but they are not valid names): $ARGS.named lists the
    // names in the order given.
    const named: Record<string, string> = Object.create(null);
    for (const [name, value] of pairs) {
      if (Object.prototype.hasOwnProperty.call(named, name)) throw new TypeError(`the argument $${name} is given twice`);
      named[name] = jsonText(value, `the argument $${name}`);
    }
    const positional = (options.positional ?? []).map((v, i) => jsonText(v, `positional argument ${i}`));
    run.args = { named, positional };
  }
  return { run };
}

/** The answers after which the daemon closes the connection (PROTOCOL.md). */
function closesConnection(e: JqjailError): boolean {
  if (["FRAME_TOO_LARGE", "PROTOCOL_ERROR", "UNSUPPORTED_VERSION", "PERMISSION_DENIED"].includes(e.code)) return true;
  return e.code === "OVERLOADED" && e.message.endsWith("the connection is closed");
}

export interface ConnectOptions {
  /** Abandons connecting. */
  signal?: AbortSignal;
  /**
   * Bounds each call, connecting and the hello included, in milliseconds; a call over it is
   * abandoned and the connection closed. Default: no bound but the daemon's own limits.
   */
  timeoutMs?: number;
}

/**
 * One connection to the daemon, promise-based. Calls take turns (one request at a time per
 * connection; open more clients for concurrency). After a failure to talk to the daemon (code
 * UNAVAILABLE), an aborted or timed-out call, or an answer after which the daemon closes the
 * connection, the connection is closed and later calls fail.
 */
export class Client {
  readonly path: string;
  limits!: Limits;
  server = "";
  private sock: Socket;
  private readonly timeoutMs: number | undefined;
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Bytes the current read waits for; the socket is paused while nothing is wanted. */
  private wanted = 0;
  private waiter: (() => void) | null = null;
  private ended: Error | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private broken: Error | null = null;

  private constructor(path: string, sock: Socket, timeoutMs: number | undefined) {
    this.path = path;
    this.sock = sock;
    this.timeoutMs = timeoutMs;
    sock.pause();
    sock.on("data", (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
      // Only what a read asked for is taken in: a peer that sends more than it announced
      // meets a paused socket, not a growing buffer.
      if (this.buffered >= this.wanted) sock.pause();
      this.wake();
    });
    sock.on("end", () => this.finish(unavailable(`${path} closed the connection`)));
    sock.on("close", () => this.finish(unavailable(`${path} closed the connection`)));
    sock.on("error", (e) => this.finish(unavailable(`${path}: ${e.message}`)));
  }

  /**
   * Connects to the daemon at `path`, or where every jqjail client looks (PROTOCOL.md,
   * "Finding the socket"): $JQJAIL_SOCKET, the system service's socket, the user's private
   * daemon. Checks who serves the socket before a byte is sent, then exchanges hellos.
   */
  static async connect(path?: string, options: ConnectOptions = {}): Promise<Client> {
    if (path) return Client.open(path, options);
    const env = process.env[SOCKET_ENV];
    if (env) return Client.open(env, options);
    try {
      return await Client.open(SYSTEM_SOCKET, options);
    } catch (e) {
      // A refusal there, or a socket there that is not trusted, is said rather than passed
      // over for the private daemon.
      const refusedThere = e instanceof JqjailError && e.code !== "UNAVAILABLE";
      if (refusedThere || e instanceof UntrustedSocket) throw e;
    }
    // The user's private daemon, started when nothing accepts at its socket (as the jqjail
    // command line does).
    const socket = privateSocket();
    try {
      return await Client.open(socket, options, true);
    } catch (e) {
      if (!(e instanceof NotListening)) throw e;
    }
    return Client.open(await startPrivate(socket), options, true);
  }

  private static async open(path: string, options: ConnectOptions, isPrivate = false): Promise<Client> {
    const signal = withTimeout(options.signal, options.timeoutMs);
    const before = checkSocketFile(path);
    const sock = await new Promise<Socket>((resolve, reject) => {
      const s = netConnect(path);
      const abort = () => {
        s.destroy();
        reject(signal!.reason ?? unavailable(`connecting to ${path} was abandoned`));
      };
      signal?.addEventListener("abort", abort, { once: true });
      s.once("connect", () => {
        signal?.removeEventListener("abort", abort);
        resolve(s);
      });
      s.once("error", (e) => reject(new NotListening(`cannot connect to ${path}: ${e.message}`)));
    });
    const c = new Client(path, sock, options.timeoutMs);
    try {
      const after = checkSocketFile(path);
      if (after.dev !== before.dev || after.ino !== before.ino) {
        throw new UntrustedSocket(`${path} was replaced while connecting; not trusting it`);
      }
      const hello = frame({ hello: { protocol: PROTOCOL_VERSION, client: `jqjail-typescript/${VERSION}` } });
      const r = await c.roundTrip(hello, undefined, 0, ["hello"], signal);
      if (r.response.kind === "error") {
        const refusal = errorOf(r.response.fields);
        if (refusal.code === "UNSUPPORTED_VERSION") throw otherVersion(path, refusal.message, isPrivate, VERSION);
        throw refusal;
      }
      c.limits = limitsOf(r.response.fields, path);
      c.server = String(r.response.fields.server ?? "");
      return c;
    } catch (e) {
      sock.destroy();
      throw e;
    }
  }

  close(): void {
    this.sock.destroy();
  }

  private finish(e: Error): void {
    this.ended ??= e;
    this.wake();
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  private async readExact(n: number, signal?: AbortSignal): Promise<Buffer> {
    this.wanted = n;
    while (this.buffered < n) {
      if (this.ended) throw this.ended;
      if (signal?.aborted) throw signal.reason ?? new Error("aborted");
      this.sock.resume();
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
        signal?.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    this.wanted = 0;
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.buffered);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.buffered = rest.length;
    return out;
  }

  /**
   * One request and its answer. The socket holds Node's event loop only meanwhile: an idle
   * client never keeps a process alive, so a one-shot script exits without `close()` (the
   * seed's tool has none).
   */
  private async roundTrip(head: Buffer, tail: Buffer | undefined, bound: number, expect: string[], signal?: AbortSignal): Promise<{ response: Response; tail: Buffer }> {
    this.sock.ref();
    try {
      return await this.exchange(head, tail, bound, expect, signal);
    } finally {
      this.sock.unref();
    }
  }

  private async exchange(head: Buffer, tail: Buffer | undefined, bound: number, expect: string[], signal?: AbortSignal): Promise<{ response: Response; tail: Buffer }> {
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    if (this.buffered > 0) throw unavailable(`${this.path} sent bytes that answer nothing`);
    this.sock.write(tail && tail.length > 0 ? Buffer.concat([head, tail]) : head);
    const prefix = await this.readExact(4, signal);
    const n = prefix.readUInt32LE(0);
    if (n > MAX_RESPONSE_FRAME_BYTES) {
      throw unavailable(`the daemon sent a ${n}-byte frame, over the ${MAX_RESPONSE_FRAME_BYTES}-byte maximum`);
    }
    const response = decodeResponse(await this.readExact(n, signal));
    if (response.kind !== "error" && !expect.includes(response.kind)) {
      throw unavailable(`the daemon answered ${response.kind}, expected ${expect.join(" or ")}`);
    }
    const tailBytes = await this.readExact(tailLength(response, Math.min(bound, MAX_TAIL_BYTES)), signal);
    return { response, tail: tailBytes };
  }

  /** Sends one request and reads its one answer; `expect` names the variants that may answer. */
  private call(request: unknown, tail: Buffer | undefined, expect: string[], userSignal?: AbortSignal): Promise<{ response: Response; tail: Buffer }> {
    const turn = this.queue.then(async () => {
      if (this.broken) throw this.broken;
      const bound = Math.max(this.limits.max_input_bytes, this.limits.max_output_bytes);
      let r;
      try {
        r = await this.roundTrip(frame(request), tail, bound, expect, withTimeout(userSignal, this.timeoutMs));
      } catch (e) {
        this.broken = e instanceof Error ? e : new Error(String(e));
        this.sock.destroy();
        throw e;
      }
      if (r.response.kind === "error") {
        const e = errorOf(r.response.fields);
        if (closesConnection(e)) {
          this.broken = unavailable(`the connection was closed after ${e.message}`);
          this.sock.destroy();
        }
        throw e;
      }
      return r;
    });
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /** Evaluates `filter` over `input` (JSON text as a string or bytes, or any JSON value). */
  run(filter: string, input: Input, options: RunOptions = {}): Promise<RunResult> {
    const tail = inputBytes(input);
    return this.runWith(filter, { inline: tail.length }, tail, options);
  }

  /** Evaluates `filter` over one of the caller's hides, read by the daemon off its disk. */
  runHide(filter: string, id: string, options: RunOptions = {}): Promise<RunResult> {
    return this.runWith(filter, { hide: id }, undefined, options);
  }

  /** Evaluates `filter` over a stream of JSON texts that it reads with `input` and `inputs`. */
  runValues(filter: string, values: string | Uint8Array, nullInput: boolean, options: RunOptions = {}): Promise<RunResult> {
    const tail = inputBytes(values);
    return this.runWith(filter, { values: { values: tail.length, null_input: nullInput } }, tail, options);
  }

  /** The bounded shape summary of a JSON document, or of a hide (`{ hide: id }`). */
  async shape(input: Input | { hide: string }): Promise<unknown> {
    const hide = typeof input === "object" && input !== null && !(input instanceof Uint8Array) && "hide" in input ? (input as { hide: string }).hide : null;
    const r = hide !== null ? await this.runHide("", hide, { lang: "shape" }) : await this.run("", input, { lang: "shape" });
    return JSON.parse(r.output);
  }

  private async runWith(filter: string, input: object, tail: Buffer | undefined, options: RunOptions): Promise<RunResult> {
    const { response, tail: out } = await this.call(runRequest(filter, input, options), tail, ["run", "hidden"], options.signal);
    if (response.kind === "hidden") {
      const f = response.fields;
      const hidden: Hidden = { entry: f.entry, first: cutOf(f.first, out), cost: f.cost };
      return { output: "", cost: f.cost, hidden };
    }
    return { output: out.toString("utf8"), cost: response.fields.cost, hidden: null };
  }

  /** The daemon's counters, as far as the caller may see them. */
  async stats(): Promise<any> {
    return (await this.call("stats", undefined, ["stats"])).response.fields;
  }

  /** Stores `content` as a hide of the caller: the same content from the same source gives the same ID. */
  async hidePut(content: string | Uint8Array, options: { kind?: string; source?: string; meta?: Record<string, string> } = {}): Promise<{ entry: HideEntry; created: boolean; evicted: string[] }> {
    const tail = inputBytes(content);
    const request = { hide_put: { kind: options.kind ?? "", source: options.source ?? "", meta: options.meta ?? {}, content_bytes: tail.length } };
    return (await this.call(request, tail, ["hide_put"])).response.fields;
  }

  async hideGet(id: string): Promise<{ entry: HideEntry; content: Buffer }> {
    const r = await this.call({ hide_get: { id } }, undefined, ["hide_content"]);
    return { entry: r.response.fields.entry, content: r.tail };
  }

  /** Page `page` (from 1) of a hide; `pageSize` bytes a page (default 16,384). */
  async hideCut(id: string, page: number, options: { pageSize?: number; hint?: boolean } = {}): Promise<HideCut> {
    const r = await this.call({ hide_cut: { id, page, page_size: options.pageSize ?? null, hint: options.hint ?? false } }, undefined, ["hide_cut"]);
    return cutOf(r.response.fields, r.tail);
  }

  /**
   * One page of a hide (protocol 3), by number (`{ page }`), by a path in it (`{ path }`: `$[17].labels`,
   * `.[17].labels` or `[17,"labels"]`) or by a byte it holds (`{ offset }`, a search match's), in JSON pages (pages end between values and name their paths; a hide
   * that is not one JSON value is cut in bytes, and the answer says so) or `pages: "bytes"`.
   */
  async hidePage(
    id: string,
    at: { page: number } | { path: string } | { offset: number },
    options: { pageSize?: number; hint?: boolean; pages?: "json" | "bytes" } = {},
  ): Promise<HidePage> {
    const where = "path" in at ? { path: at.path } : "offset" in at ? { offset: at.offset } : { page: at.page };
    const request = { hide_page: { id, at: where, page_size: options.pageSize ?? null, hint: options.hint ?? false, pages: options.pages ?? "json" } };
    const r = await this.call(request, undefined, ["hide_page"]);
    return pageOf(r.response.fields, r.tail);
  }

  /**
   * A hide's head and tail (protocol 4): its beginning and its end, each half of `pageSize`
   * (16,384 unless given, at least 128), and what lies between them: bytes, paths and the
   * elements of one array.
   */
  async hideEnds(id: string, options: { pageSize?: number; hint?: boolean; maxPathBytes?: number } = {}): Promise<HideEnds> {
    const request = { hide_ends: endsRequest(id, options) };
    const r = await this.call(request, undefined, ["hide_ends"]);
    return endsOf(r.response.fields, r.tail);
  }

  async hideSearch(id: string, query: string, options: { ignoreCase?: boolean; pageSize?: number; maxMatches?: number } = {}): Promise<{ hide_id: string; matches: { page: number; offset: number }[]; truncated: boolean; total_pages: number; page_size: number }> {
    const request = { hide_search: { id, query, ignore_case: options.ignoreCase ?? false, page_size: options.pageSize ?? null, max_matches: options.maxMatches ?? null } };
    return (await this.call(request, undefined, ["hide_search"])).response.fields;
  }

  /** One page of the caller's hides, newest first; `next` is the next page's offset or null. */
  async hideListPage(offset = 0, limit?: number): Promise<{ entries: HideEntry[]; total: number; next: number | null }> {
    return (await this.call({ hide_list: { offset, limit: limit ?? null } }, undefined, ["hide_list"])).response.fields;
  }

  /** All of the caller's hides, newest first (at most 10,000, the store's cap; a daemon whose pages do not move on is refused). */
  async hideList(): Promise<HideEntry[]> {
    const all: HideEntry[] = [];
    let offset = 0;
    for (;;) {
      const page = await this.hideListPage(offset, 1000);
      all.push(...page.entries);
      if (page.next === null) return all;
      if (page.entries.length === 0 || page.next !== offset + page.entries.length || all.length > MAX_LISTED) {
        throw unavailable(`the daemon's hide list does not move on (offset ${offset}, ${page.entries.length} entries, next ${page.next}, ${all.length} gathered)`);
      }
      offset = page.next;
    }
  }

  async hideDelete(id: string): Promise<HideEntry> {
    return (await this.call({ hide_delete: { id } }, undefined, ["hide_entry"])).response.fields;
  }

  async hideUsage(): Promise<{ entries: number; bytes: number; quota_bytes: number; max_age_secs: number }> {
    return (await this.call("hide_usage", undefined, ["hide_usage"])).response.fields;
  }
}
