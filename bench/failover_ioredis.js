// Drives ioredis's Cluster for BenchmarkClusterFailoverClients
// (failover_clients_test.go): sends FW.INCR on one key every 20 ms and
// prints "ok <sent> <done>" for each reply, the Unix times in
// milliseconds the request was sent and answered at, and "err <sent>
// <done> <message>" for each error, until stdin closes.
// Usage: node bench/failover_ioredis.js <port,port,...> <key> '<ioredis cluster options as JSON>'
const path = require("path");
const Redis = require(path.join(__dirname, "..", "tests", "clients", "node", "node_modules", "ioredis"));

const ports = process.argv[2].split(",").map(Number);
const key = process.argv[3];
const options = JSON.parse(process.argv[4] || "{}");
const c = new Redis.Cluster(ports.map((port) => ({ host: "127.0.0.1", port })), options);
c.on("error", () => {}); // reported per request below
let done = false;
process.stdin.on("end", () => { done = true; });
process.stdin.resume();

const timeout = (ms) => new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), ms));

(async () => {
  while (!done) {
    const sent = Date.now();
    try {
      await Promise.race([c.call("FW.INCR", key, "1000000", "60"), timeout(1000)]);
      console.log(`ok ${sent} ${Date.now()}`);
    } catch (e) {
      console.log(`err ${sent} ${Date.now()} ${String(e.message).split("\n")[0]}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  c.disconnect();
  process.exit(0);
})();
