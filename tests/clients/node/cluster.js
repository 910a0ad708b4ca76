// Runs the four limiter commands through ioredis's Cluster and
// node-redis's createCluster against the cluster node on 127.0.0.1:<port>
// and prints each client's replies as one JSON line.
const Redis = require("ioredis");
const { createCluster } = require("redis");

const port = Number(process.argv[2]);
const commands = [
  ["CL.THROTTLE", "{js}:gcra", "15", "30", "60"],
  ["TB.TAKE", "{js}:tb", "5", "1", "10"],
  ["SW.HIT", "{js}:sw", "3", "60"],
  ["FW.INCR", "{js}:fw", "2", "60"],
];

async function viaIoredis(prefix) {
  const c = new Redis.Cluster([{ host: "127.0.0.1", port }]);
  const out = [];
  for (const [name, key, ...rest] of commands) {
    out.push(await c.call(name, prefix + key, ...rest));
  }
  await c.quit();
  return out;
}

async function viaNodeRedis(prefix) {
  const c = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }] });
  await c.connect();
  const out = [];
  for (const [name, key, ...rest] of commands) {
    out.push(await c.sendCommand(prefix + key, false, [name, prefix + key, ...rest]));
  }
  await c.quit();
  return out;
}

(async () => {
  const result = { ioredis: await viaIoredis("io"), noderedis: await viaNodeRedis("nr") };
  console.log(JSON.stringify(result));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
