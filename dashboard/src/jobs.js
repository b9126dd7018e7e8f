// Jobs: the caller's running and queued jobs (live, with a running job's tokens as they arrive),
// the history with its filters, and one job's detail (attempts, events, timings, prompt, output).
import { useEffect, useState } from 'preact/hooks';

import { cancelJob, getJSON, streamJSON } from './api.js';
import { clock, dateTime, duration } from './format.js';
import { html } from './html.js';
import { callText, outputEventsOf } from './output-events.js';

const states = ['', 'queued', 'running', 'completed', 'failed', 'cancelled'];

function CancelButton({ id, onDone }) {
  const [busy, setBusy] = useState(false);
  async function click(e) {
    e.stopPropagation();
    setBusy(true);
    try {
      await cancelJob(id);
      onDone?.(null);
    } catch (err) {
      onDone?.(err.message);
    } finally {
      setBusy(false);
    }
  }
  return html`<button class="danger" data-testid="cancel" disabled=${busy} onClick=${click}>
    cancel
  </button>`;
}

// A job's tokens as they arrive (GET /v1/hearth/jobs/{id}/events): its latest attempt from the start.
function TokenStream({ id }) {
  const [text, setText] = useState('');
  const [status, setStatus] = useState('connecting…');
  useEffect(() => {
    const abort = new AbortController();
    setText('');
    streamJSON(
      `/v1/hearth/jobs/${id}/events`,
      (e) => {
        if (e.type === 'tokens') setText((t) => t + e.text);
        else if (e.type === 'restarted') {
          setText('');
          setStatus(`attempt ${e.attempt} (restarted: ${e.reason})`);
        } else if (e.type === 'queued') setStatus(`queued, position ${e.position}`);
        else if (e.type === 'running') setStatus(`running on ${e.node} (attempt ${e.attempt})`);
        else if (e.type === 'done') setStatus(`${e.state}${e.stop_reason ? ` (${e.stop_reason})` : ''}${e.error ? `: ${e.error}` : ''}`);
        else if (e.type === 'error') setStatus(`error: ${e.error.message}`);
      },
      { signal: abort.signal },
    ).catch((err) => {
      if (err.name !== 'AbortError') setStatus(`error: ${err.message}`);
    });
    return () => abort.abort();
  }, [id]);
  return html`<div class="stream" data-testid="token-stream">
    <div class="muted" data-testid="stream-status">${status}</div>
    <pre>${text}</pre>
  </div>`;
}

function JobRows({ jobs, now, watched, setWatched, onCancel }) {
  return jobs.map((j) => {
    const open = watched === j.job_id;
    return html`
      <tr data-testid="active-job" data-job=${j.job_id} data-state=${j.state}
          class="clickable" onClick=${() => setWatched(open ? null : j.job_id)}>
        <td>${open ? '▾' : '▸'} ${j.job_id}</td><td>${j.model}</td>
        <td><span class=${`state ${j.state}`}>${j.state}</span></td>
        <td>${j.node || '–'}</td>
        <td>${duration(now - (j.started_ms || j.created_ms))}</td>
        <td class="num">${j.n_gen}</td>
        <td><${CancelButton} id=${j.job_id} onDone=${onCancel} /></td>
      </tr>`;
  });
}

export function ActiveJobs({ snapshot }) {
  const [watched, setWatched] = useState(null);
  const [message, setMessage] = useState(null);
  const jobs = [...(snapshot?.running ?? []), ...(snapshot?.queued ?? [])];
  const now = snapshot?.time_ms ?? Date.now();
  const onCancel = (err) => setMessage(err ? `cancel failed: ${err}` : 'cancel sent');
  // The watched job's stream sits below the table, not in its row: the row goes with the next
  // snapshot once the job ends, which can come before the stream's own `done` event, and the
  // stream has to stay to show how the job ended and its whole text.
  const gone = watched != null && !jobs.some((j) => j.job_id === watched);
  return html`<section class="panel" id="active">
    <h2>Running and queued jobs <span class="muted">${snapshot?.caller?.admin ? 'every owner' : 'yours'}</span></h2>
    ${message ? html`<p class="note" data-testid="active-message">${message}</p>` : null}
    ${jobs.length === 0
      ? html`<p class="muted">None right now.</p>`
      : html`<table>
          <thead><tr><th>job</th><th>model</th><th>state</th><th>node</th><th>for</th><th>tokens</th><th></th></tr></thead>
          <tbody><${JobRows} jobs=${jobs} now=${now} watched=${watched} setWatched=${setWatched} onCancel=${onCancel} /></tbody>
        </table>`}
    ${watched != null
      ? html`<div data-testid="watched-job" data-job=${watched}>
          <h3>Job ${watched}${gone ? html` <span class="muted">(no longer running)</span>` : null}
            <button data-testid="watched-close" onClick=${() => setWatched(null)}>close</button></h3>
          <${TokenStream} key=${watched} id=${watched} />
        </div>`
      : null}
  </section>`;
}

// The attempts of a job from its events: node, first and last event time, how it ended.
function attemptsOf(events) {
  const byAttempt = new Map();
  for (const e of events) {
    if (!e.attempt) continue;
    const a = byAttempt.get(e.attempt) ?? { attempt: e.attempt, node: '', start: e.time_ms, end: e.time_ms, last: e };
    if (e.node) a.node = e.node;
    a.end = e.time_ms;
    a.last = e;
    byAttempt.set(e.attempt, a);
  }
  return [...byAttempt.values()].sort((a, b) => a.attempt - b.attempt);
}

// Queue wait (created to the first assignment), time to the node's `started` event (the prompt
// read, the first token next), duration of the generation and its rate.
function timings(job) {
  const s = job.summary;
  const first = (name) => job.events.find((e) => e.event === name)?.time_ms;
  const assigned = first('assigned') ?? s.started_ms;
  const started = first('started');
  const end = s.finished_ms || null;
  const genMs = end && s.started_ms ? end - s.started_ms : null;
  return [
    ['queue wait', assigned ? duration(assigned - s.created_ms) : '–'],
    ['to started (prompt read)', started ? duration(started - s.created_ms) : '–'],
    ['duration', genMs != null ? duration(genMs) : '–'],
    ['total', end ? duration(end - s.created_ms) : '–'],
    ['tokens', `${s.n_prompt} prompt, ${s.n_gen} generated`],
    ['rate', genMs ? `${((s.n_gen * 1000) / genMs).toFixed(1)} tokens/s` : '–'],
  ];
}

// An events job's output (api.events): per choice its reasoning (folded), answer, tool calls and
// how it ended.
function EventsOutput({ text }) {
  const { choices, error } = outputEventsOf(text);
  const several = choices.length > 1;
  return html`<div data-testid="detail-output-events">
    ${choices.map(
      (c) => html`<div class="choice" data-choice=${c.i}>
        ${several ? html`<h4>choice ${c.i}</h4>` : null}
        ${c.reasoning ? html`<details><summary>reasoning</summary><pre class="muted">${c.reasoning}</pre></details>` : null}
        ${c.content ? html`<pre data-testid="choice-output">${c.content}</pre>` : null}
        ${c.calls.map((k) => html`<pre data-testid="tool-call">tool call: ${callText(k)}</pre>`)}
        <p class="muted">${c.finish ? `finish: ${c.finish}` : 'not finished'}${c.tokens ? ` · logprobs of ${c.tokens} tokens` : ''}</p>
      </div>`,
    )}
    ${error ? html`<p class="error">${error}</p>` : null}
  </div>`;
}

export function JobDetail({ id, onClose }) {
  const [job, setJob] = useState(null);
  const [error, setError] = useState(null);
  const [message, setMessage] = useState(null);
  const [reload, setReload] = useState(0);
  useEffect(() => {
    setError(null);
    getJSON(`/v1/hearth/jobs/${id}`).then(setJob, (e) => setError(e.message));
  }, [id, reload]);
  if (error) return html`<section class="panel" data-testid="job-detail"><p class="error">${error}</p></section>`;
  if (!job) return html`<section class="panel" data-testid="job-detail"><p class="muted">Loading job ${id}…</p></section>`;
  const s = job.summary;
  const active = s.state === 'queued' || s.state === 'running';
  return html`<section class="panel" data-testid="job-detail" data-job=${s.job_id} data-state=${s.state}>
    <h2>Job ${s.job_id} <span class=${`state ${s.state}`} data-testid="detail-state">${s.state}</span>
      <button onClick=${() => setReload((n) => n + 1)}>reload</button>
      ${active ? html`<${CancelButton} id=${s.job_id} onDone=${(e) => { setMessage(e ? `cancel failed: ${e}` : 'cancel sent'); setReload((n) => n + 1); }} />` : null}
      <button onClick=${onClose}>close</button></h2>
    ${message ? html`<p class="note">${message}</p>` : null}
    <dl class="facts">
      <dt>model</dt><dd>${s.model}</dd>
      <dt>owner</dt><dd>${s.owner || '–'}</dd>
      <dt>priority</dt><dd>${s.priority}</dd>
      <dt>created</dt><dd>${dateTime(s.created_ms)}</dd>
      <dt>stop</dt><dd>${s.stop_reason || '–'}${s.error ? html` <span class="error">${s.error}</span>` : null}</dd>
      ${timings(job).map(([k, v]) => html`<dt>${k}</dt><dd data-timing=${k}>${v}</dd>`)}
    </dl>
    <h3>Attempts (${s.attempts})</h3>
    <table data-testid="attempts">
      <thead><tr><th>attempt</th><th>node</th><th>from</th><th>to</th><th>last event</th></tr></thead>
      <tbody>
        ${attemptsOf(job.events).map(
          (a) => html`<tr data-testid="attempt"><td>${a.attempt}</td><td>${a.node || '–'}</td>
            <td>${clock(a.start)}</td><td>${clock(a.end)}</td>
            <td>${a.last.event}${a.last.detail ? `: ${a.last.detail}` : ''}</td></tr>`,
        )}
      </tbody>
    </table>
    <h3>Events</h3>
    <table data-testid="events">
      <thead><tr><th>time</th><th>+</th><th>event</th><th>attempt</th><th>node</th><th>detail</th></tr></thead>
      <tbody>
        ${job.events.map(
          (e) => html`<tr data-testid="event"><td>${clock(e.time_ms)}</td>
            <td>${duration(e.time_ms - s.created_ms)}</td><td>${e.event}</td><td>${e.attempt || '–'}</td>
            <td>${e.node || '–'}</td><td>${e.detail}</td></tr>`,
        )}
      </tbody>
    </table>
    <h3>Prompt</h3>
    ${job.messages?.length
      ? html`<ul class="plain">${job.messages.map((m) => html`<li><b>${m.role}${m.name ? ` ${m.name}` : ''}${m.tool_call_id ? ` (answers ${m.tool_call_id})` : ''}:</b>
          ${m.reasoning_content ? html`<pre class="inline muted">${m.reasoning_content}</pre>` : null}
          <pre class="inline">${m.content}</pre>
          ${(m.tool_calls || []).map((c) => html`<pre class="inline" data-testid="message-tool-call">tool call: ${callText(c)}</pre>`)}</li>`)}</ul>`
      : html`<pre data-testid="detail-prompt">${job.prompt}</pre>`}
    <h3>Output ${job.output_truncated ? html`<span class="muted">(first ${job.output.length} bytes of ${job.output_bytes})</span>` : null}</h3>
    ${job.params?.api?.events
      ? html`<${EventsOutput} text=${job.output} />`
      : html`<pre data-testid="detail-output">${job.output}</pre>`}
  </section>`;
}

export function History({ models, refreshKey }) {
  const [filters, setFilters] = useState({ state: '', model: '', limit: 20 });
  const [jobs, setJobs] = useState([]);
  const [error, setError] = useState(null);
  const [selected, setSelected] = useState(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const q = new URLSearchParams();
    if (filters.state) q.set('state', filters.state);
    if (filters.model) q.set('model', filters.model);
    q.set('limit', String(filters.limit));
    getJSON(`/v1/hearth/jobs?${q}`).then(
      (r) => {
        setJobs(r.data);
        setError(null);
      },
      (e) => setError(e.message),
    );
  }, [filters, tick, refreshKey]);
  const set = (k) => (e) => setFilters({ ...filters, [k]: k === 'limit' ? Number(e.target.value) || 20 : e.target.value });
  return html`<section class="panel" id="history">
    <h2>History</h2>
    <form class="filters" onSubmit=${(e) => { e.preventDefault(); setTick((t) => t + 1); }}>
      <label>state <select data-testid="filter-state" value=${filters.state} onChange=${set('state')}>
        ${states.map((s) => html`<option value=${s}>${s || 'any'}</option>`)}
      </select></label>
      <label>model <select data-testid="filter-model" value=${filters.model} onChange=${set('model')}>
        <option value="">any</option>
        ${models.map((m) => html`<option value=${m}>${m}</option>`)}
      </select></label>
      <label>limit <input type="number" min="1" max="10000" value=${filters.limit} onChange=${set('limit')} /></label>
      <button type="submit" data-testid="history-refresh">refresh</button>
    </form>
    ${error ? html`<p class="error">${error}</p>` : null}
    <table data-testid="history">
      <thead><tr><th>job</th><th>model</th><th>state</th><th>node</th><th>attempts</th><th>created</th><th>duration</th><th>tokens</th><th>owner</th></tr></thead>
      <tbody>
        ${jobs.map(
          (j) => html`<tr data-testid="history-job" data-job=${j.job_id} data-state=${j.state}
              class=${selected === j.job_id ? 'clickable selected' : 'clickable'} onClick=${() => setSelected(j.job_id)}>
            <td>${j.job_id}</td><td>${j.model}</td><td><span class=${`state ${j.state}`}>${j.state}</span></td>
            <td>${j.node || '–'}</td><td class="num">${j.attempts}</td><td>${dateTime(j.created_ms)}</td>
            <td>${j.finished_ms && j.started_ms ? duration(j.finished_ms - j.started_ms) : '–'}</td>
            <td class="num">${j.n_gen}</td><td>${j.owner || '–'}</td></tr>`,
        )}
      </tbody>
    </table>
    ${selected ? html`<${JobDetail} id=${selected} onClose=${() => setSelected(null)} />` : null}
  </section>`;
}
