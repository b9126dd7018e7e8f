// How times, durations and sizes read on the page.

export function bytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(i && v < 10 ? 1 : 0)} ${units[i]}`;
}

export function duration(ms) {
  if (ms == null || !Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

export function ago(ms, now) {
  if (!ms) return 'never';
  return `${duration(Math.max(0, now - ms))} ago`;
}

export function clock(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  return `${d.toLocaleTimeString([], { hour12: false })}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

export function dateTime(ms) {
  if (!ms) return '–';
  return `${new Date(ms).toLocaleDateString()} ${clock(ms)}`;
}
