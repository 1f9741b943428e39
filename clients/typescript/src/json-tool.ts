// A drop-in for dsh-tool-json's `json` tool: the same parameters, path syntax, limits, error
// classes and `json:` messages, with the query evaluated by the jqjail daemon's path language
// in a confined worker.
import { Client } from "./client.js";
import { JqjailError } from "./wire.js";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** The seed's four classes; input problems use the daemon's codes (INVALID_JSON, INPUT_TOO_LARGE, INPUT_TOO_DEEP). */
export type JsonQueryErrorCode = "MISSING_PROPERTY" | "TYPE_MISMATCH" | "INDEX_OUT_OF_BOUNDS" | "INVALID_QUERY";

export class JsonQueryError extends Error {
  readonly code: JsonQueryErrorCode | string;
  constructor(code: JsonQueryErrorCode | string, message: string) {
    super(message.startsWith("json:") ? message : `json: ${message}`);
    this.name = "JsonQueryError";
    this.code = code;
  }
}

/** The seed's limits. The query's (200 characters, 20 steps) and the input's nesting (100) and projection (100,000) ones are the daemon's path language's. */
export const MAX_INPUT_BYTES = 1_000_000;
export const MAX_INPUT_DEPTH = 100;
export const TIMEOUT_MS = 1000;

/** Checks that a value given as an object is JSON: null, booleans, finite numbers, strings, arrays and plain objects, no cycles, at most 100 levels. */
function assertJsonCompatible(value: unknown, depth: number, seen: Set<object>): void {
  if (value === null || typeof value === "string" || typeof value === "boolean") return;
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new JsonQueryError("INVALID_JSON", `input holds ${value}, which JSON cannot represent`);
    return;
  }
  if (typeof value !== "object") throw new JsonQueryError("INVALID_JSON", `input holds a ${typeof value}, which is not a JSON value`);
  if (depth >= MAX_INPUT_DEPTH) throw new JsonQueryError("INPUT_TOO_DEEP", `input nests deeper than ${MAX_INPUT_DEPTH} levels`);
  if (seen.has(value)) throw new JsonQueryError("INVALID_JSON", "input refers to itself (a cycle)");
  seen.add(value);
  if (Array.isArray(value)) {
    for (const v of value) assertJsonCompatible(v, depth + 1, seen);
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      throw new JsonQueryError("INVALID_JSON", `input holds a ${value.constructor?.name ?? "non-plain"} object, which is not a JSON value`);
    }
    for (const key of Object.keys(value)) assertJsonCompatible((value as Record<string, unknown>)[key], depth + 1, seen);
  }
  seen.delete(value);
}

/** The input as JSON text: a string is passed through as the JSON text it holds; a value is checked, then encoded. */
function normalizeInput(input: unknown): string {
  let text: string;
  if (typeof input === "string") {
    text = input;
  } else {
    assertJsonCompatible(input, 0, new Set());
    text = JSON.stringify(input);
  }
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_INPUT_BYTES) throw new JsonQueryError("INPUT_TOO_LARGE", `input is ${bytes} bytes, over the ${MAX_INPUT_BYTES}-byte limit`);
  return text;
}

/** Queries `input` (a JSON value, or a string of JSON text) with a path expression such as `data.items[0].name`. */
export async function query(client: Client, input: unknown, expression: string): Promise<JsonValue> {
  if (typeof expression !== "string") throw new JsonQueryError("INVALID_QUERY", "query must be a string");
  const text = normalizeInput(input);
  try {
    // The seed bounds a projection by elements (100,000), not its answer by bytes: an answer
    // over the daemon's output limit is kept as a hide, read back whole, and deleted, so the
    // tool answers what the seed answers. It is never larger than a small multiple of the
    // input (at most 1,000,000 bytes): a path selects from the input, it does not build.
    // Hides are named by their content: another call of this uid with the same answer may
    // delete the hide between this call's run and its read, and the run is then done again.
    for (let attempt = 1; ; attempt++) {
      const r = await client.run(expression, text, {
        lang: "path",
        timeoutMs: Math.min(TIMEOUT_MS, client.limits.timeout_ms),
        onOversize: "hide",
      });
      if (!r.hidden) return JSON.parse(r.output) as JsonValue;
      const id = r.hidden.entry.id;
      try {
        return JSON.parse((await client.hideGet(id)).content.toString("utf8")) as JsonValue;
      } catch (e) {
        if (!(e instanceof JqjailError && e.code === "NOT_FOUND" && attempt < 3)) throw e;
      } finally {
        await client.hideDelete(id).catch(() => undefined);
      }
    }
  } catch (e) {
    if (e instanceof JqjailError && e.code !== "UNAVAILABLE") throw new JsonQueryError(e.code, e.message.slice(e.code.length + 2));
    throw e;
  }
}

/** The tool, in the shape the seed registers (`ctx.tools.register(defineTool(jsonTool()))`). */
export function jsonTool(options: { socket?: string } = {}) {
  let client: Client | null = null;
  const connected = async (): Promise<Client> => {
    // Each call is bounded on the socket too: the daemon's answer to the 1 s limit, and a grace.
    client ??= await Client.connect(options.socket, { timeoutMs: TIMEOUT_MS + 2000 });
    return client;
  };
  const execute = async (args: { input: unknown; query: string }): Promise<JsonValue> => {
    try {
      return await query(await connected(), args.input, args.query);
    } catch (e) {
      // A connection that failed is dropped: the next call connects again.
      if (e instanceof JqjailError && e.code === "UNAVAILABLE") client = null;
      throw e;
    }
  };
  return {
    name: "json",
    description: "Query a JSON value with a path expression (JMESPath-inspired subset: a.b, [0], ['key'], [*]).",
    parameters: {
      input: { type: "json", required: true, description: "JSON value or JSON string to query." },
      query: { type: "string", required: true, description: 'Path expression, e.g. "data.items[0].name".' },
    },
    output: {
      schema: { type: "json" },
      render: (_args: unknown, v: JsonValue) => [{ type: "text", text: JSON.stringify(v) }],
    },
    execute,
    timeoutMs: TIMEOUT_MS,
    close: () => client?.close(),
  };
}
