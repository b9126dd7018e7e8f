'use strict';
// OpenAI's Responses API (POST /v1/responses) with the official client's `responses.create` and
// `responses.stream` against hearth-gateway: a greedy answer equals /v1/chat/completions' for
// the same conversation, whole and streamed, with exact usage; the stream's typed events are
// numbered and accumulate into the final response; the stateless API refuses
// previous_response_id; on a random-weight qwen3 with Qwen2.5's tool-calling template a named
// tool_choice gives a function_call whose arguments validate, tool_choice "required" streamed
// gives one, the call's output sent back gets an answer, and text.format json_schema gives JSON
// that validates. tests/gateway_openai_test.cpp starts the cluster and sets the environment.
const test = require('node:test');
const assert = require('node:assert/strict');
const { chatModel, toolsModel, openaiClient, hearthJobOf } = require('./cluster-env.cjs');
const { validate, weatherParameters, timeParameters, personSchema } = require('./json-schema-check.cjs');

const client = openaiClient();
const question = 'Tell me a story about a cat.';

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather forecast for a city',
  parameters: weatherParameters,
  strict: true,
};
const timeTool = {
  type: 'function',
  name: 'get_time',
  description: 'The time in a time zone',
  parameters: timeParameters,
  strict: false,
};
const tools = [weatherTool, timeTool];
const askWeather = 'What is the weather in Oslo for the next 3 days?';

const jobOf = (responseId) => hearthJobOf(responseId, 'resp_');

// The weather question with get_weather named as the function to call.
const askWeatherNamed = () =>
  client.responses.create({
    model: toolsModel,
    input: askWeather,
    tools,
    tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 200,
  });

// A function_call item is one of the tools, with arguments that parse and validate.
function assertValidCall(item, name) {
  assert.equal(item.type, 'function_call');
  assert.ok(typeof item.call_id === 'string' && item.call_id.length > 0, JSON.stringify(item));
  const tool = tools.find((t) => t.name === item.name);
  assert.ok(tool, `the call names ${item.name}, not one of the tools`);
  if (name) assert.equal(item.name, name);
  let args;
  assert.doesNotThrow(() => (args = JSON.parse(item.arguments)), item.arguments);
  assert.deepEqual(validate(tool.parameters, args), [], item.arguments);
  return args;
}

test('a greedy response equals the chat completion of the same conversation', async () => {
  const chat = await client.chat.completions.create({
    model: chatModel,
    messages: [
      { role: 'system', content: 'You tell stories.' },
      { role: 'user', content: question },
    ],
    max_tokens: 24,
    temperature: 0,
  });
  const r = await client.responses.create({
    model: chatModel,
    instructions: 'You tell stories.',
    input: question,
    max_output_tokens: 24,
    temperature: 0,
  });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_\d+$/);
  assert.equal(r.model, chatModel);
  assert.equal(r.instructions, 'You tell stories.');
  const messages = r.output.filter((o) => o.type === 'message');
  assert.equal(messages.length, 1, JSON.stringify(r.output));
  assert.equal(messages[0].role, 'assistant');
  assert.equal(messages[0].content[0].type, 'output_text');
  // The client's own output_text joins the message's text.
  assert.equal(r.output_text, chat.choices[0].message.content);
  assert.equal(r.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
  assert.deepEqual(
    [r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens],
    [chat.usage.prompt_tokens, chat.usage.completion_tokens, chat.usage.total_tokens],
  );
  // The job is in hearth's history, the caller's, with the conversation as messages.
  const job = jobOf(r.id);
  assert.equal(job.summary.state, 'completed');
  assert.equal(job.summary.n_gen, r.usage.output_tokens);
  assert.deepEqual(
    job.messages.map((m) => [m.role, m.content]),
    [
      ['system', 'You tell stories.'],
      ['user', question],
    ],
  );

  // Input as message items with input_text parts is the same conversation.
  const items = await client.responses.create({
    model: chatModel,
    input: [
      { role: 'developer', content: 'You tell stories.' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: question }] },
    ],
    max_output_tokens: 24,
    temperature: 0,
  });
  assert.equal(items.output_text, r.output_text);
});

test('a streamed response sends numbered typed events that make the whole one', async () => {
  const body = { model: chatModel, input: question, max_output_tokens: 24, temperature: 0 };
  const whole = await client.responses.create(body);
  const events = [];
  for await (const e of await client.responses.create({ ...body, stream: true })) events.push(e);
  const types = events.map((e) => e.type);
  assert.deepEqual(types.slice(0, 4), [
    'response.created',
    'response.in_progress',
    'response.output_item.added',
    'response.content_part.added',
  ]);
  assert.equal(types.at(-1), whole.status === 'completed' ? 'response.completed' : 'response.incomplete');
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  const text = events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');
  assert.equal(text, whole.output_text);
  assert.equal(events.find((e) => e.type === 'response.output_text.done').text, whole.output_text);
  const last = events.at(-1).response;
  assert.deepEqual(last.usage, whole.usage);
  assert.equal(events[0].response.id, last.id);

  // The client's stream helper accumulates the events into the same response.
  const stream = client.responses.stream(body);
  let deltas = '';
  stream.on('response.output_text.delta', (e) => (deltas += e.delta));
  const final = await stream.finalResponse();
  assert.equal(final.output_text, whole.output_text);
  assert.equal(deltas, whole.output_text);
});

test('the stateless API refuses what needs stored state, in OpenAI\'s error shape', async () => {
  const bad = async (extra, status, param) => {
    await assert.rejects(
      client.responses.create({ model: chatModel, input: 'Hi', max_output_tokens: 4, ...extra }),
      (e) => {
        assert.equal(e.status, status, e.message);
        if (param !== undefined) assert.equal(e.param, param, e.message);
        return true;
      },
    );
  };
  await bad({ previous_response_id: 'resp_1' }, 400, 'previous_response_id');
  await bad({ input: [{ type: 'item_reference', id: 'msg_1' }] }, 400, 'input[0].type');
  await bad({ tools: [{ type: 'web_search' }] }, 400, 'tools[0].type');
  await bad({ tool_choice: 'required' }, 400, 'tool_choice');
  await bad({ model: 'no-such-model' }, 404);
});

test('a named tool_choice returns a function_call whose arguments validate', async () => {
  const r = await askWeatherNamed();
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert.ok(calls.length >= 1, JSON.stringify(r.output));
  for (const c of calls) assertValidCall(c, 'get_weather');
  assert.equal(r.status, 'completed');
  assert.equal(r.tools[0].name, 'get_weather');
});

test('tool_choice "required" streamed gives a valid call through the function_call events', async () => {
  const events = [];
  for await (const e of await client.responses.create({
    model: toolsModel,
    input: askWeather,
    tools,
    tool_choice: 'required',
    max_output_tokens: 200,
    stream: true,
  })) {
    events.push(e);
  }
  const added = events.filter((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
  assert.ok(added.length >= 1, events.map((e) => e.type).join(' '));
  for (const a of added) {
    const done = events.find(
      (e) => e.type === 'response.function_call_arguments.done' && e.output_index === a.output_index,
    );
    assert.ok(done, `arguments.done for output ${a.output_index}`);
    const deltas = events
      .filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === a.item.id)
      .map((e) => e.delta)
      .join('');
    assert.equal(deltas, done.arguments);
    const item = events.find((e) => e.type === 'response.output_item.done' && e.output_index === a.output_index).item;
    assertValidCall(item);
  }
  const last = events.at(-1);
  assert.equal(last.type, 'response.completed');
  assert.ok(last.response.output.some((o) => o.type === 'function_call'));
});

test("the call's output sent back as input items gets an answer", async () => {
  const first = await askWeatherNamed();
  const call = first.output.find((o) => o.type === 'function_call');
  assertValidCall(call);
  const r = await client.responses.create({
    model: toolsModel,
    input: [
      { role: 'user', content: askWeather },
      // The call as the client hands it back, and its output.
      ...first.output.filter((o) => o.type !== 'message'),
      { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature: 12 }) },
    ],
    tools,
    // The answer, not another call: a random model left to choose may call again.
    tool_choice: 'none',
    max_output_tokens: 16,
  });
  const message = r.output.find((o) => o.type === 'message');
  assert.ok(message, JSON.stringify(r.output));
  assert.equal(typeof r.output_text, 'string');
  assert.ok(!r.output.some((o) => o.type === 'function_call'));
  assert.ok(r.usage.input_tokens > first.usage.input_tokens, 'the call and its output are in the prompt');
  const job = jobOf(r.id);
  const tool = job.messages.find((m) => m.role === 'tool');
  assert.ok(tool, JSON.stringify(job.messages));
  assert.equal(tool.tool_call_id, call.call_id);
});

for (const stream of [false, true]) {
  test(`text.format json_schema (strict${stream ? ', streamed' : ''}) returns JSON that validates`, async () => {
    const body = {
      model: toolsModel,
      input: 'Describe a person.',
      text: { format: { type: 'json_schema', name: 'person', strict: true, schema: personSchema } },
      max_output_tokens: 300,
    };
    let text;
    let status;
    if (stream) {
      const final = await client.responses.stream(body).finalResponse();
      text = final.output_text;
      status = final.status;
    } else {
      const r = await client.responses.create(body);
      text = r.output_text;
      status = r.status;
    }
    assert.equal(status, 'completed', `the grammar ends the answer: ${text}`);
    let value;
    assert.doesNotThrow(() => (value = JSON.parse(text)), text);
    assert.deepEqual(validate(personSchema, value), [], text);
  });
}
