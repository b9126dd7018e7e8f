'use strict';
// The official OpenAI client library (npm `openai`) and curl against a real hearth-gateway,
// broker and nodes: chat and completions, streamed and not; the streamed text equals the whole
// one and `hearth run`'s with the same seed; usage exact (as `hearth job N --json` records it);
// stop; seeds; errors the client raises with their status; SSE bytes as curl receives them; a
// client that disconnects cancels its job. tests/gateway_openai_test.cpp starts the cluster and
// runs this file with `node --test`, the environment set (cluster-env.cjs reads it).
const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const http = require('node:http');
const { OpenAI } = require('openai');
const cluster = require('./cluster-env.cjs');
const { gateway, apiKey, textModel, chatModel, slowModel, textPath, chatPath } = cluster;
const { hearth, adminArgs, openaiClient, hearthJob } = cluster;

const client = openaiClient();
const prompt = 'Once upon a time';
const question = 'Tell me a story about a cat.';

// A greedy completion of the prompt, 40 tokens at most, with `extra` parameters.
const greedy = (extra = {}) =>
  client.completions.create({ model: textModel, prompt, max_tokens: 40, temperature: 0, ...extra });

// `hearth run --json`: the text and the counts of a local run, no broker.
function hearthRun(args) {
  const out = execFileSync(hearth, ['run', ...args, '--json', '-t', '1'], { encoding: 'utf8' });
  let text = '';
  let summary;
  for (const line of out.trim().split('\n')) {
    const j = JSON.parse(line);
    if (j.done) summary = j;
    else text += j.text;
  }
  return { text, nPrompt: summary.n_prompt, nGen: summary.n_generated, stop: summary.stop_reason };
}

function jobIdOf(responseId) {
  const m = /^(?:chatcmpl|cmpl)-(\d+)$/.exec(responseId);
  assert.ok(m, `response id ${responseId} is not chatcmpl-N or cmpl-N`);
  return Number(m[1]);
}

// Every chunk of a stream, and its text joined.
async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  let text = '';
  for (const c of chunks) {
    for (const choice of c.choices) text += choice.delta ? choice.delta.content ?? '' : choice.text;
  }
  return { chunks, text };
}

async function until(cond, what, ms = 20_000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test('GET /v1/models lists both models with the nodes that serve them', async () => {
  const list = [];
  for await (const m of client.models.list()) list.push(m);
  const ids = list.map((m) => m.id);
  for (const id of [textModel, chatModel, slowModel]) assert.ok(ids.includes(id), `${id} in ${ids}`);
  const stories = list.find((m) => m.id === textModel);
  assert.equal(stories.object, 'model');
  assert.equal(stories.owned_by, 'hearth');
  assert.ok(stories.nodes.length >= 1, JSON.stringify(stories));
  // hearth's fields are the broker's registry, as `hearth models --json` shows it.
  const registry = JSON.parse(
    execFileSync(hearth, ['models', '--json', ...adminArgs], { encoding: 'utf8' }),
  );
  for (const m of list) {
    const r = registry.find((x) => x.name === m.id);
    assert.ok(r, `${m.id} in hearth models`);
    for (const field of ['nodes', 'loaded_on', 'context_length', 'architecture', 'quantization']) {
      assert.deepEqual(m[field], r[field], `${m.id}.${field}`);
    }
  }
  assert.equal(stories.architecture, 'llama');

  const one = await client.models.retrieve(textModel);
  assert.equal(one.id, textModel);
  assert.deepEqual(one.nodes, stories.nodes);
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => {
    assert.equal(e.status, 404);
    assert.match(e.message, new RegExp(`known models: .*${textModel}`));
    return true;
  });
});

test('a completion equals hearth run, streamed or not, and its usage is exact', async () => {
  const local = hearthRun(['-m', textPath, '-p', prompt, '-n', '40', '--temp', '0']);
  assert.ok(local.text.length > 0);

  const whole = await greedy();
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.model, textModel);
  assert.equal(whole.choices.length, 1);
  assert.equal(whole.choices[0].text, local.text);
  assert.equal(whole.choices[0].finish_reason, local.stop === 'max_tokens' ? 'length' : 'stop');
  assert.deepEqual(whole.usage, {
    prompt_tokens: local.nPrompt,
    completion_tokens: local.nGen,
    total_tokens: local.nPrompt + local.nGen,
  });
  const job = hearthJob(jobIdOf(whole.id));
  assert.equal(job.summary.state, 'completed');
  assert.equal(job.summary.n_prompt, whole.usage.prompt_tokens);
  assert.equal(job.summary.n_gen, whole.usage.completion_tokens);
  assert.equal(job.summary.priority, 0);
  assert.equal(job.output, local.text);

  const streamed = await collect(
    await greedy({ stream: true, stream_options: { include_usage: true } }),
  );
  assert.equal(streamed.text, local.text);
  const ids = new Set(streamed.chunks.map((c) => c.id));
  assert.equal(ids.size, 1, `one id on every chunk: ${[...ids]}`);
  const created = new Set(streamed.chunks.map((c) => c.created));
  assert.equal(created.size, 1);
  const usage = streamed.chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.deepEqual(usage.usage, whole.usage);
  const withChoices = streamed.chunks.filter((c) => c.choices.length > 0);
  for (const c of withChoices.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  assert.equal(withChoices.at(-1).choices[0].finish_reason, whole.choices[0].finish_reason);
});

test('a chat goes through the model template and equals hearth run --chat', async () => {
  const local = hearthRun(['-m', chatPath, '--chat', question, '-n', '32', '--temp', '0']);
  const messages = [{ role: 'user', content: question }];
  const whole = await client.chat.completions.create({
    model: chatModel,
    messages,
    max_completion_tokens: 32,
    temperature: 0,
  });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].message.content, local.text);
  assert.deepEqual(whole.usage, {
    prompt_tokens: local.nPrompt,
    completion_tokens: local.nGen,
    total_tokens: local.nPrompt + local.nGen,
  });
  const job = hearthJob(jobIdOf(whole.id));
  assert.equal(job.summary.n_prompt, local.nPrompt);
  // (hearth job --json writes every field of a message, the empty tool fields too.)
  assert.deepEqual(job.messages.map(({ role, content }) => ({ role, content })), [{ role: 'user', content: question }]);
  assert.deepEqual(job.messages[0].tool_calls ?? [], []);

  // Text parts are the same message as a string.
  const parts = await client.chat.completions.create({
    model: chatModel,
    messages: [{ role: 'user', content: [{ type: 'text', text: question }] }],
    max_tokens: 32,
    temperature: 0,
  });
  assert.equal(parts.choices[0].message.content, local.text);

  const streamed = await collect(
    await client.chat.completions.create({
      model: chatModel,
      messages,
      max_tokens: 32,
      temperature: 0,
      stream: true,
    }),
  );
  assert.equal(streamed.text, local.text);
  assert.deepEqual(streamed.chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  assert.equal(streamed.chunks[0].object, 'chat.completion.chunk');
  assert.equal(new Set(streamed.chunks.map((c) => c.id)).size, 1);
  const last = streamed.chunks.at(-1);
  assert.equal(last.choices[0].finish_reason, whole.choices[0].finish_reason);
  for (const c of streamed.chunks.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
});

test('a model without a template is refused for chat until the request names one', async () => {
  const messages = [{ role: 'user', content: question }];
  await assert.rejects(
    client.chat.completions.create({ model: textModel, messages, max_tokens: 8 }),
    (e) =>
      e.status === 400 && /has no chat template/.test(e.message) && /chat_template/.test(e.message),
  );
  await assert.rejects(
    client.chat.completions.create({ model: textModel, messages, chat_template: 'chatm' }),
    (e) => e.status === 400 && /unknown chat template 'chatm' \(known: chatml/.test(e.message),
  );
  const local = hearthRun(
    ['-m', textPath, '--chat', question, '--template', 'chatml', '-n', '24', '--temp', '0'],
  );
  const r = await client.chat.completions.create({
    model: textModel,
    messages,
    chat_template: 'chatml',
    max_tokens: 24,
    temperature: 0,
  });
  assert.equal(r.choices[0].message.content, local.text);
  assert.equal(r.usage.prompt_tokens, local.nPrompt);
});

test('stop ends the text before the stop sequence', async () => {
  const free = await greedy();
  const text = free.choices[0].text;
  // A word from the middle of the greedy text: the text must end just before it.
  const words = text.split(' ').filter((w) => w.length >= 3);
  assert.ok(words.length >= 3, `enough words in ${JSON.stringify(text)}`);
  const stopWord = words[2];
  const cut = text.slice(0, text.indexOf(stopWord));
  for (const stop of [stopWord, [stopWord, 'zzzz-never']]) {
    const r = await greedy({ stop });
    assert.equal(r.choices[0].text, cut);
    assert.equal(r.choices[0].finish_reason, 'stop');
  }
  const streamed = await collect(
    await greedy({ stop: stopWord, stream: true }),
  );
  assert.equal(streamed.text, cut);
});

test('a seed makes a sampled completion reproducible, as hearth run samples it', async () => {
  const ask = (seed) =>
    client.completions.create({ model: textModel, prompt, max_tokens: 48, temperature: 0.9, seed });
  const a = await ask(1234);
  const b = await ask(1234);
  assert.equal(a.choices[0].text, b.choices[0].text);
  const streamed = await collect(
    await client.completions.create({
      model: textModel,
      prompt,
      max_tokens: 48,
      temperature: 0.9,
      seed: 1234,
      stream: true,
    }),
  );
  assert.equal(streamed.text, a.choices[0].text);
  // OpenAI's sampling (no top-k, min-p or top-p) with the same seed, locally.
  const local = hearthRun([
    '-m', textPath, '-p', prompt, '-n', '48', '--temp', '0.9', '--seed', '1234',
    '--top-k', '0', '--top-p', '1', '--min-p', '0',
  ]);
  assert.equal(a.choices[0].text, local.text);
});

test('penalties reach the sampler as hearth run applies them', async () => {
  const penalized = await client.completions.create({
    model: textModel,
    prompt,
    max_tokens: 48,
    temperature: 0,
    presence_penalty: 1.5,
    frequency_penalty: 0.5,
  });
  // OpenAI's penalties count the whole sequence so far (repeat_last_n -1).
  const local = hearthRun([
    '-m', textPath, '-p', prompt, '-n', '48', '--temp', '0', '--presence-penalty', '1.5',
    '--frequency-penalty', '0.5', '--repeat-last-n', '-1',
  ]);
  assert.equal(penalized.choices[0].text, local.text);
  const plain = hearthRun(['-m', textPath, '-p', prompt, '-n', '48', '--temp', '0']);
  assert.notEqual(local.text, plain.text, 'the penalties change this greedy text');
});

test('bodies that are not what OpenAI defines get a 400 in OpenAI\'s error shape', async () => {
  const post = (body) =>
    fetch(`${gateway}/v1/chat/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
      body,
    });
  const cases = [
    ['{"model": "x", "messages": [', 'the body is not valid JSON', null],
    ['[]', 'the body must be a JSON object, got an array', null],
    [`{"model":"${chatModel}","messages":${'['.repeat(100)}${']'.repeat(100)}}`,
      'the body nests deeper than 64 levels', null],
    [`{"model":"${chatModel}","messages":[{"role":"function","content":"x"}]}`,
      "messages[0].role 'function' is not supported", 'messages[0].role'],
    [`{"model":"${chatModel}","messages":[{"role":"tool","content":"x"}]}`,
      'messages[0].tool_call_id is required', 'messages[0].tool_call_id'],
    [`{"model":"${chatModel}","messages":[{"role":"user","content":"x"}],"max_tokens":"9"}`,
      'max_tokens must be an integer, got a string', 'max_tokens'],
  ];
  for (const [body, message, param] of cases) {
    const r = await post(body);
    assert.equal(r.status, 400, body);
    const e = (await r.json()).error;
    assert.ok(e.message.startsWith(message), `${e.message} starts with ${message}`);
    assert.equal(e.type, 'invalid_request_error');
    assert.equal(e.param, param);
  }
});

// Every OpenAI client needs a key string, so against a server without keys people give it a
// placeholder, as llama-server, Ollama and vLLM take. On loopback the gateway asks for no key:
// one it does not know is no key (it was 401 "unknown or revoked API key"), and a known key
// still names its owner.
test('a placeholder API key works where the gateway needs none', async () => {
  for (const placeholder of ['sk-no-key-required', 'none', 'ollama', 'hk_not-a-key']) {
    const anyone = new OpenAI({ baseURL: `${gateway}/v1`, apiKey: placeholder, maxRetries: 0 });
    const r = await anyone.completions.create({ model: textModel, prompt, max_tokens: 2, temperature: 0 });
    assert.equal(r.choices.length, 1, placeholder);
    assert.ok((await anyone.models.list()).data.some((m) => m.id === textModel), placeholder);
    // The job is the gateway's own, not the named key's: the key's history does not list it.
    const headers = { Authorization: `Bearer ${apiKey}` };
    const mine = await (await fetch(`${gateway}/v1/hearth/jobs?limit=50`, { headers })).json();
    assert.ok(!mine.data.some((j) => j.job_id === jobIdOf(r.id)), `${placeholder}: not the key's job`);
  }
  const keyed = await client.completions.create({ model: textModel, prompt, max_tokens: 2, temperature: 0 });
  const headers = { Authorization: `Bearer ${apiKey}` };
  const mine = await (await fetch(`${gateway}/v1/hearth/jobs?limit=50`, { headers })).json();
  assert.ok(mine.data.some((j) => j.job_id === jobIdOf(keyed.id)), 'the known key names its owner');
});

test('errors are raised by the client with their status and a message that says why', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'llama-9000', messages: [{ role: 'user', content: 'x' }] }),
    (e) => {
      assert.ok(e instanceof OpenAI.NotFoundError, String(e));
      assert.equal(e.status, 404);
      assert.match(e.message, /llama-9000/);
      assert.match(e.message, new RegExp(textModel));
      return true;
    },
  );
  await assert.rejects(
    client.chat.completions.create({ model: chatModel, messages: [{ role: 'user', content: 'x' }], n: 9 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'n' && /n must be in \[1, 8\], got 9/.test(e.message),
  );
  await assert.rejects(
    client.completions.create({ model: textModel, prompt, temperature: 3 }),
    (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'temperature');
      assert.match(e.message, /temperature must be in \[0, 2\], got 3/);
      return true;
    },
  );
  // A prompt longer than the model's context: the message names the prompt's tokens and what
  // a slot holds (at most the context), streamed or not.
  const { context_length: context } = await client.models.retrieve(textModel);
  const long = 'Once upon a time there was a little dog. '.repeat(Math.ceil(context / 8));
  const nPrompt = JSON.parse(
    execFileSync(hearth, ['tokenize', '-m', textPath, long], { encoding: 'utf8' }),
  ).length;
  assert.ok(nPrompt > context, `${nPrompt} tokens > ${context}`);
  for (const stream of [false, true]) {
    await assert.rejects(
      client.completions.create({ model: textModel, prompt: long, max_tokens: 4, stream }),
      (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.equal(e.code, 'context_length_exceeded');
        const numbers = (e.message.match(/\d+/g) ?? []).map(Number);
        assert.ok(numbers.includes(nPrompt), `${nPrompt} in ${e.message}`);
        assert.ok(numbers.some((n) => n > 0 && n <= context), `a slot's size in ${e.message}`);
        return true;
      },
    );
  }
});

// curl's view of one request: the headers and the body bytes as they came.
function curl(args) {
  return execFileSync(
    'curl',
    ['-sS', '-N', '-D', '-', '-H', `Authorization: Bearer ${apiKey}`,
     '-H', 'Content-Type: application/json', ...args],
    { encoding: 'utf8' },
  );
}

test('curl sees OpenAI\'s SSE framing byte for byte', () => {
  const raw = curl([
    '-d',
    JSON.stringify({
      model: chatModel,
      messages: [{ role: 'user', content: question }],
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
    `${gateway}/v1/chat/completions`,
  ]);
  const split = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, split);
  const body = raw.slice(split + 4);
  assert.match(head, /^HTTP\/1\.1 200 /);
  assert.match(head, /\r\ncontent-type: text\/event-stream/i);
  assert.match(head, /\r\ncache-control: no-cache/i);
  // Nothing but "data: ...\n\n" events, the last one [DONE].
  assert.ok(body.endsWith('data: [DONE]\n\n'), JSON.stringify(body.slice(-40)));
  const events = body.split('\n\n');
  assert.equal(events.pop(), '');
  for (const e of events) assert.match(e, /^data: [^\n]+$/);
  assert.equal(events.pop(), 'data: [DONE]');
  const chunks = events.map((e) => JSON.parse(e.slice(6)));
  const first = chunks[0];
  assert.deepEqual(first.choices[0].delta, { role: 'assistant', content: '' });
  assert.equal(first.choices[0].finish_reason, null);
  assert.match(first.id, /^chatcmpl-\d+$/);
  for (const c of chunks) {
    assert.equal(c.id, first.id);
    assert.equal(c.created, first.created);
    assert.equal(c.model, chatModel);
  }
  const usage = chunks.pop();
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 12);
  const final = chunks.pop();
  assert.equal(final.choices[0].finish_reason, 'length');
  assert.deepEqual(final.choices[0].delta, {});
  for (const c of chunks) {
    assert.equal(c.choices[0].finish_reason, null);
    assert.equal(c.usage, null);
  }
});

test('curl gets an HTTP error status, not a stream, when the job fails before any text', () => {
  const raw = curl([
    '-d',
    JSON.stringify({ model: textModel, prompt: 'word '.repeat(5000), stream: true }),
    `${gateway}/v1/completions`,
  ]);
  assert.match(raw, /^HTTP\/1\.1 400 /);
  assert.match(raw, /\r\ncontent-type: application\/json/i);
  const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4));
  assert.equal(body.error.type, 'invalid_request_error');
  assert.equal(body.error.code, 'context_length_exceeded');
});

test('a client that disconnects mid-stream cancels its job', async () => {
  // The slow model's node writes a few tokens a second: the job is surely running when the
  // client goes.
  const { jobId, sawText } = await new Promise((resolve, reject) => {
    const req = http.request(`${gateway}/v1/completions`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    });
    req.on('error', (e) => (e.code === 'ECONNRESET' ? null : reject(e)));
    req.on('response', (res) => {
      assert.equal(res.statusCode, 200);
      let buf = '';
      res.on('data', (d) => {
        buf += d;
        const m = /"id":"cmpl-(\d+)"/.exec(buf);
        if (m && /"text":"[^"]/.test(buf)) {
          req.destroy();
          resolve({ jobId: Number(m[1]), sawText: true });
        }
      });
      res.on('error', () => {});
    });
    req.end(JSON.stringify({ model: slowModel, prompt, max_tokens: 5000, stream: true }));
  });
  assert.ok(sawText);
  await until(() => hearthJob(jobId).summary.state === 'cancelled', `job ${jobId} cancelled`);
  const job = hearthJob(jobId);
  assert.ok(job.summary.n_gen < 5000, `it stopped early: ${job.summary.n_gen} tokens`);
});

test('a client that gives up on a whole (non-streamed) answer cancels its job too', async () => {
  const headers = { Authorization: `Bearer ${apiKey}` };
  const running = async () =>
    (await (await fetch(`${gateway}/v1/hearth/jobs?model=${slowModel}&state=running`, { headers })).json()).data;
  const before = new Set((await running()).map((j) => j.job_id));
  const abort = new AbortController();
  const answer = client.completions
    .create({ model: slowModel, prompt, max_tokens: 5000 }, { signal: abort.signal })
    .catch((e) => e);
  let job;
  await until(async () => {
    job = (await running()).find((j) => !before.has(j.job_id));
    return job !== undefined;
  }, 'the job to run');
  abort.abort();
  assert.ok((await answer) instanceof Error);
  await until(() => hearthJob(job.job_id).summary.state === 'cancelled', `job ${job.job_id} cancelled`);
});

test('the history routes show the caller its jobs with the wire fields', async () => {
  const r = await client.completions.create({ model: textModel, prompt, max_tokens: 5, temperature: 0 });
  const id = jobIdOf(r.id);
  const headers = { Authorization: `Bearer ${apiKey}` };
  const list = await (await fetch(`${gateway}/v1/hearth/jobs?limit=50&model=${textModel}`, { headers })).json();
  assert.equal(list.object, 'list');
  const row = list.data.find((j) => j.job_id === id);
  assert.ok(row, `job ${id} in the list`);
  assert.equal(row.state, 'completed');
  assert.equal(row.n_gen, r.usage.completion_tokens);
  for (const j of list.data) assert.equal(j.model, textModel);

  for (const name of [String(id), r.id]) {
    const detail = await (await fetch(`${gateway}/v1/hearth/jobs/${name}`, { headers })).json();
    assert.equal(detail.summary.job_id, id);
    assert.equal(detail.output, r.choices[0].text);
    assert.equal(detail.prompt, prompt);
    assert.equal(detail.params.max_tokens, 5);
    assert.equal(detail.output_truncated, false);
    assert.ok(detail.events.some((e) => e.event === 'completed'), JSON.stringify(detail.events));
  }
  const missing = await fetch(`${gateway}/v1/hearth/jobs/999999999`, { headers });
  assert.equal(missing.status, 404);
  const bad = await fetch(`${gateway}/v1/hearth/jobs?state=sleeping`, { headers });
  assert.equal(bad.status, 400);
  assert.match((await bad.json()).error.message, /state must be/);

  const nodes = await (await fetch(`${gateway}/v1/hearth/nodes`, { headers })).json();
  assert.equal(nodes.object, 'list');
  assert.ok(nodes.data.some((n) => n.online && n.models.some((m) => m.name === textModel)));
});

test('a stream that waits in the queue gets its status line and keep-alive comments', async () => {
  // Both slots of the slow model's node busy: the third stream waits in the queue.
  const open = [];
  const stream = (onData) =>
    new Promise((resolve, reject) => {
      const req = http.request(`${gateway}/v1/completions`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
      });
      open.push(req);
      req.on('error', (e) => (req.destroyed ? null : reject(e)));
      req.on('response', (res) => {
        let raw = '';
        res.on('data', (d) => {
          raw += d;
          if (onData(raw, res)) resolve(raw);
        });
        res.on('error', () => {});
      });
      req.end(JSON.stringify({ model: slowModel, prompt, max_tokens: 5000, stream: true }));
    });
  try {
    const running = (raw) => /"text":"[^"]/.test(raw);
    await stream(running);
    await stream(running);
    let status = 0;
    const raw = await stream((r, res) => {
      status = res.statusCode;
      return r.includes(': keep-alive\n\n');
    });
    assert.equal(status, 200);
    // The chat-less stream has no role chunk: the comment is all it got while queued.
    assert.equal(raw, ': keep-alive\n\n');
  } finally {
    for (const req of open) req.destroy();
  }
});
