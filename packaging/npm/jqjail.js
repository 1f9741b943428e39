#!/usr/bin/env node
// `jqjail …` (and `npx jqjail …`, `npx jqjail mcp …`): runs the `jqjail` program of this
// platform's package (jqjail-linux-x64, installed beside this one as an optional dependency,
// the esbuild pattern) with the same arguments, standard streams and exit status. The
// program is looked for only where npm installs it beside this package, never in a parent
// directory's node_modules, and run only if no other user could have written it.
import { spawnSync } from "node:child_process";
import { PLATFORM_PACKAGE, platformExecutable } from "../dist/src/private.js";

const { path: exe, looked } = platformExecutable("jqjail");
if (!exe) {
  process.stderr.write(
    `jqjail: UNAVAILABLE: the package ${PLATFORM_PACKAGE} is not installed beside jqjail (looked at ${looked.join(", ")}), ` +
      "or another user may write to it: jqjail's programs are built for linux-x64 (install with optional dependencies, " +
      "or use the wheel or the .deb)\n",
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
