import { Client } from "./client.js";
import { Hidden, HideCut, HideEntry, JqjailError } from "./wire.js";

export const TOOL_OUTPUT_KIND = "tool_output";

/** A page as a model sees it: the hint (page 1), a header, the text, an end marker. */
export function formatCut(cut: HideCut): string {
  const end = cut.offset + cut.content.length;
  return (cut.preface ? cut.preface + "\n" : "") +
    `[HIDE id=${cut.hide_id} page=${cut.page}/${cut.total_pages} bytes ${cut.offset}..${end} of ${cut.size}]\n` +
    cut.content.toString("utf8") +
    `\n[END page ${cut.page}/${cut.total_pages}]`;
}

/**
 * The per-turn paginator of oversized tool outputs: remembers the latest hide and, per hide,
 * the last page served, so `hide_next` reads on. The pages stay on the daemon's disk.
 */
export class HideBuffer {
  private latest: { id: string; size: number } | null = null;
  private cursors = new Map<string, number>();

  constructor(readonly client: Client, readonly pageSize = 16_384) {}

  /** Stores a tool's output and makes it the latest hide. */
  async store(content: string | Uint8Array, source = ""): Promise<HideEntry> {
    const { entry } = await this.client.hidePut(content, { kind: TOOL_OUTPUT_KIND, source });
    this.latest = { id: entry.id, size: entry.size };
    this.cursors.delete(entry.id);
    return entry;
  }

  /**
   * Makes a run's hidden output the latest hide. Its page 1 counts as served when it was cut at
   * this buffer's page size (`next` goes on to page 2); cut at another size, `next` serves page
   * 1 again at this buffer's size, rather than skip or repeat bytes.
   */
  takeOver(hidden: Hidden): void {
    this.latest = { id: hidden.entry.id, size: hidden.entry.size };
    this.cursors.delete(hidden.entry.id);
    if (hidden.first.page_size === this.pageSize) this.cursors.set(hidden.entry.id, hidden.first.page);
  }

  needsPaging(): boolean {
    return this.latest !== null && this.latest.size > this.pageSize;
  }

  firstCut(): Promise<HideCut> {
    return this.serve(this.pick(), 1, true);
  }

  next(id?: string): Promise<HideCut> {
    const hide = this.pick(id);
    return this.serve(hide, (this.cursors.get(hide) ?? 0) + 1, false);
  }

  cut(id: string, page: number): Promise<HideCut> {
    return this.serve(id, page, false);
  }

  /** The page holding the first occurrence of `query`, or null. */
  async search(id: string, query: string, ignoreCase = false): Promise<HideCut | null> {
    const found = await this.client.hideSearch(id, query, { ignoreCase, pageSize: this.pageSize, maxMatches: 1 });
    return found.matches.length === 0 ? null : this.serve(id, found.matches[0].page, false);
  }

  /** Answers a model's hide_next, hide_jump or hide_search call with text; failures as "error: CODE: …". */
  async callTool(name: string, args: Record<string, unknown>): Promise<string> {
    const id = typeof args.hide_id === "string" ? args.hide_id : undefined;
    try {
      switch (name) {
        case "hide_next":
          return formatCut(await this.next(id));
        case "hide_jump": {
          const page = args.page;
          if (typeof page !== "number" || !Number.isInteger(page) || page < 1) return "error: hide_jump needs a positive integer `page`";
          return formatCut(await this.cut(this.pick(id), page));
        }
        case "hide_search": {
          if (typeof args.query !== "string") return "error: hide_search needs a string `query`";
          const hide = this.pick(id);
          const cut = await this.search(hide, args.query, args.ignore_case === true);
          if (cut === null) return `Not found: ${JSON.stringify(args.query)} does not occur in hide ${hide}.`;
          return `Found ${JSON.stringify(args.query)} on page ${cut.page}:\n${formatCut(cut)}`;
        }
      }
      return `error: ${name} is not a hide tool`;
    } catch (e) {
      if (e instanceof JqjailError) return `error: ${e.message}`;
      throw e;
    }
  }

  private async serve(id: string, page: number, hint: boolean): Promise<HideCut> {
    const cut = await this.client.hideCut(id, page, { pageSize: this.pageSize, hint });
    this.cursors.set(cut.hide_id, cut.page);
    return cut;
  }

  private pick(id?: string): string {
    if (id !== undefined) return id;
    if (this.latest === null) throw new JqjailError("NOT_FOUND", "no hide was stored or loaded in this buffer yet");
    return this.latest.id;
  }
}
