import { readFileSync } from "node:fs";

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/**
 * jqjail's tools for a model (jq, json_path, json_shape, hide_next, hide_jump, hide_search),
 * from the same list as `jqjail tools`: `neutral`, `openai` or `anthropic` form.
 */
export function toolDefinitions(format: "neutral" | "openai" | "anthropic" = "neutral"): unknown[] {
  const tools: ToolDefinition[] = JSON.parse(readFileSync(new URL("../../tools.json", import.meta.url), "utf8"));
  switch (format) {
    case "neutral":
      return tools;
    case "openai":
      return tools.map((t) => ({ type: "function", function: t }));
    case "anthropic":
      return tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters }));
  }
}
