// The local SQS of jobstream (dev, demo, tests): fauxqs's SQS API on a
// loopback port. Usage: node server.mjs [PORT] [PARENT_PID]
// PORT 0 (the default) picks a free port. Prints one line,
// `listening http://127.0.0.1:PORT`, once it accepts requests. Exits when
// PARENT_PID is gone, so a test binary or a killed CLI never leaves one
// behind.
import { buildApp } from "fauxqs";

const port = Number(process.argv[2] ?? 0);
const parent = Number(process.argv[3] ?? 0);

const app = buildApp({ logger: false });
const address = await app.listen({ port, host: "127.0.0.1" });
console.log(`listening ${address}`);

const stop = async () => {
  await app.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
if (parent > 0) {
  setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch {
      process.exit(0);
    }
  }, 1000).unref();
}
