'use strict';
// The cluster tests/gateway_openai_test.cpp starts, as the environment it sets names it to every
// *.test.cjs file: the gateway, the API key, the models, the hearth binary and the admin arguments
// that reach the broker; and the two things all files build from them the same way, an OpenAI
// client of the gateway and the broker's record of a job. Not a test file itself: the *.test.cjs
// files require it.
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const { OpenAI } = require('openai');

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/gateway_openai_test.cpp sets it)`);
  return v;
}
const gateway = env('HEARTH_GATEWAY_URL'); // http://127.0.0.1:PORT
const apiKey = env('HEARTH_API_KEY');
const textModel = env('HEARTH_MODEL_TEXT'); // stories260K
const chatModel = env('HEARTH_MODEL_CHAT'); // stories260K with a chatml template
const toolsModel = env('HEARTH_MODEL_TOOLS'); // qwen3, random weights, Qwen2.5's template
const slowModel = env('HEARTH_MODEL_SLOW'); // a null-engine node's, a few tokens a second
const textPath = env('HEARTH_MODEL_TEXT_PATH');
const chatPath = env('HEARTH_MODEL_CHAT_PATH');
const hearth = env('HEARTH_BIN');
const adminArgs = JSON.parse(env('HEARTH_ADMIN_ARGS')); // --broker ... [--broker-key --key]

// The official client as a user points it at the gateway; no retries, so a test sees each answer.
const openaiClient = (timeout = 120_000) =>
  new OpenAI({ baseURL: `${gateway}/v1`, apiKey, maxRetries: 0, timeout });

// The broker's record of a job (an admin sees every owner's).
function hearthJob(id) {
  const out = execFileSync(hearth, ['job', String(id), '--json', ...adminArgs], {
    encoding: 'utf8',
  });
  return JSON.parse(out);
}

// The broker's record of the job an answer came from, by the answer's id: `prefix` and the job's
// number (msg_N, resp_N).
function hearthJobOf(answerId, prefix) {
  const m = new RegExp(`^${prefix}(\\d+)$`).exec(answerId);
  assert.ok(m, `id ${answerId} is not ${prefix}N`);
  return hearthJob(m[1]);
}

module.exports = {
  gateway,
  apiKey,
  textModel,
  chatModel,
  toolsModel,
  slowModel,
  textPath,
  chatPath,
  hearth,
  adminArgs,
  openaiClient,
  hearthJob,
  hearthJobOf,
};
