// The scenario every real client runs against cellserver (see
// tests/integration/clients_test.go): the four limiter commands, a
// pipeline and a MULTI, each reply asserted exactly. The server's clock is
// frozen with DEBUG CLOCK SET, so the replies are known in advance.
'use strict';

const T0 = '1700000040000000000';

// expected maps each step to its exact reply.
const expected = {
  clock: 'OK',
  throttle: [0, 16, 15, -1, 2],
  tb: [0, 10, 9, -1, 1],
  sw: [0, 10, 9, -1, 120],
  fw: [0, 10, 9, -1, 60],
  pipeline: [[0, 1, 0, -1, 60], [1, 1, 0, 60, 60]],
  multi: [[0, 2, 1, -1, 60], [0, 2, 0, -1, 60], [1, 2, 0, 60, 60]],
};

module.exports = { T0, expected };
