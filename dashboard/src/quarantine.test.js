// node --test: what the nodes panel says of a quarantined node (ctest dashboard_quarantine).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { quarantineOf } from './quarantine.js';

const now = 1_700_000_000_000;
const node = {
  name: 'flaky',
  quarantined_until_ms: now + 42_000,
  losses: [
    { time_ms: now - 3_000, job_id: 7, attempt: 1, reason: 'node flaky failed it: out of memory' },
    { time_ms: now - 1_000, job_id: 9, attempt: 2, reason: 'node flaky stopped responding' },
  ],
};

test('a quarantined node: until when, how long, its last losses newest first', () => {
  const q = quarantineOf(node, now);
  assert.ok(q);
  assert.equal(q.left, '42.0 s');
  assert.match(q.until, /^\d\d:\d\d:\d\d\.\d{3}$/);
  assert.deepEqual(
    q.losses.map((l) => l.text),
    ['job 9 attempt 2: node flaky stopped responding', 'job 7 attempt 1: node flaky failed it: out of memory'],
  );
});

test('a node whose quarantine is over, or never was, has none', () => {
  assert.equal(quarantineOf(node, now + 42_000), null);
  assert.equal(quarantineOf({ name: 'fine', quarantined_until_ms: 0 }, now), null);
  assert.equal(quarantineOf({ name: 'old broker' }, now), null);
});

test('a broker that sends no losses: the end time alone', () => {
  const q = quarantineOf({ quarantined_until_ms: now + 500 }, now);
  assert.deepEqual(q.losses, []);
  assert.equal(q.left, '500 ms');
});
