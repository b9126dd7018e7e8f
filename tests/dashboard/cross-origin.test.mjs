// Issue 52: a gateway that asks for no API key (loopback), in a real browser (the system's
// Chromium driven by playwright-core). A page of another origin posts a completion as text/plain,
// which needs no preflight, and the job must not run; a name that resolves to 127.0.0.1 (what DNS
// rebinding makes of an attacker's name) must not be answered; the dashboard, of the gateway's
// own origin, still works. tests/gateway_dashboard_test.cpp starts the gateway and runs this.
import assert from 'node:assert/strict';
import http from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (tests/gateway_dashboard_test.cpp sets it)`);
  return v;
};
const require = createRequire(join(env('HEARTH_DASHBOARD_NODE'), 'node_modules', 'x.js'));
const { chromium } = require('playwright-core');

const gateway = env('HEARTH_KEYLESS_URL'); // http://127.0.0.1:PORT, no API key needed
const model = env('HEARTH_MODEL');
const port = new URL(gateway).port;

// The gateway's own jobs (a request without a key acts as the gateway), as a program sees them.
async function jobCount() {
  const r = await fetch(`${gateway}/v1/hearth/jobs?limit=10000`);
  assert.equal(r.status, 200);
  return (await r.json()).data.length;
}

// The attacker's site: another origin on this machine, its page posting to the gateway.
const site = http.createServer((req, res) => {
  res.writeHead(200, { 'Content-Type': 'text/html' });
  res.end('<!doctype html><title>elsewhere</title>');
});
await new Promise((r) => site.listen(0, '127.0.0.1', r));
const elsewhere = `http://localhost:${site.address().port}/`;

const browser = await chromium.launch({
  executablePath: env('HEARTH_CHROMIUM'),
  // rebind.test resolves to 127.0.0.1, as an attacker's name does after DNS rebinding.
  args: ['--no-sandbox', '--host-resolver-rules=MAP rebind.test 127.0.0.1'],
});
let failed = false;
try {
  const page = await browser.newPage();

  const before = await jobCount();
  await page.goto(elsewhere);
  const sent = await page.evaluate(
    async ({ url, body }) => {
      try {
        // A simple request: the browser sends it without asking (no preflight).
        await fetch(url, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body });
        return 'answered';
      } catch (e) {
        return String(e); // the answer is not the page's to read (no CORS header) either way
      }
    },
    {
      url: `${gateway}/v1/completions`,
      body: JSON.stringify({ model, prompt: 'from another origin', max_tokens: 1 }),
    },
  );
  assert.match(sent, /TypeError/);
  const noCors = await page.evaluate(async (url) => {
    await fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: '{}' });
    return 'sent';
  }, `${gateway}/v1/hearth/jobs/1/cancel`);
  assert.equal(noCors, 'sent');
  assert.equal(await jobCount(), before, 'the page of another origin made no job');
  console.log(`ok - a page of ${elsewhere} made no job through ${gateway}`);

  // DNS rebinding: the page's origin is rebind.test, and so is the Host it sends.
  const rebound = await page.goto(`http://rebind.test:${port}/v1/models`);
  assert.equal(rebound.status(), 403);
  assert.match(await rebound.text(), /host_not_allowed/);
  const models = await page.evaluate(async () => (await fetch('/v1/hearth/jobs')).status);
  assert.equal(models, 403);
  console.log('ok - a rebound name gets 403, its same-origin requests too');

  // The gateway's own origin: the dashboard and its requests.
  const own = await page.goto(`${gateway}/dashboard/`);
  assert.equal(own.status(), 200);
  const fromDashboard = await page.evaluate(async (m) => {
    const r = await fetch('/v1/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: m, prompt: 'from the dashboard', max_tokens: 1 }),
    });
    return r.status;
  }, model);
  assert.equal(fromDashboard, 200);
  assert.equal(await jobCount(), before + 1, 'the dashboard made its job');
  console.log('ok - the dashboard, of the gateway\'s own origin, makes a job');
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  await browser.close();
  site.close();
}
process.exit(failed ? 1 : 0);
