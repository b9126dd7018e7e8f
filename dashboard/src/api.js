// The gateway's HTTP API as the page uses it: the API key (kept in localStorage, sent as
// `Authorization: Bearer KEY` on every request), JSON requests with the gateway's OpenAI-shaped
// errors turned into exceptions, and Server-Sent Events read from a fetch body (EventSource
// cannot send the header).

const keyName = 'hearth.apiKey';

export function apiKey() {
  try {
    return localStorage.getItem(keyName) || '';
  } catch {
    return '';
  }
}

export function setApiKey(key) {
  if (key) localStorage.setItem(keyName, key);
  else localStorage.removeItem(keyName);
}

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra = {}) {
  const h = { ...extra };
  const key = apiKey();
  if (key) h.Authorization = `Bearer ${key}`;
  return h;
}

// An error response as an ApiError with the gateway's message.
async function failure(r) {
  let message = `${r.status} ${r.statusText}`;
  let code;
  try {
    const j = await r.json();
    if (j.error) {
      message = `${r.status}: ${j.error.message}`;
      code = j.error.code;
    }
  } catch {
    /* not JSON: the status line says it */
  }
  return new ApiError(r.status, message, code);
}

export async function request(path, { method = 'GET', body, signal } = {}) {
  const init = { method, signal, headers: headers() };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  return r;
}

export async function getJSON(path, opts) {
  return (await request(path, opts)).json();
}

// Reads a text/event-stream response, calling onData with each event's data (the joined `data:`
// lines); comments (keep-alives) are skipped. Resolves when the stream ends.
export async function readEvents(response, onData) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data) onData(data);
    }
  }
}

// GET `path` as Server-Sent Events of JSON, onEvent for each; resolves when the stream ends and
// rejects with an ApiError when the gateway refuses it.
export async function streamJSON(path, onEvent, { method = 'GET', body, signal } = {}) {
  const r = await request(path, { method, body, signal });
  await readEvents(r, (data) => {
    if (data === '[DONE]') return;
    onEvent(JSON.parse(data));
  });
}

export function cancelJob(id) {
  return getJSON(`/v1/hearth/jobs/${encodeURIComponent(id)}/cancel`, { method: 'POST' });
}
