// One small run (.a over {"a":1}) through the TypeScript client on one connection, timed: the
// TypeScript line of bench/clients/run.sh. Usage: node latency.mjs SOCKET [N]
import { Client } from "../../clients/typescript/dist/src/index.js";

const [socket, count] = process.argv.slice(2);
const n = Number(count ?? 2000);
const c = await Client.connect(socket);
for (let i = 0; i < 200; i++) await c.run(".a", '{"a":1}');
const us = [];
for (let i = 0; i < n; i++) {
  const start = process.hrtime.bigint();
  const r = await c.run(".a", '{"a":1}');
  if (r.output !== "1") throw new Error(r.output);
  us.push(Number(process.hrtime.bigint() - start) / 1e3);
}
c.close();
us.sort((a, b) => a - b);
console.log(JSON.stringify({ client: "typescript", n, p50_us: Math.round(us[n >> 1]), p90_us: Math.round(us[Math.floor(n * 0.9)]) }));
