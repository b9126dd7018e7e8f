// The dashboard in a real browser: the system's Chromium driven by playwright-core, against the
// cluster tests/gateway_dashboard_test.cpp started (a broker with keys and 1 s liveness, CPU
// nodes alpha and beta serving stories260K, a null-engine node serving "slow" at 8 tokens/s, a
// node "flaky" quarantined for failing jobs, hearth-gateway requiring API keys). Every check reads text the page shows. Screenshots go to
// $HEARTH_ARTIFACTS; their paths are printed.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/gateway_dashboard_test.cpp sets it)`);
  return v;
};
const require = createRequire(join(env('HEARTH_DASHBOARD_NODE'), 'node_modules', 'x.js'));
const { chromium } = require('playwright-core');

const url = env('HEARTH_GATEWAY_URL');
const apiKey = env('HEARTH_API_KEY');
const otherJob = Number(env('HEARTH_OTHER_JOB'));  // another owner's job: an admin key sees it
const nodePids = JSON.parse(env('HEARTH_NODE_PIDS'));
const artifacts = env('HEARTH_ARTIFACTS');
const reference = JSON.parse(readFileSync(env('HEARTH_REFERENCE'), 'utf8')).cases[0];
assert.equal(reference.prompt, 'Once upon a time');
const started = Date.now();
const since = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

async function shot(page, name) {
  const path = join(artifacts, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

async function step(name, f) {
  const t = Date.now();
  await f();
  console.log(`ok - ${name} (${Date.now() - t} ms)`);
}

const browser = await chromium.launch({
  executablePath: env('HEARTH_CHROMIUM'),
  args: ['--no-sandbox'],
});
let failed = false;
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const consoleErrors = [];
page.on('console', (m) => {
  // A refused request (the 401 before the key, a 404 of /metrics) is logged too; it is no bug.
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) consoleErrors.push(m.text());
});
page.on('pageerror', (e) => consoleErrors.push(String(e)));
page.setDefaultTimeout(20_000);

const node = (name) => page.locator(`[data-testid=node][data-node="${name}"]`);

try {
  await step('without a key the page says the gateway wants one', async () => {
    await page.goto(url + '/');
    assert.equal(new URL(page.url()).pathname, '/dashboard/');
    const status = page.getByTestId('live-status');
    await status.filter({ hasText: '401' }).waitFor();
    assert.match(await status.innerText(), /API key/);
  });

  await step('with the key: both nodes, online, with their model', async () => {
    await page.getByTestId('api-key').fill(apiKey);
    await page.getByTestId('api-key-save').click();
    await page.getByTestId('live-status').filter({ hasText: 'live as dashboard (admin)' }).waitFor();
    for (const name of ['alpha', 'beta']) {
      await node(name).and(page.locator('[data-state=online]')).waitFor();
      const text = await node(name).innerText();
      assert.match(text, /stories260K/, `node ${name}: ${text}`);
      assert.match(text, /threads/, `node ${name} shows its hardware: ${text}`);
      assert.match(text, /0 \/ 1/, `node ${name} shows its slots: ${text}`);
    }
    assert.match(await page.locator('[data-testid=queue][data-model=stories260K]').innerText(), /alpha/);
    // The plots read GET /metrics.
    await page.getByTestId('plot-tps').waitFor();
    assert.equal(await page.getByTestId('metrics-unavailable').count(), 0);
    await shot(page, 'nodes');
  });

  await step('a quarantined node says until when and the attempts it lost', async () => {
    await node('flaky').and(page.locator('[data-state=quarantined]')).waitFor();
    const text = await node('flaky').getByTestId('quarantine').innerText();
    assert.match(text, /^until \d{1,2}:\d\d:\d\d\.\d{3} \(.+ more\)/, text);
    assert.match(text, /job \d+ attempt 3: node flaky failed it: the model does not load here/, text);
    assert.match(text, /job \d+ attempt 1: node flaky failed it/, text);
    await page.locator('#nodes').scrollIntoViewIfNeeded();
    await shot(page, 'node-quarantined');
  });

  let jobId;
  await step('a greedy prompt from the submit box streams the reference text', async () => {
    await page.getByTestId('submit-model').selectOption('stories260K');
    await page.getByTestId('submit-prompt').fill(reference.prompt);
    await page.getByTestId('submit-max-tokens').fill(String(reference.greedy_tokens.length));
    await page.getByTestId('submit-temperature').fill('0');
    await page.getByTestId('submit-go').click();
    await page.getByTestId('submit-status').filter({ hasText: /^done/ }).waitFor();
    assert.equal(await page.getByTestId('submit-output').innerText(), reference.greedy_text);
    jobId = Number(await page.getByTestId('submit-job').innerText());
    assert.ok(jobId > 0);
  });

  await step('the job is in the history; its detail shows its attempt, events and output', async () => {
    await page.getByTestId('history-refresh').click();
    const row = page.locator(`[data-testid=history-job][data-job="${jobId}"]`);
    await row.and(page.locator('[data-state=completed]')).waitFor();
    // The admin key lists every owner's jobs: the one a client certificate submitted too.
    const other = page.locator(`[data-testid=history-job][data-job="${otherJob}"]`);
    await other.waitFor();
    assert.match(await other.innerText(), /someone-else/);
    await shot(page, 'history');
    await row.click();
    const detail = page.locator(`[data-testid=job-detail][data-job="${jobId}"]`);
    await detail.waitFor();
    const attempts = detail.locator('[data-testid=attempt]');
    assert.equal(await attempts.count(), 1);
    assert.match(await attempts.first().innerText(), /^1\s+(alpha|beta)\b/);
    const events = await detail.getByTestId('events').innerText();
    for (const e of ['queued', 'assigned', 'completed']) assert.match(events, new RegExp(e));
    assert.equal(await detail.getByTestId('detail-output').innerText(), reference.greedy_text);
    assert.equal(await detail.getByTestId('detail-prompt').innerText(), reference.prompt);
    assert.match(await detail.locator('[data-timing="queue wait"]').innerText(), /ms|s$/);
    await detail.scrollIntoViewIfNeeded();
    await shot(page, 'job-detail');
  });

  let slowId;
  await step('a running job: its tokens arrive in the page, then it is cancelled', async () => {
    await page.getByTestId('submit-model').selectOption('slow');
    await page.getByTestId('submit-max-tokens').fill('2000');
    await page.getByTestId('submit-go').click();
    await page.getByTestId('submit-job').filter({ hasNotText: String(jobId) }).waitFor();
    slowId = Number(await page.getByTestId('submit-job').innerText());
    const row = page.locator(`[data-testid=active-job][data-job="${slowId}"][data-state=running]`);
    await row.waitFor();
    await row.click();
    const stream = page.getByTestId('token-stream');
    await stream.getByTestId('stream-status').filter({ hasText: 'running on slow' }).waitFor();
    // Tokens keep arriving: the text grows.
    const pre = stream.locator('pre');
    await page.waitForFunction((el) => el.textContent.length > 0, await pre.elementHandle());
    const before = (await pre.innerText()).length;
    await page.waitForFunction(([el, n]) => el.textContent.length > n, [await pre.elementHandle(), before]);
    // The throughput plot (GET /metrics every 2 s) shows the tokens arriving.
    await page.waitForFunction(
      () => {
        const b = document.querySelector('[data-testid=plot-tps] figcaption b');
        return b && parseFloat(b.textContent) > 0;
      },
      null,
      { timeout: 20000 },
    );
    await shot(page, 'streaming');
    await row.getByTestId('cancel').click();
    await stream.getByTestId('stream-status').filter({ hasText: /^cancelled/ }).waitFor();
    await row.waitFor({ state: 'detached' });
    // The job left the list; its stream stays, with how it ended and what it wrote, until closed.
    assert.match(await stream.getByTestId('stream-status').innerText(), /^cancelled/);
    assert.ok((await pre.innerText()).length >= before, 'the cancelled job\'s text went');
    await page.getByTestId('watched-job').getByTestId('watched-close').click();
    await stream.waitFor({ state: 'detached' });
    await page.getByTestId('submit-status').filter({ hasText: /cancel|done|error/ }).waitFor();
    await page.getByTestId('history-refresh').click();
    await page.locator(`[data-testid=history-job][data-job="${slowId}"][data-state=cancelled]`).waitFor();
  });

  await step('a node killed (kill -9) turns offline on the page within its liveness', async () => {
    const t = Date.now();
    process.kill(nodePids.beta, 'SIGKILL');
    // The broker's liveness is 1 s (tests/cluster.h), snapshots come every second.
    await node('beta').and(page.locator('[data-state=offline]')).waitFor({ timeout: 5_000 });
    console.log(`# beta offline on the page after ${Date.now() - t} ms`);
    assert.equal(await node('alpha').getAttribute('data-state'), 'online');
    await page.locator('#nodes').scrollIntoViewIfNeeded();
    await shot(page, 'node-offline');
  });

  assert.deepEqual(consoleErrors, [], 'the page logged errors');
} catch (e) {
  failed = true;
  console.error(`not ok - ${e.stack ?? e}`);
  await shot(page, 'failure').catch(() => {});
  console.error(`console errors: ${JSON.stringify(consoleErrors)}`);
} finally {
  await browser.close();
}
console.log(`# ${failed ? 'FAILED' : 'passed'} in ${since()}`);
process.exit(failed ? 1 : 0);
