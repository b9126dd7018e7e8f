'use strict';
// Issue 56 with the official OpenAI client (npm `openai`) against hearth-gateway: tool calls,
// structured output, logprobs and n on a random-weight qwen3 carrying Qwen2.5-7B-Instruct's own
// chat template (tests/gateway_openai_test.cpp makes it and starts the cluster). The model's
// weights are random, so what it says is noise: only constrained output has a shape to check —
// a named or required tool_choice gives a call whose arguments validate against the function's
// schema, a strict json_schema gives JSON that validates — and the API's shapes (the client's
// own stream helper assembles the streamed calls).
const test = require('node:test');
const assert = require('node:assert/strict');
const { toolsModel, textModel, openaiClient } = require('./cluster-env.cjs');
const { validate, weatherParameters, timeParameters } = require('./json-schema-check.cjs');

const client = openaiClient();

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather forecast for a city',
    strict: true,
    parameters: weatherParameters,
  },
};
const timeTool = {
  type: 'function',
  function: {
    name: 'get_time',
    description: 'The time in a time zone',
    parameters: timeParameters,
  },
};
const tools = [weatherTool, timeTool];
const messages = [{ role: 'user', content: 'What is the weather in Oslo for the next 3 days?' }];

test('the validator itself tells valid from invalid', () => {
  const s = weatherTool.function.parameters;
  assert.deepEqual(validate(s, { city: 'Oslo', unit: 'celsius', days: 3 }), []);
  assert.notDeepEqual(validate(s, { city: 'Oslo', unit: 'kelvin', days: 3 }), []);
  assert.notDeepEqual(validate(s, { city: 'Oslo', unit: 'celsius', days: 9 }), []);
  assert.notDeepEqual(validate(s, { city: 'Oslo', unit: 'celsius', days: 3, x: 1 }), []);
  assert.notDeepEqual(validate(s, { unit: 'celsius', days: 3 }), []);
});

// A call is one of the tools, with arguments that parse and validate against its parameters.
function assertValidCall(call) {
  assert.equal(call.type, 'function');
  assert.equal(typeof call.id, 'string');
  assert.ok(call.id.length > 0, 'a call has an id');
  const tool = tools.find((t) => t.function.name === call.function.name);
  assert.ok(tool, `the call names ${call.function.name}, not one of the tools`);
  let args;
  assert.doesNotThrow(() => (args = JSON.parse(call.function.arguments)), call.function.arguments);
  assert.deepEqual(validate(tool.function.parameters, args), [], call.function.arguments);
  return args;
}

// The question with get_weather named as the tool to call.
const askForWeather = (seed) =>
  client.chat.completions.create({
    model: toolsModel,
    messages,
    tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 200,
    seed,
  });

test('a named tool_choice returns a call of that function whose arguments validate', async () => {
  const r = await askForWeather(1);
  assert.match(r.id, /^chatcmpl-\d+$/);
  const choice = r.choices[0];
  const calls = choice.message.tool_calls;
  assert.ok(calls && calls.length >= 1, JSON.stringify(choice));
  for (const call of calls) {
    assert.equal(call.function.name, 'get_weather');
    assertValidCall(call);
  }
  assert.equal(choice.message.content, null, 'a message of calls alone has null content');
  assert.equal(choice.finish_reason, 'tool_calls');
});

test('tool_choice "required" streamed gives a valid call and finish_reason tool_calls', async () => {
  const stream = await client.chat.completions.create({
    model: toolsModel,
    messages,
    tools,
    tool_choice: 'required',
    max_tokens: 200,
    seed: 2,
    stream: true,
  });
  // The deltas as OpenAI streams them: a call's first delta has its index, id, type and name;
  // later ones add arguments.
  const calls = [];
  const finishes = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      if (c.finish_reason) finishes.push(c.finish_reason);
      for (const d of c.delta.tool_calls || []) {
        if (!calls[d.index]) {
          assert.ok(d.id && d.type === 'function' && d.function.name, JSON.stringify(d));
          calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
        }
        calls[d.index].function.arguments += d.function.arguments || '';
      }
    }
  }
  assert.ok(calls.length >= 1, 'at least one call');
  calls.forEach(assertValidCall);
  assert.deepEqual(finishes, ['tool_calls']);
});

test("the client's stream helper assembles the streamed calls as OpenAI's", async () => {
  const runner = client.chat.completions.stream({
    model: toolsModel,
    messages,
    tools,
    tool_choice: { type: 'function', function: { name: 'get_time' } },
    max_tokens: 100,
    seed: 3,
  });
  const final = await runner.finalChatCompletion();
  const calls = final.choices[0].message.tool_calls;
  assert.ok(calls && calls.length >= 1, JSON.stringify(final.choices[0]));
  for (const call of calls) {
    assert.equal(call.function.name, 'get_time');
    assertValidCall(call);
  }
});

test("sending the call's result back gives an answer", async () => {
  const first = await askForWeather(4);
  const call = first.choices[0].message.tool_calls[0];
  assertValidCall(call);
  const r = await client.chat.completions.create({
    model: toolsModel,
    messages: [
      ...messages,
      first.choices[0].message, // content null and tool_calls, as the client hands it back
      { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature: 12 }) },
    ],
    tools,
    // The answer, not another call: a random model left to choose may call again.
    tool_choice: 'none',
    max_tokens: 16,
    seed: 5,
  });
  const choice = r.choices[0];
  assert.equal(typeof choice.message.content, 'string');
  assert.ok(!choice.message.tool_calls || choice.message.tool_calls.length === 0);
  assert.ok(['stop', 'length'].includes(choice.finish_reason), choice.finish_reason);
  assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens, 'the call and its result are in the prompt');
});

const personSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pets: { type: 'array', items: { type: 'string', enum: ['cat', 'dog'] }, maxItems: 3 },
    verified: { type: 'boolean' },
  },
  required: ['name', 'age', 'pets', 'verified'],
  additionalProperties: false,
};

for (const stream of [false, true]) {
  test(`response_format json_schema (strict${stream ? ', streamed' : ''}) returns JSON that validates`, async () => {
    const body = {
      model: toolsModel,
      messages: [{ role: 'user', content: 'Describe a person.' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } },
      max_tokens: 300,
      seed: 6,
    };
    let content = '';
    let finish;
    if (stream) {
      for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
        for (const ch of c.choices) {
          content += ch.delta.content || '';
          finish = ch.finish_reason || finish;
        }
      }
    } else {
      const r = await client.chat.completions.create(body);
      content = r.choices[0].message.content;
      finish = r.choices[0].finish_reason;
    }
    assert.equal(finish, 'stop', `the grammar ends the answer: ${content}`);
    let value;
    assert.doesNotThrow(() => (value = JSON.parse(content)), content);
    assert.deepEqual(validate(personSchema, value), [], content);
  });
}

test('json_object mode returns a JSON object', async () => {
  const r = await client.chat.completions.create({
    model: toolsModel,
    messages: [{ role: 'user', content: 'Reply in JSON.' }],
    response_format: { type: 'json_object' },
    max_tokens: 300,
    seed: 7,
  });
  const content = r.choices[0].message.content;
  if (r.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(content);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v), content);
  } else {
    // An object without a bound may outrun max_tokens: then it is a prefix of one.
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.match(content, /^\s*\{/);
  }
});

test('chat logprobs: every sampled token with its top alternatives', async () => {
  const body = {
    model: toolsModel,
    messages: [{ role: 'user', content: 'Hello' }],
    logprobs: true,
    top_logprobs: 3,
    max_tokens: 6,
    temperature: 0,
  };
  const r = await client.chat.completions.create(body);
  const choice = r.choices[0];
  const content = choice.logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0, `${t.logprob}`);
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 3);
    for (let i = 1; i < 3; ++i) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob);
    // Greedy: the sampled token is the most likely one.
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-4);
  }
  const text = choice.message.content;
  if (!text.includes('\uFFFD')) {
    assert.deepEqual(Buffer.concat(content.map((t) => Buffer.from(t.bytes))), Buffer.from(text));
  }
  // Streamed: the same tokens, spread over the chunks.
  let streamed = [];
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
    for (const ch of c.choices) streamed = streamed.concat(ch.logprobs?.content || []);
  }
  assert.deepEqual(streamed.map((t) => t.token), content.map((t) => t.token));
});

test('completions logprobs: tokens, token_logprobs, top_logprobs and text_offset', async () => {
  const r = await client.completions.create({
    model: textModel,
    prompt: 'Once upon a time',
    logprobs: 2,
    max_tokens: 8,
    temperature: 0,
  });
  const lp = r.choices[0].logprobs;
  assert.equal(lp.tokens.length, r.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.top_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset.length, lp.tokens.length);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < lp.tokens.length; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.entries(lp.top_logprobs[i]);
    assert.ok(top.length >= 1 && top.length <= 2, JSON.stringify(lp.top_logprobs[i]));
    if (i > 0) assert.ok(lp.text_offset[i] > lp.text_offset[i - 1]);
  }
  assert.equal(lp.tokens.join(''), r.choices[0].text);
});

test('n = 2 gives two choices, whole and streamed', async () => {
  const body = { model: toolsModel, messages: [{ role: 'user', content: 'Hi' }], n: 2, max_tokens: 8, seed: 8 };
  const r = await client.chat.completions.create(body);
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  for (const c of r.choices) {
    assert.equal(typeof c.message.content, 'string');
    assert.ok(['stop', 'length'].includes(c.finish_reason));
  }
  const text = ['', ''];
  const finishes = [[], []];
  for await (const c of await client.chat.completions.create({ ...body, stream: true })) {
    for (const ch of c.choices) {
      text[ch.index] += ch.delta.content || '';
      if (ch.finish_reason) finishes[ch.index].push(ch.finish_reason);
    }
  }
  assert.deepEqual(finishes.map((f) => f.length), [1, 1], 'one finish per choice');
  // The same seed: the streamed choices are the whole ones.
  assert.deepEqual(text, r.choices.map((c) => c.message.content));
  const cr = await client.completions.create({ model: textModel, prompt: 'Once', n: 2, max_tokens: 4 });
  assert.deepEqual(cr.choices.map((c) => c.index), [0, 1]);
});

test('malformed tool requests are 400s naming the parameter', async () => {
  const bad = async (extra, param) => {
    await assert.rejects(
      client.chat.completions.create({ model: toolsModel, messages, max_tokens: 4, ...extra }),
      (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, param, e.message);
        return true;
      },
    );
  };
  await bad({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice');
  await bad({ tool_choice: 'required' }, 'tool_choice');
  await bad({ tools: [{ type: 'function', function: { name: 'a b' } }] }, 'tools[0].function.name');
  await bad({ n: 9 }, 'n');
  await bad({ logprobs: true, top_logprobs: 21 }, 'top_logprobs');
  await bad({ messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].tool_call_id');
  await bad(
    { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] },
    'messages[0].content[0].type',
  );
});
