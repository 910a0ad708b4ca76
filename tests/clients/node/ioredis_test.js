// ioredis with its defaults (RESP2) runs the shared scenario.
'use strict';
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { T0, expected } = require('./scenario');

async function main() {
  const port = Number(process.env.CELLSERVER_PORT);
  const r = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0 });
  try {
    assert.equal(await r.call('DEBUG', 'CLOCK', 'SET', T0), expected.clock);
    assert.deepEqual(await r.call('CL.THROTTLE', 'user', '15', '30', '60'), expected.throttle);
    assert.deepEqual(await r.call('TB.TAKE', 'tb', '10', '1', '1'), expected.tb);
    assert.deepEqual(await r.call('SW.HIT', 'sw', '10', '60'), expected.sw);
    assert.deepEqual(await r.call('FW.INCR', 'fw', '10', '60'), expected.fw);
    const pipe = await r.pipeline()
      .call('CL.THROTTLE', 'p', '0', '1', '60')
      .call('CL.THROTTLE', 'p', '0', '1', '60')
      .exec();
    assert.deepEqual(pipe, expected.pipeline.map((v) => [null, v]));
    const multi = await r.multi()
      .call('FW.INCR', 'm', '2', '60')
      .call('FW.INCR', 'm', '2', '60')
      .call('FW.INCR', 'm', '2', '60')
      .exec();
    assert.deepEqual(multi, expected.multi.map((v) => [null, v]));
    console.log('ioredis ok');
  } finally {
    r.disconnect();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
