#!/usr/bin/env node
// `jqjail …` (and `npx jqjail …`, `npx jqjail mcp …`): runs the `jqjail` program of this
// platform's package (jqjail-linux-x64, installed beside this one as an optional dependency,
// the esbuild pattern) with the same arguments, standard streams and exit status.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const platformPackage = `jqjail-${process.platform}-${process.arch}`;
let exe;
try {
  exe = join(dirname(createRequire(import.meta.url).resolve(`${platformPackage}/package.json`)), "bin", "jqjail");
} catch {
  process.stderr.write(
    `jqjail: UNAVAILABLE: the package ${platformPackage} is not installed: jqjail's programs are built for linux-x64 only ` +
      "(install with optional dependencies, or use the wheel or the .deb)\n",
  );
  process.exit(8);
}
const run = spawnSync(exe, process.argv.slice(2), { stdio: "inherit" });
if (run.error) {
  process.stderr.write(`jqjail: UNAVAILABLE: cannot run ${exe}: ${run.error.message}\n`);
  process.exit(8);
}
if (run.signal) process.kill(process.pid, run.signal);
process.exit(run.status ?? 1);
