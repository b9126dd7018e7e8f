// hearth's dashboard: one page over the gateway's own API. Live data (nodes, queues, the
// caller's jobs) comes from GET /v1/hearth/live, a stream of snapshots; the rest is asked for when
// shown. Every request carries the API key the page was given (api.js).
import 'uplot/dist/uPlot.min.css';
import './style.css';

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';

import { apiKey, getJSON, setApiKey, streamJSON } from './api.js';
import { Charts } from './charts.js';
import { html } from './html.js';
import { ActiveJobs, History } from './jobs.js';
import { Nodes, Queues } from './nodes.js';
import { Submit } from './submit.js';
import { Transfers } from './transfers.js';

const retryMs = 2000;

function KeyBar({ live, onKey }) {
  const [draft, setDraft] = useState('');
  const has = !!apiKey();
  return html`<header class="top">
    <h1>hearth</h1>
    <span class=${`live ${live.ok ? 'ok' : 'down'}`} data-testid="live-status">${live.text}</span>
    <form class="key" onSubmit=${(e) => { e.preventDefault(); setApiKey(draft.trim()); setDraft(''); onKey(); }}>
      <input type="password" data-testid="api-key" placeholder=${has ? 'API key saved' : 'API key (hk_…)'}
        value=${draft} onInput=${(e) => setDraft(e.target.value)} autocomplete="off" />
      <button type="submit" data-testid="api-key-save">use key</button>
      ${has ? html`<button type="button" onClick=${() => { setApiKey(''); onKey(); }}>forget key</button>` : null}
    </form>
  </header>`;
}

function App() {
  const [snapshot, setSnapshot] = useState(null);
  const [live, setLive] = useState({ ok: false, text: 'connecting…' });
  const [keyEpoch, setKeyEpoch] = useState(0);
  const [models, setModels] = useState([]);
  const [historyEpoch, setHistoryEpoch] = useState(0);

  // The live stream, reconnected after a failure (the gateway or broker restarting).
  useEffect(() => {
    let stopped = false;
    let abort = new AbortController();
    async function connect() {
      while (!stopped) {
        abort = new AbortController();
        try {
          await streamJSON(
            '/v1/hearth/live',
            (s) => {
              if (s.type !== 'snapshot') return;
              setSnapshot(s);
              setLive(s.errors.length
                ? { ok: false, text: `live, with errors: ${s.errors.map((e) => e.message).join('; ')}` }
                : { ok: true, text: `live${s.caller.name ? ` as ${s.caller.name}` : ''}${s.caller.admin ? ' (admin)' : ''}` });
            },
            { signal: abort.signal },
          );
          if (!stopped) setLive({ ok: false, text: 'live stream ended; reconnecting…' });
        } catch (e) {
          if (stopped) return;
          const hint = e.status === 401 ? ' — enter an API key above' : '';
          setLive({ ok: false, text: `${e.message}${hint}` });
        }
        await new Promise((r) => setTimeout(r, retryMs));
      }
    }
    connect();
    return () => {
      stopped = true;
      abort.abort();
    };
  }, [keyEpoch]);

  // The models a prompt can go to (/v1/models), again when the live list of models changes.
  const liveModels = (snapshot?.models ?? []).map((m) => m.model).join(',');
  useEffect(() => {
    getJSON('/v1/models').then(
      (r) => setModels(r.data.map((m) => m.id)),
      () => setModels([]),
    );
  }, [keyEpoch, liveModels]);

  // The history is read again when a job starts or ends (the live lists change), and after a submit.
  const activeIds = [...(snapshot?.running ?? []), ...(snapshot?.queued ?? [])]
    .map((j) => `${j.job_id}:${j.state}`)
    .join(',');

  return html`<${KeyBar} live=${live} onKey=${() => setKeyEpoch((n) => n + 1)} />
    <main key=${keyEpoch}>
      <${Nodes} snapshot=${snapshot} />
      <${Transfers} snapshot=${snapshot} />
      <div class="row">
        <${Queues} snapshot=${snapshot} />
        <${Charts} />
      </div>
      <${Submit} models=${models} onSubmitted=${() => setHistoryEpoch((n) => n + 1)} />
      <${ActiveJobs} snapshot=${snapshot} />
      <${History} models=${models} refreshKey=${`${historyEpoch}/${activeIds}`} />
    </main>`;
}

const root = document.getElementById('app');
root.textContent = ''; // the "Loading" line that shows until the script runs
render(html`<${App} />`, root);
