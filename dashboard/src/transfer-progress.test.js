// node --test: what the transfers panel says of a transfer's progress (ctest dashboard_transfers).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { progressOf, transferOver } from './transfer-progress.js';

const now = 1_700_000_000_000;

test('a running copy: how much of how much, and its rate', () => {
  const t = { state: 'running', bytes_done: 1536, bytes_total: 4096, started_ms: now - 3000 };
  const p = progressOf(t, now);
  assert.equal(p.text, '1.5 KiB of 4.0 KiB · 512 B/s');
  assert.equal(p.percent, 37.5);
  assert.equal(transferOver(t), false);
});

test('a pull that has not resolved its source has no size yet; a finished one no rate', () => {
  assert.deepEqual(progressOf({ state: 'starting', bytes_done: 0, bytes_total: 0, started_ms: now }, now), {
    text: '0 B',
    percent: null,
  });
  const done = { state: 'done', bytes_done: 4096, bytes_total: 4096, started_ms: now - 1000 };
  assert.equal(progressOf(done, now).text, '4.0 KiB of 4.0 KiB');
  assert.equal(transferOver(done), true);
});
