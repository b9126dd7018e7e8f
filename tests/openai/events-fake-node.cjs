'use strict';
// The official OpenAI client against hearth-gateway and a fake node that answers with fixed
// output events (tests/gateway_events_test.cpp starts them and runs this file with node --test;
// not a *.test.* file: gateway_openai_test.cpp's cluster has no such node). The fake node answers
// a job with tools by reasoning "Two lookups.", text "Let me look." and two calls (get_weather
// {"city":"Oslo","days":3} as call_w, get_time {"zone":"UTC"} as call_t), finish tool_calls; a
// job with n = 2 by "Hello" and "Good day" (the second finished "length"); a job with logprobs by
// "Hi!" with tokens "Hi" (-0.25; alternative "Yo" -1.5) and "!" (-0.5; "?" -1.0); anything else by
// "plain text". Its output reaches the gateway cut every 5 bytes, a token each (max_tokens is
// set high enough for the broker to take them all).
const test = require('node:test');
const assert = require('node:assert/strict');
const { OpenAI } = require('openai');

const gateway = process.env.HEARTH_GATEWAY_URL;
const model = process.env.HEARTH_MODEL;
if (!gateway || !model) throw new Error('HEARTH_GATEWAY_URL and HEARTH_MODEL are set by tests/gateway_events_test.cpp');
// A placeholder key, as users configure clients for a keyless (loopback) gateway.
const client = new OpenAI({ baseURL: `${gateway}/v1`, apiKey: 'sk-no-key-required', maxRetries: 0 });

// The fake node's model has no template of its own: hearth's chatml is named.
const chat = (extra) =>
  ({ model, chat_template: 'chatml', messages: [{ role: 'user', content: 'Weather?' }], max_tokens: 400, ...extra });

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } } },
    },
  },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
];
const expectedCalls = [
  { id: 'call_w', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo","days":3}' } },
  { id: 'call_t', type: 'function', function: { name: 'get_time', arguments: '{"zone":"UTC"}' } },
];

test('a whole answer carries the calls, the text beside them and no unasked reasoning', async () => {
  const r = await client.chat.completions.create(chat({ tools, tool_choice: 'required' }));
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.equal(c.message.content, 'Let me look.');
  assert.deepEqual(c.message.tool_calls, expectedCalls);
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.reasoning_content, undefined);
  const asked = await client.chat.completions.create(chat({ tools, include_reasoning: true }));
  assert.equal(asked.choices[0].message.reasoning_content, 'Two lookups.');
});

test("the client's stream helper assembles the streamed calls", async () => {
  const final = await client.chat.completions.stream(chat({ tools })).finalChatCompletion();
  const c = final.choices[0];
  assert.equal(c.message.content, 'Let me look.');
  assert.deepEqual(
    c.message.tool_calls.map(({ id, type, function: f }) => ({ id, type, function: { name: f.name, arguments: f.arguments } })),
    expectedCalls,
  );
  assert.equal(c.finish_reason, 'tool_calls');
});

test('streamed calls come as OpenAI sends them: index, id, type and name first', async () => {
  const deltas = [];
  let reasoning = '';
  const finishes = [];
  for await (const chunk of await client.chat.completions.create(chat({ tools, stream: true, include_reasoning: true }))) {
    for (const c of chunk.choices) {
      deltas.push(...(c.delta.tool_calls || []));
      reasoning += c.delta.reasoning_content || '';
      if (c.finish_reason) finishes.push(c.finish_reason);
    }
  }
  assert.deepEqual(deltas.map((d) => [d.index, d.id, d.type, d.function.name]), [
    [0, 'call_w', 'function', 'get_weather'],
    [1, 'call_t', 'function', 'get_time'],
  ]);
  assert.equal(reasoning, 'Two lookups.');
  assert.deepEqual(finishes, ['tool_calls']);
});

test('the call and its result sent back are a conversation the gateway takes', async () => {
  const first = await client.chat.completions.create(chat({ tools }));
  const r = await client.chat.completions.create(
    chat({
      tools,
      messages: [
        { role: 'user', content: 'Weather?' },
        first.choices[0].message,
        { role: 'tool', tool_call_id: 'call_w', content: '{"temperature": 12}' },
        { role: 'tool', tool_call_id: 'call_t', content: '12:00' },
      ],
    }),
  );
  assert.equal(r.choices.length, 1);
});

test('n = 2: two choices by index, whole and streamed', async () => {
  const r = await client.chat.completions.create(chat({ n: 2 }));
  assert.deepEqual(r.choices.map((c) => [c.index, c.message.content, c.finish_reason]), [
    [0, 'Hello', 'stop'],
    [1, 'Good day', 'length'],
  ]);
  const text = ['', ''];
  const roles = [0, 0];
  const finishes = [[], []];
  for await (const chunk of await client.chat.completions.create(chat({ n: 2, stream: true }))) {
    for (const c of chunk.choices) {
      text[c.index] += c.delta.content || '';
      if (c.delta.role) roles[c.index] += 1;
      if (c.finish_reason) finishes[c.index].push(c.finish_reason);
    }
  }
  assert.deepEqual(text, ['Hello', 'Good day']);
  assert.deepEqual(roles, [1, 1]);
  assert.deepEqual(finishes, [['stop'], ['length']]);
  const final = await client.chat.completions.stream(chat({ n: 2 })).finalChatCompletion();
  assert.deepEqual(final.choices.map((c) => c.message.content), ['Hello', 'Good day']);
});

test('chat logprobs, whole and streamed', async () => {
  const expected = [
    { token: 'Hi', logprob: -0.25, bytes: [72, 105], top_logprobs: [
      { token: 'Hi', logprob: -0.25, bytes: [72, 105] }, { token: 'Yo', logprob: -1.5, bytes: [89, 111] }] },
    { token: '!', logprob: -0.5, bytes: [33], top_logprobs: [
      { token: '!', logprob: -0.5, bytes: [33] }, { token: '?', logprob: -1, bytes: [63] }] },
  ];
  const r = await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 2 }));
  assert.equal(r.choices[0].message.content, 'Hi!');
  assert.deepEqual(r.choices[0].logprobs.content, expected);
  let streamed = [];
  for await (const chunk of await client.chat.completions.create(chat({ logprobs: true, top_logprobs: 2, stream: true }))) {
    for (const c of chunk.choices) streamed = streamed.concat(c.logprobs?.content || []);
  }
  assert.deepEqual(streamed, expected);
});

test('completions logprobs in the legacy shape', async () => {
  const r = await client.completions.create({ model, prompt: 'Say hi', logprobs: 1, max_tokens: 400 });
  assert.equal(r.choices[0].text, 'Hi!');
  assert.deepEqual(r.choices[0].logprobs, {
    tokens: ['Hi', '!'],
    token_logprobs: [-0.25, -0.5],
    top_logprobs: [{ Hi: -0.25, Yo: -1.5 }, { '!': -0.5, '?': -1 }],
    text_offset: [0, 2],
  });
});

test('a plain job is plain text, read through the same path', async () => {
  const r = await client.chat.completions.create(chat({}));
  assert.equal(r.choices[0].message.content, 'plain text');
  assert.equal(r.choices[0].logprobs, null);
  let text = '';
  for await (const chunk of await client.chat.completions.create(chat({ stream: true }))) {
    for (const c of chunk.choices) text += c.delta.content || '';
  }
  assert.equal(text, 'plain text');
});
