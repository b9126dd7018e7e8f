// Throughput (tokens/s, the rate of sum(hearth_tokens_generated_total)) and queue depth
// (sum(hearth_queue_depth)) over the last minutes, from GET /metrics every 2 s, drawn by uPlot.
// A gateway without /metrics (404), or whose broker does not answer, says "metrics unavailable".
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';

import { request } from './api.js';
import { html } from './html.js';
import { counterRate, parseMetrics, sumOf } from './metrics.js';

const periodMs = 2000;
const keep = 150; // points: 5 minutes

function Plot({ title, unit, xs, ys, testid }) {
  const box = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const opts = {
      width: 420,
      height: 150,
      legend: { show: false },
      scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
      axes: [{ stroke: '#888' }, { stroke: '#888', size: 50 }],
      series: [{}, { label: title, stroke: '#3a7bd5', width: 2, fill: 'rgba(58,123,213,0.15)' }],
    };
    plot.current = new uPlot(opts, [[], []], box.current);
    return () => plot.current.destroy();
  }, []);
  useEffect(() => {
    plot.current?.setData([xs, ys]);
  }, [xs, ys]);
  const last = ys.length ? ys[ys.length - 1] : null;
  return html`<figure class="plot" data-testid=${testid}>
    <figcaption>${title}: <b>${last == null ? '–' : `${last.toFixed(1)} ${unit}`}</b></figcaption>
    <div ref=${box}></div>
  </figure>`;
}

export function Charts() {
  const [series, setSeries] = useState({ xs: [], tps: [], depth: [] });
  const [error, setError] = useState(null);
  const prev = useRef(null);
  useEffect(() => {
    let stopped = false;
    async function sample() {
      try {
        const r = await request('/metrics');
        const samples = parseMetrics(await r.text());
        // hearth_gateway_broker_up is on every page the gateway serves; the job series appear
        // once there are jobs, so until then they count as 0.
        const up = sumOf(samples, 'hearth_gateway_broker_up');
        if (up == null) throw new Error('GET /metrics is not hearth-gateway\'s');
        if (up === 0) throw new Error('the broker did not answer the gateway');
        const tokens = sumOf(samples, 'hearth_tokens_generated_total') ?? 0;
        const depth = sumOf(samples, 'hearth_queue_depth') ?? 0;
        const now = Date.now();
        const p = prev.current;
        const rate = p ? counterRate(p.tokens, tokens, (now - p.time) / 1000) : null;
        prev.current = { time: now, tokens };
        if (!stopped) {
          setError(null);
          setSeries((s) => ({
            xs: [...s.xs, now / 1000].slice(-keep),
            tps: [...s.tps, rate].slice(-keep),
            depth: [...s.depth, depth].slice(-keep),
          }));
        }
      } catch (e) {
        prev.current = null;
        if (!stopped) setError(e.message);
      }
    }
    sample();
    const t = setInterval(sample, periodMs);
    return () => {
      stopped = true;
      clearInterval(t);
    };
  }, []);
  return html`<section class="panel" id="charts">
    <h2>Throughput and queue</h2>
    ${error
      ? html`<p class="muted" data-testid="metrics-unavailable">metrics unavailable (${error})</p>`
      : html`<div class="plots">
          <${Plot} title="tokens/s" unit="tok/s" xs=${series.xs} ys=${series.tps} testid="plot-tps" />
          <${Plot} title="queue depth" unit="jobs" xs=${series.xs} ys=${series.depth} testid="plot-queue" />
        </div>`}
  </section>`;
}
