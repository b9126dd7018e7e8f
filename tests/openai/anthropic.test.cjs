'use strict';
// Anthropic's Messages API (POST /v1/messages) with the official `@anthropic-ai/sdk` against
// hearth-gateway, set up as its users set it up (baseURL the gateway, the key as x-api-key or as
// a Bearer token): a greedy message equals /v1/chat/completions' for the same conversation,
// whole and streamed (the SDK's MessageStream assembles Anthropic's events; curl sees their
// `event:` lines), with exact usage; errors are Anthropic's shape and status; on a random-weight
// qwen3 with Qwen2.5's tool-calling template a named tool_choice gives a tool_use whose input
// validates, tool_choice any streamed gives one, and a tool_result sent back gets an answer.
// tests/gateway_openai_test.cpp starts the cluster and sets the environment.
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const Anthropic = require('@anthropic-ai/sdk');
const { gateway, apiKey, chatModel, toolsModel, openaiClient, hearthJobOf } = require('./cluster-env.cjs');
const { validate, weatherParameters, timeParameters } = require('./json-schema-check.cjs');

const anthropic = new Anthropic({ baseURL: gateway, apiKey, maxRetries: 0, timeout: 120_000 });
const openai = openaiClient();
const question = 'Tell me a story about a cat.';

const tools = [
  { name: 'get_weather', description: 'The weather forecast for a city', input_schema: weatherParameters },
  { name: 'get_time', description: 'The time in a time zone', input_schema: timeParameters },
];
const askWeather = [{ role: 'user', content: 'What is the weather in Oslo for the next 3 days?' }];

const jobOf = (messageId) => hearthJobOf(messageId, 'msg_');

// The weather question with get_weather named as the tool to call.
const askWeatherNamed = () =>
  anthropic.messages.create({
    model: toolsModel,
    messages: askWeather,
    tools,
    tool_choice: { type: 'tool', name: 'get_weather' },
    max_tokens: 200,
  });

// A tool_use block is one of the tools, with an input object that validates.
function assertValidUse(block, name) {
  assert.equal(block.type, 'tool_use');
  assert.ok(typeof block.id === 'string' && block.id.length > 0, JSON.stringify(block));
  const tool = tools.find((t) => t.name === block.name);
  assert.ok(tool, `the call names ${block.name}, not one of the tools`);
  if (name) assert.equal(block.name, name);
  assert.equal(typeof block.input, 'object');
  assert.deepEqual(validate(tool.input_schema, block.input), [], JSON.stringify(block.input));
}

test('a greedy message equals the chat completion of the same conversation', async () => {
  const chat = await openai.chat.completions.create({
    model: chatModel,
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: question },
    ],
    max_tokens: 24,
    temperature: 0,
  });
  const m = await anthropic.messages.create({
    model: chatModel,
    system: 'You tell stories.',
    messages: [{ role: 'user', content: question }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_\d+$/);
  assert.equal(m.model, chatModel);
  assert.deepEqual(
    m.content.map((b) => b.type),
    ['text'],
  );
  assert.equal(m.content[0].text, chat.choices[0].message.content);
  assert.equal(m.stop_reason, chat.choices[0].finish_reason === 'length' ? 'max_tokens' : 'end_turn');
  assert.equal(m.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(m.usage.output_tokens, chat.usage.completion_tokens);
  const job = jobOf(m.id);
  assert.equal(job.summary.state, 'completed');
  assert.deepEqual(
    job.messages.map((x) => [x.role, x.content]),
    [
      ['system', 'You tell stories.'],
      ['user', question],
    ],
  );

  // System and content as text blocks, and the key as a Bearer token, are the same request.
  const bearer = new Anthropic({ baseURL: gateway, apiKey: null, authToken: apiKey, maxRetries: 0 });
  const blocks = await bearer.messages.create({
    model: chatModel,
    system: [{ type: 'text', text: 'You tell stories.' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: question }] }],
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(blocks.content[0].text, m.content[0].text);
});

test("a streamed message is Anthropic's events, as the SDK and curl read them", async () => {
  const body = { model: chatModel, messages: [{ role: 'user', content: question }], max_tokens: 24, temperature: 0 };
  const whole = await anthropic.messages.create(body);
  const events = [];
  for await (const e of await anthropic.messages.create({ ...body, stream: true })) events.push(e);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'message_start');
  assert.deepEqual(types.slice(-2), ['message_delta', 'message_stop']);
  const text = events
    .filter((e) => e.type === 'content_block_delta')
    .map((e) => e.delta.text)
    .join('');
  assert.equal(text, whole.content[0].text);
  const delta = events.at(-2);
  assert.equal(delta.delta.stop_reason, whole.stop_reason);
  assert.equal(delta.usage.output_tokens, whole.usage.output_tokens);

  const stream = anthropic.messages.stream(body);
  let streamed = '';
  stream.on('text', (t) => (streamed += t));
  const final = await stream.finalMessage();
  assert.equal(streamed, whole.content[0].text);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);

  // The bytes: each event has its type line, with the key as x-api-key and anthropic-version.
  const raw = execFileSync(
    'curl',
    ['-sS', '-N', '--max-time', '60', '-H', `x-api-key: ${apiKey}`, '-H', 'anthropic-version: 2023-06-01',
      '-H', 'content-type: application/json', '-d', JSON.stringify({ ...body, stream: true }), `${gateway}/v1/messages`],
    { encoding: 'utf8' },
  );
  const frames = raw.split('\n\n').filter((f) => f.startsWith('event: '));
  assert.ok(frames.length >= 5, raw);
  for (const f of frames) {
    const [eventLine, dataLine] = f.split('\n');
    const type = eventLine.slice('event: '.length);
    assert.ok(dataLine.startsWith('data: '), f);
    assert.equal(JSON.parse(dataLine.slice(6)).type, type);
  }
  assert.ok(raw.startsWith('event: message_start\n'), raw.slice(0, 80));
});

test("errors come in Anthropic's shape with their status", async () => {
  const bad = async (body, status, type) => {
    await assert.rejects(anthropic.messages.create(body), (e) => {
      assert.equal(e.status, status, e.message);
      assert.equal(e.error?.type, 'error', JSON.stringify(e.error));
      assert.equal(e.error?.error?.type, type, JSON.stringify(e.error));
      return true;
    });
  };
  const messages = [{ role: 'user', content: 'Hi' }];
  await bad({ model: 'no-such-model', messages, max_tokens: 4 }, 404, 'not_found_error');
  await bad({ model: chatModel, messages: [], max_tokens: 4 }, 400, 'invalid_request_error');
  await bad({ model: chatModel, messages, max_tokens: 4, tool_choice: { type: 'any' } }, 400, 'invalid_request_error');
  await bad(
    { model: chatModel, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'http://x/y.png' } }] }], max_tokens: 4 },
    400,
    'invalid_request_error',
  );
});

test('a named tool_choice returns a tool_use whose input validates', async () => {
  const m = await askWeatherNamed();
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, JSON.stringify(m.content));
  for (const u of uses) assertValidUse(u, 'get_weather');
  assert.equal(m.stop_reason, 'tool_use');
});

test('tool_choice any streamed gives a valid tool_use, assembled by the SDK', async () => {
  const stream = anthropic.messages.stream({
    model: toolsModel,
    messages: askWeather,
    tools,
    tool_choice: { type: 'any' },
    max_tokens: 200,
  });
  const types = [];
  stream.on('streamEvent', (e) => types.push(e.type));
  const final = await stream.finalMessage();
  const uses = final.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, JSON.stringify(final.content));
  uses.forEach((u) => assertValidUse(u));
  assert.equal(final.stop_reason, 'tool_use');
  assert.ok(types.includes('content_block_start') && types.includes('content_block_stop'), types.join(' '));
});

test('a tool_result sent back gets an answer', async () => {
  const first = await askWeatherNamed();
  const use = first.content.find((b) => b.type === 'tool_use');
  assertValidUse(use);
  const m = await anthropic.messages.create({
    model: toolsModel,
    messages: [
      ...askWeather,
      { role: 'assistant', content: first.content },
      {
        role: 'user',
        content: [{ type: 'tool_result', tool_use_id: use.id, content: JSON.stringify({ temperature: 12 }) }],
      },
    ],
    tools,
    // The answer, not another call: a random model left to choose may call again.
    tool_choice: { type: 'none' },
    max_tokens: 16,
  });
  assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  assert.ok(!m.content.some((b) => b.type === 'tool_use'), JSON.stringify(m.content));
  assert.ok(m.usage.input_tokens > first.usage.input_tokens, 'the call and its result are in the prompt');
  const job = jobOf(m.id);
  const tool = job.messages.find((x) => x.role === 'tool');
  assert.ok(tool, JSON.stringify(job.messages));
  assert.equal(tool.tool_call_id, use.id);
});
