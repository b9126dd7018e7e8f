'use strict';
// OpenAI's Batch API through the official client (npm `openai`): files.create, batches.create,
// batches.retrieve, batches.list, batches.cancel, files.content, against a real hearth-gateway,
// broker and nodes. tests/gateway_openai_test.cpp runs it with the other tests/openai files and
// sets the environment (CommonJS, since NODE_PATH only reaches require()).
const test = require('node:test');
const assert = require('node:assert/strict');
const { toFile, NotFoundError, BadRequestError } = require('openai');
const { chatModel, slowModel, openaiClient } = require('./cluster-env.cjs');

const client = openaiClient(60_000);

function requestLine(i, model, maxTokens) {
  return {
    custom_id: `req-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: {
      model,
      messages: [{ role: 'user', content: `Tell me story number ${i}.` }],
      max_tokens: maxTokens,
      temperature: 0,
    },
  };
}

async function uploadBatch(lines) {
  const jsonl = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  const file = await client.files.create({
    file: await toFile(Buffer.from(jsonl), 'batch.jsonl'),
    purpose: 'batch',
  });
  assert.equal(file.object, 'file');
  assert.equal(file.purpose, 'batch');
  assert.equal(file.bytes, Buffer.byteLength(jsonl));
  return client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata: { suite: 'openai-node' },
  });
}

async function waitFor(id, statuses, ms = 90_000) {
  const end = Date.now() + ms;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (statuses.includes(b.status)) return b;
    if (Date.now() > end) throw new Error(`batch ${id} is still ${b.status} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function fileLines(id) {
  const res = await client.files.content(id);
  const text = await res.text();
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l));
}

test('a batch of 50 chat requests completes and its output file matches direct requests', async () => {
  const lines = Array.from({ length: 50 }, (_, i) => requestLine(i, chatModel, 6));
  const created = await uploadBatch(lines);
  assert.equal(created.object, 'batch');
  assert.equal(created.endpoint, '/v1/chat/completions');
  assert.equal(created.request_counts.total, 50);
  assert.deepEqual(created.metadata, { suite: 'openai-node' });

  const done = await waitFor(created.id, ['completed', 'failed', 'cancelled']);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.deepEqual(done.request_counts, { total: 50, completed: 50, failed: 0 });
  assert.equal(done.error_file_id, null);
  assert.ok(done.completed_at >= done.created_at);

  const out = await fileLines(done.output_file_id);
  assert.equal(out.length, 50);
  const byId = new Map(out.map((l) => [l.custom_id, l]));
  assert.equal(byId.size, 50, 'each custom_id once');
  for (let i = 0; i < 50; i++) {
    const l = byId.get(`req-${i}`);
    assert.ok(l, `req-${i} is in the output`);
    assert.equal(l.error, null);
    assert.equal(l.response.status_code, 200);
    assert.equal(l.response.body.object, 'chat.completion');
    assert.equal(l.response.body.model, chatModel);
  }
  // Greedy: a line's answer is what the same request gets from /v1/chat/completions.
  for (const i of [0, 17, 49]) {
    const direct = await client.chat.completions.create(lines[i].body);
    const batched = byId.get(`req-${i}`).response.body;
    assert.equal(batched.choices[0].message.content, direct.choices[0].message.content, `req-${i}`);
    assert.deepEqual(batched.usage, direct.usage, `req-${i}`);
  }

  const listed = [];
  for await (const b of client.batches.list({ limit: 100 })) listed.push(b.id);
  assert.ok(listed.includes(created.id));
});

test('a cancelled batch ends cancelled, unfinished lines in its error file', async () => {
  const lines = Array.from({ length: 12 }, (_, i) => requestLine(i, slowModel, 40));
  const created = await uploadBatch(lines);
  const cancelling = await client.batches.cancel(created.id);
  assert.ok(['cancelling', 'cancelled'].includes(cancelling.status), cancelling.status);
  const done = await waitFor(created.id, ['cancelled', 'completed', 'failed'], 30_000);
  assert.equal(done.status, 'cancelled', JSON.stringify(done));
  const { total, completed, failed } = done.request_counts;
  assert.equal(total, 12);
  assert.equal(completed + failed, 12);
  assert.ok(completed < 12, '2 s a line: the batch cannot have finished');
  const errors = await fileLines(done.error_file_id);
  assert.equal(errors.length, failed);
  for (const e of errors) assert.equal(e.error.code, 'batch_cancelled');
});

test('the client raises the gateway errors with their status', async () => {
  await assert.rejects(client.batches.retrieve('batch_doesnotexist'), NotFoundError);
  await assert.rejects(client.files.retrieve('file-doesnotexist'), NotFoundError);
  await assert.rejects(
    client.batches.create({
      input_file_id: 'file-x',
      endpoint: '/v1/embeddings',
      completion_window: '24h',
    }),
    (e) => e instanceof BadRequestError && e.param === 'endpoint',
  );
});
