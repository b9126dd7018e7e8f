// A job's output events (schema/output-events.h, PROTOCOL.md 10.8) as the job detail shows them
// (output-events.test.js: node --test): one entry per choice with its answer, its reasoning, its
// tool calls and how it ended. The output may be a page cut anywhere: a line not yet ended is
// left out, and a line that is not an event stops the reading with an error naming it.

const kinds = ['content', 'reasoning', 'tool_call', 'logprobs', 'finish'];

// {choices: [{i, content, reasoning, calls: [{id, name, arguments}], finish, tokens}], error}
export function outputEventsOf(text) {
  const byIndex = new Map();
  const choice = (i) => {
    if (!byIndex.has(i)) byIndex.set(i, { i, content: '', reasoning: '', calls: [], finish: '', tokens: 0 });
    return byIndex.get(i);
  };
  let error = null;
  const lines = text.split('\n');
  lines.pop(); // after the last "\n": empty, or a line not ended yet
  for (const [n, line] of lines.entries()) {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      e = null;
    }
    const kind = e && typeof e === 'object' && !Array.isArray(e) ? kinds.find((k) => k in e) : undefined;
    if (!kind) {
      error = `line ${n + 1} is not an output event: ${line.slice(0, 80)}`;
      break;
    }
    const c = choice(Number.isInteger(e.i) && e.i >= 0 ? e.i : 0);
    if (kind === 'content') c.content += String(e.content);
    else if (kind === 'reasoning') c.reasoning += String(e.reasoning);
    else if (kind === 'tool_call') c.calls.push({ id: e.tool_call?.id ?? '', name: e.tool_call?.name ?? '', arguments: e.tool_call?.arguments ?? '' });
    else if (kind === 'logprobs') c.tokens += Array.isArray(e.logprobs) ? e.logprobs.length : 0;
    else c.finish = String(e.finish);
  }
  const choices = [...byIndex.values()].sort((a, b) => a.i - b.i);
  return { choices, error };
}

// "get_weather({"city": "Oslo"})", as hearth submit prints a call.
export function callText(call) {
  return `${call.name}(${call.arguments})`;
}
