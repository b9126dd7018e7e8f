// Why a node gets no jobs and until when, from its node_summary (quarantined_until_ms, losses):
// plain data for the nodes panel (quarantine.test.js: `node --test`).
import { clock, duration } from './format.js';

// null when the node is not quarantined at `now`; else when it ends, how long that is, and the
// attempts it lost last (newest first), each as one line.
export function quarantineOf(node, now) {
  const until = node?.quarantined_until_ms ?? 0;
  if (until <= now) return null;
  const losses = [...(node.losses ?? [])].reverse().map((l) => ({
    at: clock(l.time_ms),
    text: `job ${l.job_id} attempt ${l.attempt}: ${l.reason}`,
  }));
  return { until: clock(until), left: duration(until - now), losses };
}
