// The Prometheus text format (exposition format 0.0.4) as the gateway's GET /metrics writes it,
// read just enough to sum a metric's samples: `name{label="v",...} value [timestamp]` lines,
// `#` lines skipped. Label values may hold escaped quotes, so they are scanned, not split.

// Parses `text` into [{name, labels, value}]; lines that do not parse are skipped.
export function parseMetrics(text) {
  const samples = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
    if (!m) continue;
    const name = m[1];
    let i = name.length;
    const labels = {};
    if (line[i] === '{') {
      i++;
      let ok = false;
      while (i < line.length) {
        while (line[i] === ' ' || line[i] === ',') i++;
        if (line[i] === '}') {
          i++;
          ok = true;
          break;
        }
        const lm = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
        if (!lm) break;
        i += lm[0].length;
        let value = '';
        while (i < line.length && line[i] !== '"') {
          if (line[i] === '\\' && i + 1 < line.length) {
            const c = line[i + 1];
            value += c === 'n' ? '\n' : c;
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (line[i] !== '"') break;
        i++;
        labels[lm[1]] = value;
      }
      if (!ok) continue;
    }
    const rest = line.slice(i).trim().split(/\s+/);
    const value = parseValue(rest[0]);
    if (value === undefined) continue;
    samples.push({ name, labels, value });
  }
  return samples;
}

function parseValue(s) {
  if (s === undefined || s === '') return undefined;
  if (s === '+Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  const v = Number(s);
  return Number.isNaN(v) ? undefined : v;
}

// The sum of every sample of `name` (null when there is none).
export function sumOf(samples, name) {
  let total = null;
  for (const s of samples) {
    if (s.name === name && Number.isFinite(s.value)) total = (total ?? 0) + s.value;
  }
  return total;
}

// The per-second rate of a counter between two readings; a counter that went down was reset
// (the gateway or broker restarted), and its new value counts from zero.
export function counterRate(prev, cur, seconds) {
  if (prev == null || cur == null || !(seconds > 0)) return null;
  const delta = cur >= prev ? cur - prev : cur;
  return delta / seconds;
}
