// node --test: the Prometheus text parser and the counter rate (ctest dashboard_metrics).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { counterRate, parseMetrics, sumOf } from './metrics.js';

const text = `# HELP hearth_tokens_generated_total Tokens generated.
# TYPE hearth_tokens_generated_total counter
hearth_tokens_generated_total{model="stories260K",node="alpha"} 10
hearth_tokens_generated_total{model="a \\"quoted\\", {odd} name",node="beta"} 5 1700000000000
hearth_queue_depth{model="stories260K",priority="0"} 3
hearth_queue_depth{model="slow",priority="-10"} 1e1
hearth_jobs_running{model="x"} NaN
not a sample line
cut{model="x" 3
`;

test('samples with labels, escapes, timestamps and exponents', () => {
  const s = parseMetrics(text);
  assert.equal(s.length, 5);
  assert.deepEqual(s[1].labels, { model: 'a "quoted", {odd} name', node: 'beta' });
  assert.equal(s[1].value, 5);
  assert.equal(s[3].value, 10);
  assert.ok(Number.isNaN(s[4].value));
});

test('sums skip NaN; a missing metric is null', () => {
  const s = parseMetrics(text);
  assert.equal(sumOf(s, 'hearth_tokens_generated_total'), 15);
  assert.equal(sumOf(s, 'hearth_queue_depth'), 13);
  assert.equal(sumOf(s, 'hearth_jobs_running'), null);
  assert.equal(sumOf(parseMetrics(''), 'hearth_queue_depth'), null);
});

test('a counter rate, and a reset counts from zero', () => {
  assert.equal(counterRate(10, 30, 2), 10);
  assert.equal(counterRate(30, 5, 1), 5);
  assert.equal(counterRate(null, 5, 1), null);
  assert.equal(counterRate(1, 5, 0), null);
});
