// A prompt submitted from the page: POST /v1/completions with stream: true, the SSE chunks read
// from the fetch body as they come. The job id is in the chunks' id (cmpl-42). Stopping the read
// closes the connection, which makes the gateway cancel the job.
import { useRef, useState } from 'preact/hooks';

import { streamJSON } from './api.js';
import { duration } from './format.js';
import { html } from './html.js';

export function Submit({ models, onSubmitted }) {
  const [model, setModel] = useState('');
  const [prompt, setPrompt] = useState('Once upon a time');
  const [maxTokens, setMaxTokens] = useState(64);
  const [temperature, setTemperature] = useState(0);
  const [text, setText] = useState('');
  const [status, setStatus] = useState('');
  const [jobId, setJobId] = useState(null);
  const [busy, setBusy] = useState(false);
  const abort = useRef(null);
  const chosen = model || models[0] || '';

  async function submit(e) {
    e.preventDefault();
    if (!chosen) return setStatus('no model to submit to');
    const controller = new AbortController();
    abort.current = controller;
    setBusy(true);
    setText('');
    setJobId(null);
    setStatus('submitting…');
    const t0 = performance.now();
    let first = null;
    let finish = null;
    let tokens = 0;
    let id = null;
    try {
      await streamJSON(
        '/v1/completions',
        (chunk) => {
          if (chunk.error) throw new Error(chunk.error.message);
          const m = /^(?:cmpl|chatcmpl)-(\d+)$/.exec(chunk.id ?? '');
          if (m && id == null) {
            id = Number(m[1]);
            setJobId(id);
            onSubmitted?.();
          }
          for (const c of chunk.choices ?? []) {
            if (c.text) {
              if (first == null) first = performance.now() - t0;
              tokens++;
              setText((t) => t + c.text);
              setStatus(`streaming… first token after ${duration(first)}`);
            }
            if (c.finish_reason) finish = c.finish_reason;
          }
        },
        {
          method: 'POST',
          body: { model: chosen, prompt, max_tokens: maxTokens, temperature, stream: true },
          signal: controller.signal,
        },
      );
      setStatus(`done (${finish ?? 'no finish reason'}): ${tokens} chunks, first token after ${duration(first)}, ${duration(performance.now() - t0)} in all`);
    } catch (err) {
      setStatus(err.name === 'AbortError' ? 'stopped (the job is cancelled)' : `error: ${err.message}`);
    } finally {
      setBusy(false);
      onSubmitted?.();
    }
  }

  return html`<section class="panel" id="submit">
    <h2>Submit</h2>
    <form class="submit" onSubmit=${submit}>
      <label>model <select data-testid="submit-model" value=${chosen} onChange=${(e) => setModel(e.target.value)}>
        ${models.map((m) => html`<option value=${m}>${m}</option>`)}
      </select></label>
      <label>max tokens <input data-testid="submit-max-tokens" type="number" min="1" value=${maxTokens}
        onChange=${(e) => setMaxTokens(Number(e.target.value))} /></label>
      <label>temperature <input data-testid="submit-temperature" type="number" min="0" max="2" step="0.1"
        value=${temperature} onChange=${(e) => setTemperature(Number(e.target.value))} /></label>
      <textarea data-testid="submit-prompt" rows="3" value=${prompt} onInput=${(e) => setPrompt(e.target.value)}></textarea>
      <div>
        <button type="submit" data-testid="submit-go" disabled=${busy || !chosen}>submit</button>
        <button type="button" disabled=${!busy} onClick=${() => abort.current?.abort()}>stop</button>
        ${jobId != null ? html` job <b data-testid="submit-job">${jobId}</b>` : null}
      </div>
    </form>
    <div class="muted" data-testid="submit-status">${status}</div>
    <pre class="output" data-testid="submit-output">${text}</pre>
  </section>`;
}
