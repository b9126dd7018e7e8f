// Models moving onto nodes (pulls from the internet, copies between nodes: schema/PROTOCOL.md
// section 16) with their progress, from the live snapshot's `transfers`: running ones, then the
// last finished.
import { html } from './html.js';
import { progressOf, transferOver } from './transfer-progress.js';

export function Transfers({ snapshot }) {
  const transfers = snapshot?.transfers ?? [];
  if (!transfers.length) return null;
  const now = snapshot?.time_ms ?? Date.now();
  return html`<section class="panel" id="transfers">
    <h2>Transfers <span class="muted">${transfers.filter((t) => !transferOver(t)).length} running</span></h2>
    <table>
      <thead><tr><th>model</th><th>onto</th><th>from</th><th>state</th><th>progress</th></tr></thead>
      <tbody>
        ${transfers.map((t) => {
          const p = progressOf(t, now);
          return html`<tr data-testid="transfer" data-transfer=${t.transfer_id} data-state=${t.state}>
            <td>${t.model}</td>
            <td>${t.node}</td>
            <td>${t.source}</td>
            <td><span class=${`state ${t.state === 'failed' ? 'offline' : 'online'}`}>${t.state}</span>
              ${t.error ? html`<br /><span class="muted">${t.error}</span>` : null}</td>
            <td>${p.percent != null && !transferOver(t)
              ? html`<progress max="100" value=${p.percent}></progress> `
              : null}${p.text}</td>
          </tr>`;
        })}
      </tbody>
    </table>
  </section>`;
}
