// What the transfers panel says of a transfer's progress (transfer-progress.test.js: node --test):
// how much of how much, and the rate since the broker sent it while it is not over.
import { bytes } from './format.js';

export function transferOver(t) {
  return t.state === 'done' || t.state === 'failed';
}

// {text, percent}: "1.5 KiB of 4.0 KiB · 512 B/s" and 37.5; percent null while the size is unknown
// (a pull that has not resolved its source).
export function progressOf(t, now) {
  if (!t.bytes_total) return { text: bytes(t.bytes_done), percent: null };
  let text = `${bytes(t.bytes_done)} of ${bytes(t.bytes_total)}`;
  const seconds = (now - t.started_ms) / 1000;
  if (!transferOver(t) && seconds > 0 && t.bytes_done > 0) {
    text += ` · ${bytes(t.bytes_done / seconds)}/s`;
  }
  return { text, percent: (100 * t.bytes_done) / t.bytes_total };
}
