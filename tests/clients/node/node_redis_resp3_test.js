'use strict';
// node-redis 5 speaking RESP3 (HELLO 3, as it does when asked with
// RESP: 3) runs the shared scenario; the replies are the same integers,
// and CLIENT INFO shows the connection on protocol 3.
const assert = require('node:assert/strict');
const { createClient } = require('redis5');
const { T0, expected } = require('./scenario');

async function main() {
  const port = Number(process.env.CELLSERVER_PORT);
  const c = createClient({ RESP: 3, socket: { host: '127.0.0.1', port, reconnectStrategy: false } });
  c.on('error', (e) => { console.error(e); process.exit(1); });
  await c.connect();
  try {
    const info = await c.sendCommand(['CLIENT', 'INFO']);
    assert.match(String(info), / resp=3 /);
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
    console.log('node-redis resp3 ok');
  } finally {
    await c.quit();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
