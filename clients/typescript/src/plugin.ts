// The Cordis plugin a DSH-style host loads by package name, as it loads dsh-tool-json:
// `name`, `inject` and `apply(ctx)` on the package's main module, `cordis.patch.yml` (the
// profile's `- insert:` entry) and `package.json`'s `dsh.bundle`. `apply` registers the `json`
// tool with the host's `tools` service and closes its daemon connection when the plugin is
// disposed. Nothing here imports cordis: the host brings it.
import { jsonTool } from "./json-tool.js";

/** The plugin's name (the seed's id is `tool-json`). */
export const name = "jqjail-tool-json";

/** The host services `apply` needs. */
export const inject = ["tools"];

/** What `apply` uses of the host's context: its `tools` service, and disposal. */
export interface ToolHost {
  tools: { register(tool: ReturnType<typeof jsonTool>): unknown };
  on?(event: "dispose", listener: () => void): unknown;
}

/** Registers the `json` tool with the host's `tools` service. */
export function apply(ctx: ToolHost, config: { socket?: string } | undefined = undefined): void {
  const tool = jsonTool({ socket: config?.socket });
  ctx.tools.register(tool);
  ctx.on?.("dispose", () => tool.close());
}
