'use strict';
// node-redis runs the shared scenario: node-redis 4 with its defaults
// (RESP2), or, with NODE_REDIS=redis5, node-redis 5 asked for RESP3 (it
// sends HELLO 3), which must then show as resp=3 in CLIENT INFO. The
// replies are the same integers either way.
const assert = require('node:assert/strict');
const resp3 = process.env.NODE_REDIS === 'redis5';
const { createClient } = require(resp3 ? 'redis5' : 'redis');
const { T0, expected } = require('./scenario');

async function main() {
  const port = Number(process.env.CELLSERVER_PORT);
  const options = { socket: { host: '127.0.0.1', port, reconnectStrategy: false } };
  if (resp3) {
    options.RESP = 3;
  }
  const c = createClient(options);
  c.on('error', (e) => { console.error(e); process.exit(1); });
  await c.connect();
  try {
    if (resp3) {
      assert.match(String(await c.sendCommand(['CLIENT', 'INFO'])), / resp=3 /);
    }
    assert.equal(await c.sendCommand(['DEBUG', 'CLOCK', 'SET', T0]), expected.clock);
    assert.deepEqual(await c.sendCommand(['CL.THROTTLE', 'user', '15', '30', '60']), expected.throttle);
    assert.deepEqual(await c.sendCommand(['TB.TAKE', 'tb', '10', '1', '1']), expected.tb);
    assert.deepEqual(await c.sendCommand(['SW.HIT', 'sw', '10', '60']), expected.sw);
    assert.deepEqual(await c.sendCommand(['FW.INCR', 'fw', '10', '60']), expected.fw);
    // Commands sent without awaiting each go out as one pipeline.
    const pipe = await Promise.all([
      c.sendCommand(['CL.THROTTLE', 'p', '0', '1', '60']),
      c.sendCommand(['CL.THROTTLE', 'p', '0', '1', '60']),
    ]);
    assert.deepEqual(pipe, expected.pipeline);
    const multi = await c.multi()
      .addCommand(['FW.INCR', 'm', '2', '60'])
      .addCommand(['FW.INCR', 'm', '2', '60'])
      .addCommand(['FW.INCR', 'm', '2', '60'])
      .exec();
    assert.deepEqual(multi, expected.multi);
    console.log(resp3 ? 'node-redis resp3 ok' : 'node-redis ok');
  } finally {
    await c.quit();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
