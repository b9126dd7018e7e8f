// node --test: a job's output events as the job detail shows them (ctest dashboard_output_events).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callText, outputEventsOf } from './output-events.js';

const lines = (...events) => events.map((e) => JSON.stringify(e) + '\n').join('');

test('choices in order, each with its answer, reasoning, tool calls and finish', () => {
  const text = lines(
    { reasoning: 'The user wants ' },
    { i: 1, content: 'Goo' },
    { reasoning: 'the weather.' },
    { logprobs: [{ token: 'x', bytes: [120], logprob: -0.5 }] },
    { content: 'Let me look.' },
    { tool_call: { id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo"}' } },
    { i: 1, content: 'd day' },
    { finish: 'tool_calls' },
    { i: 1, finish: 'length' },
  );
  const { choices, error } = outputEventsOf(text);
  assert.equal(error, null);
  assert.equal(choices.length, 2);
  assert.deepEqual(choices[0], {
    i: 0,
    content: 'Let me look.',
    reasoning: 'The user wants the weather.',
    calls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city": "Oslo"}' }],
    finish: 'tool_calls',
    tokens: 1,
  });
  assert.equal(choices[1].content, 'Good day');
  assert.equal(choices[1].finish, 'length');
  assert.equal(callText(choices[0].calls[0]), 'get_weather({"city": "Oslo"})');
});

test('a page cut inside a line leaves that line out', () => {
  const whole = lines({ content: 'Hel' }, { content: 'lo' });
  const { choices, error } = outputEventsOf(whole.slice(0, whole.length - 4));
  assert.equal(error, null);
  assert.equal(choices[0].content, 'Hel');
  assert.deepEqual(outputEventsOf(''), { choices: [], error: null });
});

test('a line that is not an event stops the reading and says which', () => {
  const { choices, error } = outputEventsOf(lines({ content: 'ok' }) + 'plain text\n' + lines({ content: 'lost' }));
  assert.equal(choices[0].content, 'ok');
  assert.match(error, /^line 2 is not an output event: plain text/);
  assert.match(outputEventsOf('{"unknown": 1}\n').error, /line 1/);
  assert.match(outputEventsOf('[1]\n').error, /line 1/);
});
