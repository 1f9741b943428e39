// The jqjail protocol v4 in its JSON encoding (PROTOCOL.md): frames, tails, responses.
// Everything here is pure; the client moves the bytes.

export const PROTOCOL_VERSION = 4;
export const VERSION = "0.1.0";
/** Response frames longer than this are refused (the daemon's never are). */
export const MAX_RESPONSE_FRAME_BYTES = 8 << 20;
/** No tail is read past this, whatever the daemon's limits say. */
export const MAX_TAIL_BYTES = 1 << 30;

/** The code of failures to reach, trust or understand the daemon; the connection is closed. */
export const UNAVAILABLE = "UNAVAILABLE";

/**
 * An error the daemon answered (`code` is the stable code to branch on, PROTOCOL.md "Error
 * codes"; `limit` and `actual` name the limit and the value that hit it), or a failure to reach
 * or trust it (`code` UNAVAILABLE).
 */
export class JqjailError extends Error {
  readonly code: string;
  readonly limit: number | null;
  readonly actual: number | null;
  readonly detail: string | null;

  constructor(code: string, message: string, limit: number | null = null, actual: number | null = null, detail: string | null = null) {
    super(`${code}: ${message}`);
    this.name = "JqjailError";
    this.code = code;
    this.limit = limit;
    this.actual = actual;
    this.detail = detail;
  }
}

export function unavailable(message: string): JqjailError {
  return new JqjailError(UNAVAILABLE, message);
}

/** Nothing accepts connections at a socket (no file there, or no daemon behind it): where the
 * private daemon is, the client starts one. */
export class NotListening extends JqjailError {
  constructor(message: string) {
    super(UNAVAILABLE, message);
    this.name = "NotListening";
  }
}

/** A socket served, or placed, by someone the client does not trust: never fallen back from. */
export class UntrustedSocket extends JqjailError {
  constructor(message: string) {
    super(UNAVAILABLE, message);
    this.name = "UntrustedSocket";
  }
}

export interface Limits {
  max_input_bytes: number;
  max_filter_bytes: number;
  max_depth: number;
  max_output_bytes: number;
  timeout_ms: number;
  max_heap_bytes: number;
}

export interface Cost {
  wall_us: number;
  cpu_us: number;
  peak_rss_bytes: number;
  input_bytes: number;
  output_bytes: number;
}

export interface HideEntry {
  id: string;
  kind: string;
  source: string;
  size: number;
  sha256: string;
  meta: Record<string, string>;
  created_ms: number;
}

/** One page of a hide: `content` is the page's bytes, `preface` the hint for a model. */
export interface HideCut {
  hide_id: string;
  page: number;
  total_pages: number;
  page_size: number;
  offset: number;
  size: number;
  content: Buffer;
  preface: string | null;
}

/** Where a JSON page is: the paths of its first and last values (`$[1].labels[0]`), the innermost array open around its start, its depth, and the offsets into a string longer than a page where it starts or stops. */
export interface JsonPlace {
  first: string;
  last: string;
  array: { path: string; length: number } | null;
  depth: number;
  starts_in_string: number | null;
  ends_in_string: number | null;
}

/** A page of a hide (protocol 3): `pages` is "json" (then `json` says where it is) or "bytes" (asked for, or the hide is not one JSON value: `not_json` says why). */
export interface HidePage extends HideCut {
  pages: "json" | "bytes";
  json: JsonPlace | null;
  not_json: string | null;
}

/** One end of a hide: its offset and length, and where it is (JSON pages). */
export interface End {
  offset: number;
  length: number;
  json: JsonPlace | null;
}

/** What lies between a hide's head and tail: its offset and bytes, the paths of its first and last values, and the elements of one array it touches, in whole or in part. */
export interface LeftOut {
  offset: number;
  bytes: number;
  first: string | null;
  last: string | null;
  elements: { array: string; from: number; to: number; length: number | null } | null;
}

/** A hide's head and tail (protocol 4): `tail` is null when the head is all of it, `left_out` when they meet; `content` is the head's bytes, then the tail's. */
export interface HideEnds {
  hide_id: string;
  size: number;
  page_size: number;
  pages: "json" | "bytes";
  head: End;
  tail: End | null;
  left_out: LeftOut | null;
  not_json: string | null;
  content: Buffer;
  preface: string | null;
}

/** A run's output over the output limit, kept as a hide: its entry and page 1. */
export interface Hidden {
  entry: HideEntry;
  first: HideCut;
  cost: Cost;
}

/** A JSON frame: the body with its 4-byte little-endian length prefix. */
export function frame(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), "utf8");
  const out = Buffer.alloc(4 + body.length);
  out.writeUInt32LE(body.length, 0);
  body.copy(out, 4);
  return out;
}

export interface Response {
  kind: string;
  fields: any;
}

/** A response body as its variant and fields. */
export function decodeResponse(body: Buffer): Response {
  let message: unknown;
  try {
    message = JSON.parse(body.toString("utf8"));
  } catch (e) {
    throw unavailable(`the daemon's frame is not JSON: ${(e as Error).message}`);
  }
  if (typeof message === "string") return { kind: message, fields: {} };
  if (message === null || typeof message !== "object" || Array.isArray(message)) {
    throw unavailable("the daemon's frame is not one response");
  }
  const keys = Object.keys(message);
  if (keys.length !== 1) throw unavailable(`the daemon's frame holds ${keys.length} responses, not one`);
  return { kind: keys[0], fields: (message as Record<string, unknown>)[keys[0]] };
}

/** How many raw bytes follow a response's frame (PROTOCOL.md, "Tails"), checked against `bound`. */
export function tailLength(r: Response, bound: number): number {
  let n: unknown;
  switch (r.kind) {
    case "run":
      n = r.fields?.output_bytes;
      break;
    case "hide_content":
    case "hide_cut":
    case "hide_page":
    case "hide_ends":
      n = r.fields?.content_bytes;
      break;
    case "hidden":
      n = r.fields?.first?.content_bytes;
      break;
    default:
      return 0;
  }
  if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 0) {
    throw unavailable(`the daemon's ${r.kind} answer has a bad tail length`);
  }
  if (n > bound) throw unavailable(`the daemon announced a ${n}-byte tail, over the ${bound}-byte bound`);
  return n;
}

export function errorOf(fields: any): JqjailError {
  if (typeof fields?.code !== "string") return unavailable("the daemon's error answer does not decode");
  return new JqjailError(fields.code, String(fields.message ?? ""), fields.limit ?? null, fields.actual ?? null, fields.detail ?? null);
}

function placeOf(json: any): JsonPlace | null {
  return json === null || json === undefined ? null : {
    first: json.first,
    last: json.last,
    array: json.array ?? null,
    depth: json.depth,
    starts_in_string: json.starts_in_string ?? null,
    ends_in_string: json.ends_in_string ?? null,
  };
}

export function pageOf(fields: any, content: Buffer): HidePage {
  return {
    ...cutOf(fields, content),
    pages: fields.pages === "bytes" ? "bytes" : "json",
    json: placeOf(fields.json),
    not_json: fields.not_json ?? null,
  };
}

/** A head and tail, checked: head, what is left out and tail must be the hide, and the content both ends (a lying daemon's numbers are refused, never sliced or summed). */
export function endsOf(fields: any, content: Buffer): HideEnds {
  const bad = (why: string) => unavailable(`the daemon's hide_ends answer ${why}`);
  const count = (v: unknown): number => {
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) throw bad(`has a bad number: ${JSON.stringify(v)}`);
    return v;
  };
  const end = (e: any): End | null => (e === null || e === undefined ? null : { offset: count(e.offset), length: count(e.length), json: placeOf(e.json) });
  if (fields === null || typeof fields !== "object") throw bad("does not decode");
  const head = end(fields.head);
  const tail = end(fields.tail);
  const size = count(fields.size);
  const left = fields.left_out ?? null;
  const leftBytes = left === null ? 0 : count(left.bytes);
  let elements = null;
  if (left !== null && left.elements !== null && left.elements !== undefined) {
    const el = left.elements;
    const from = count(el.from), to = count(el.to), length = el.length === null || el.length === undefined ? null : count(el.length);
    if (typeof el.array !== "string" || from > to || (length !== null && to >= length)) throw bad("has bad elements");
    elements = { array: el.array, from, to, length };
  }
  const tailLength = tail === null ? 0 : tail.length;
  if (
    head === null || head.offset !== 0 || head.length + tailLength !== content.length || head.length + leftBytes + tailLength !== size ||
    (left !== null && (tail === null || count(left.offset) !== head.length)) || (tail !== null && tail.offset !== head.length + leftBytes)
  ) {
    throw bad("has a head and tail that do not make the hide");
  }
  return {
    hide_id: String(fields.hide_id),
    size,
    page_size: count(fields.page_size),
    pages: fields.pages === "bytes" ? "bytes" : "json",
    head,
    tail,
    left_out: left === null ? null : { offset: head.length, bytes: leftBytes, first: left.first ?? null, last: left.last ?? null, elements },
    not_json: fields.not_json ?? null,
    content,
    preface: fields.preface ?? null,
  };
}

export function cutOf(fields: any, content: Buffer): HideCut {
  return {
    hide_id: fields.hide_id,
    page: fields.page,
    total_pages: fields.total_pages,
    page_size: fields.page_size,
    offset: fields.offset,
    size: fields.size,
    content,
    preface: fields.preface ?? null,
  };
}
