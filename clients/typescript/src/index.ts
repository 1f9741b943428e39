export * from "./wire.js";
export * from "./client.js";
export * from "./hide.js";
export * from "./tools.js";
export * from "./json-tool.js";
