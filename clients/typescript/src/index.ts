export * from "./wire.js";
export * from "./client.js";
export * from "./hide.js";
export * from "./tools.js";
export * from "./json-tool.js";
// The Cordis plugin: a DSH-style host loads this module by package name and calls `apply`.
export { apply, inject, name } from "./plugin.js";
export type { ToolHost } from "./plugin.js";
