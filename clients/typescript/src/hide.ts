import { Client } from "./client.js";
import { End, Hidden, HideCut, HideEnds, HideEntry, HidePage, JqjailError } from "./wire.js";

export const TOOL_OUTPUT_KIND = "tool_output";

/** The smallest page size a head and tail is cut at (two ends of the smallest page). */
export const MIN_ENDS_PAGE_SIZE = 128;

/** A head and tail as a model sees it: the hint, the head with a header naming its bytes and paths, a line for what is left out between (bytes, paths, the elements of one array), the tail with its header, an end marker. */
export function formatEnds(ends: HideEnds): string {
  const header = (what: string, end: End): string =>
    `[HIDE id=${ends.hide_id} ${what}: bytes ${end.offset}..${end.offset + end.length} of ${ends.size}` +
    (end.json !== null ? ` · ${end.json.first} … ${end.json.last}` : "") + "]\n";
  const head = Math.min(ends.head.length, ends.content.length);
  let out = (ends.preface ? ends.preface + "\n" : "") + header("head", ends.head) + ends.content.subarray(0, head).toString("utf8");
  const left = ends.left_out;
  if (left !== null) {
    out += `\n[… left out: bytes ${left.offset}..${left.offset + left.bytes} (${left.bytes} bytes)`;
    if (left.first !== null && left.last !== null) out += ` · ${left.first} … ${left.last}`;
    if (left.elements !== null) {
      out += ` · elements ${left.elements.from} to ${left.elements.to} of ${left.elements.array}, in whole or in part`;
      if (left.elements.length !== null) out += ` (${left.elements.length} elements)`;
    }
    out += " …]";
  }
  if (ends.tail !== null) out += "\n" + header("tail", ends.tail) + ends.content.subarray(head).toString("utf8");
  return out + `\n[END head and tail of ${ends.hide_id}; hide_next reads from page 1]`;
}

/** A page as a model sees it: the hint (page 1), a header, the text, an end marker. */
export function formatCut(cut: HideCut): string {
  const end = cut.offset + cut.content.length;
  return (cut.preface ? cut.preface + "\n" : "") +
    `[HIDE id=${cut.hide_id} page=${cut.page}/${cut.total_pages} bytes ${cut.offset}..${end} of ${cut.size}]\n` +
    cut.content.toString("utf8") +
    `\n[END page ${cut.page}/${cut.total_pages}]`;
}

/** A page as a model sees it: the hint, a header with the paths a JSON page holds and its array, the text, an end marker. */
export function formatPage(page: HidePage): string {
  const end = page.offset + page.content.length;
  let header = `[HIDE id=${page.hide_id} page=${page.page}/${page.total_pages} bytes ${page.offset}..${end} of ${page.size}`;
  if (page.json !== null) {
    header += ` · ${page.json.first} … ${page.json.last}`;
    if (page.json.array !== null) header += ` · in ${page.json.array.path} (${page.json.array.length} elements)`;
  }
  return (page.preface ? page.preface + "\n" : "") + header + "]\n" + page.content.toString("utf8") + `\n[END page ${page.page}/${page.total_pages}]`;
}

type At = { page: number } | { path: string } | { offset: number };

/**
 * The per-turn paginator of oversized tool outputs: remembers the latest hide and, per hide,
 * the last page served, so `hide_next` reads on. The pages stay on the daemon's disk. Pages are
 * JSON pages (protocol 3): a JSON hide's pages end between values and each header names the
 * paths it holds; text is paged in bytes. `pages: "bytes"` pages every hide in bytes.
 */
export class HideBuffer {
  private latest: { id: string; size: number } | null = null;
  private cursors = new Map<string, number>();

  /**
   * `first`: what `firstAnswer` shows of an oversized output, its head and tail (its beginning
   * and its end, each half a page, and what lies between: the default, measured by
   * `jqjail-bench --reader`) or page 1.
   */
  constructor(
    readonly client: Client,
    readonly pageSize = 16_384,
    readonly pages: "json" | "bytes" = "json",
    readonly first: "head_and_tail" | "page" = "head_and_tail",
  ) {}

  /**
   * The first answer of a hide (default: the latest) with the hint, as the model reads it: its
   * head and tail (then `next` reads page 1), or page 1 (then page 2). Pages under 128 bytes
   * have no room for two ends: page 1 is shown.
   */
  async firstAnswer(id?: string): Promise<string> {
    const hide = this.pick(id);
    if (this.first === "page" || this.pageSize < MIN_ENDS_PAGE_SIZE) {
      const page = await this.serve(hide, { page: 1 }, true);
      this.latest = { id: page.hide_id, size: page.size };
      return formatPage(page);
    }
    const ends = await this.client.hideEnds(hide, { pageSize: this.pageSize, hint: true });
    this.latest = { id: ends.hide_id, size: ends.size };
    this.cursors.delete(ends.hide_id);
    return formatEnds(ends);
  }

  /** Stores a tool's output and makes it the latest hide. */
  async store(content: string | Uint8Array, source = ""): Promise<HideEntry> {
    const { entry } = await this.client.hidePut(content, { kind: TOOL_OUTPUT_KIND, source });
    this.latest = { id: entry.id, size: entry.size };
    this.cursors.delete(entry.id);
    return entry;
  }

  /**
   * Makes a run's hidden output the latest hide. Its page 1 (a byte page at the daemon's page
   * size) counts as served when it is this buffer's page 1: a byte page of the same size, or the
   * whole hide in one page of that size (`next` goes on to page 2); otherwise `next` serves page
   * 1 as this buffer cuts pages, rather than skip bytes.
   */
  takeOver(hidden: Hidden): void {
    this.latest = { id: hidden.entry.id, size: hidden.entry.size };
    this.cursors.delete(hidden.entry.id);
    if (hidden.first.page_size === this.pageSize && (this.pages === "bytes" || hidden.first.total_pages === 1)) {
      this.cursors.set(hidden.entry.id, 1);
    }
  }

  needsPaging(): boolean {
    return this.latest !== null && this.latest.size > this.pageSize;
  }

  firstCut(): Promise<HidePage> {
    return this.serve(this.pick(), { page: 1 }, true);
  }

  next(id?: string): Promise<HidePage> {
    const hide = this.pick(id);
    return this.serve(hide, { page: (this.cursors.get(hide) ?? 0) + 1 }, false);
  }

  cut(id: string, page: number): Promise<HidePage> {
    return this.serve(id, { page }, false);
  }

  /** The JSON page holding the value at `path` (`$[17].labels` or `.[17].labels`). */
  jump(id: string, path: string): Promise<HidePage> {
    return this.serve(id, { path }, false);
  }

  /** The page holding the first occurrence of `query`, or null. */
  async search(id: string, query: string, ignoreCase = false): Promise<HidePage | null> {
    const found = await this.client.hideSearch(id, query, { ignoreCase, pageSize: this.pageSize, maxMatches: 1 });
    // The search's page numbers are byte pages': the page is found by the match's offset.
    return found.matches.length === 0 ? null : this.serve(id, { offset: found.matches[0].offset }, false);
  }

  /** Answers a model's hide_next, hide_jump or hide_search call with text; failures as "error: CODE: …". */
  async callTool(name: string, args: Record<string, unknown>): Promise<string> {
    const id = typeof args.hide_id === "string" ? args.hide_id : undefined;
    try {
      switch (name) {
        case "hide_next":
          return formatPage(await this.next(id));
        case "hide_jump": {
          const { page, path } = args;
          if (typeof path === "string" && page === undefined) return formatPage(await this.jump(this.pick(id), path));
          if (path !== undefined || typeof page !== "number" || !Number.isInteger(page) || page < 1) {
            return "error: hide_jump needs a positive integer `page` or a string `path`, one of the two";
          }
          return formatPage(await this.cut(this.pick(id), page));
        }
        case "hide_search": {
          if (typeof args.query !== "string") return "error: hide_search needs a string `query`";
          const hide = this.pick(id);
          const cut = await this.search(hide, args.query, args.ignore_case === true);
          if (cut === null) return `Not found: ${JSON.stringify(args.query)} does not occur in hide ${hide}.`;
          return `Found ${JSON.stringify(args.query)} on page ${cut.page}:\n${formatPage(cut)}`;
        }
      }
      return `error: ${name} is not a hide tool`;
    } catch (e) {
      if (e instanceof JqjailError) return `error: ${e.message}`;
      throw e;
    }
  }

  private async serve(id: string, at: At, hint: boolean): Promise<HidePage> {
    const page = await this.client.hidePage(id, at, { pageSize: this.pageSize, hint, pages: this.pages });
    this.cursors.set(page.hide_id, page.page);
    return page;
  }

  private pick(id?: string): string {
    if (id !== undefined) return id;
    if (this.latest === null) throw new JqjailError("NOT_FOUND", "no hide was stored or loaded in this buffer yet");
    return this.latest.id;
  }
}
