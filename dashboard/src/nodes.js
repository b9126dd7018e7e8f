// The nodes (state, last seen, slots in use, hardware, devices, models) and each model's queue,
// from the live snapshot.
import { ago, bytes } from './format.js';
import { html } from './html.js';
import { quarantineOf } from './quarantine.js';

// A quarantined node: until when, and the attempts it lost (`hearth nodes release` ends it).
function Quarantine({ node, now }) {
  const q = quarantineOf(node, now);
  if (!q) return null;
  return html`<div class="quarantine" data-testid="quarantine">
    until ${q.until} <span class="muted">(${q.left} more)</span>
    ${q.losses.length
      ? html`<ul class="plain muted">
          ${q.losses.map((l) => html`<li>${l.at} ${l.text}</li>`)}
        </ul>`
      : null}
  </div>`;
}

function Devices({ gpus }) {
  if (!gpus || !gpus.length) return html`<span class="muted">CPU only</span>`;
  return html`<ul class="plain">
    ${gpus.map(
      (g) => html`<li>
        ${g.name} <span class="tag">${g.backend}</span>
        ${bytes(g.memory_free)} free of ${bytes(g.memory_total)}
      </li>`,
    )}
  </ul>`;
}

function Models({ models }) {
  if (!models.length) return html`<span class="muted">none</span>`;
  return html`<ul class="plain">
    ${models.map(
      (m) => html`<li data-model=${m.name}>
        ${m.name} <span class=${m.loaded ? 'tag ok' : 'tag'}>${m.loaded ? 'loaded' : 'not loaded'}</span>
      </li>`,
    )}
  </ul>`;
}

export function Nodes({ snapshot }) {
  const nodes = snapshot?.nodes ?? [];
  const now = snapshot?.time_ms ?? Date.now();
  return html`<section class="panel" id="nodes">
    <h2>Nodes <span class="muted">${nodes.filter((n) => n.state === 'online').length} of ${nodes.length} online</span></h2>
    ${nodes.length === 0
      ? html`<p class="muted">${snapshot ? 'No node has joined the broker yet.' : 'Waiting for live data…'}</p>`
      : html`<table>
          <thead>
            <tr>
              <th>node</th><th>state</th><th>last seen</th><th>slots busy</th><th>hardware</th>
              <th>devices</th><th>models</th>
            </tr>
          </thead>
          <tbody>
            ${nodes.map(
              (n) => html`<tr data-testid="node" data-node=${n.name} data-state=${n.state}>
                <td><b>${n.name}</b><br /><span class="muted">${n.hostname} · ${n.engine}</span></td>
                <td><span class=${`state ${n.state}`}>${n.state}</span>
                  ${n.lost ? html`<br /><span class="muted">${n.lost} lost</span>` : null}
                  <${Quarantine} node=${n} now=${now} /></td>
                <td>${ago(n.last_seen_ms, now)}</td>
                <td>${n.running} / ${n.slots}</td>
                <td>${n.hardware.cpu_model}<br />
                  <span class="muted">${n.hardware.cpu_threads} threads ·
                  ${bytes(n.hardware.memory_available)} free of ${bytes(n.hardware.memory_total)}</span></td>
                <td><${Devices} gpus=${n.hardware.gpus} /></td>
                <td><${Models} models=${n.models} /></td>
              </tr>`,
            )}
          </tbody>
        </table>`}
  </section>`;
}

export function Queues({ snapshot }) {
  const models = snapshot?.models ?? [];
  return html`<section class="panel" id="queues">
    <h2>Queue per model</h2>
    ${models.length === 0
      ? html`<p class="muted">No models.</p>`
      : html`<table>
          <thead><tr><th>model</th><th>queued</th><th>nodes</th><th>loaded on</th></tr></thead>
          <tbody>
            ${models.map(
              (m) => html`<tr data-testid="queue" data-model=${m.model}>
                <td>${m.model}</td>
                <td class="num" data-testid="queued">${m.queued}</td>
                <td>${m.nodes.join(', ') || html`<span class="muted">no online node</span>`}</td>
                <td>${m.loaded_on.join(', ') || '–'}</td>
              </tr>`,
            )}
          </tbody>
        </table>`}
  </section>`;
}
