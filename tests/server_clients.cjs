// Drives `moerun server` with the official `openai` and `@anthropic-ai/sdk` npm clients (run by
// tests/cli_server_clients.sh). Prints "ok NAME" or "FAIL NAME: why" per check. Loopback only; every
// request has a timeout.
// CommonJS so that NODE_PATH finds the packages (installed outside the repo)
const OpenAI = require('openai').OpenAI;
const Anthropic = require('@anthropic-ai/sdk').Anthropic;

const base = process.argv[2];
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', timeout: 60000, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'none', timeout: 60000, maxRetries: 0 });
let failed = 0;
const ok = (n) => console.log(`ok ${n}`);
const fail = (n, why) => { failed++; console.log(`FAIL ${n}: ${String(why).replace(/\n/g, ' ').slice(0, 300)}`); };
async function check(name, fn) {
  try { const r = await fn(); if (r === true) ok(name); else fail(name, r); } catch (e) { fail(name, e); }
}

async function main() {
const msgs = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Who made the heaven?' }];
const tools = [{ type: 'function', function: { name: 'get_verse', description: 'Look up a verse',
  parameters: { type: 'object', properties: { book: { type: 'string' }, chapter: { type: 'integer' } }, required: ['book'] } } }];

let greedy = '';
await check('openai_chat', async () => {
  const r = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 8, temperature: 0 });
  greedy = r.choices[0].message.content;
  return r.choices[0].message.role === 'assistant' && r.usage.completion_tokens === 8 || JSON.stringify(r);
});

// the stream helper needs delta.role in the first chunk ("missing role for choice 0" before)
await check('openai_stream_final_completion', async () => {
  const s = openai.chat.completions.stream({ model: 'x', messages: msgs, max_tokens: 8, temperature: 0 });
  const f = await s.finalChatCompletion();
  return f.choices[0].message.content === greedy || `streamed '${f.choices[0].message.content}' want '${greedy}'`;
});

await check('openai_stream_include_usage', async () => {
  const s = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 5, temperature: 0, stream: true,
    stream_options: { include_usage: true } });
  let usage = null, text = '';
  for await (const ch of s) { if (ch.usage) usage = ch.usage; if (ch.choices[0]) text += ch.choices[0].delta.content || ''; }
  return usage && usage.completion_tokens === 5 && text.length > 0 || `usage ${JSON.stringify(usage)}`;
});

await check('openai_max_completion_tokens', async () => {
  const r = await openai.chat.completions.create({ model: 'x', messages: msgs, max_completion_tokens: 3 });
  return r.usage.completion_tokens <= 3 || `generated ${r.usage.completion_tokens}`;
});

await check('openai_random_seed', async () => {
  const a = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 2, temperature: 1 });
  const b = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 2, temperature: 1 });
  return a.seed !== undefined && a.seed !== b.seed || `seeds ${a.seed} ${b.seed}`;
});

// a tool-calling history: assistant content null + tool_calls, a tool result, then the next turn;
// the re-sent history must hit the prompt cache
await check('openai_tool_history_cache', async () => {
  const call = { id: 'call_1', type: 'function', function: { name: 'get_verse', arguments: '{"book": "Genesis", "chapter": 1}' } };
  const h1 = [...msgs, { role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: 'call_1', content: 'In the beginning God created the heaven and the earth.' }];
  const r1 = await openai.chat.completions.create({ model: 'x', messages: h1, tools, max_tokens: 4, temperature: 0 });
  const h2 = [...h1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
  const r2 = await openai.chat.completions.create({ model: 'x', messages: h2, tools, max_tokens: 4, temperature: 0 });
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  return cached >= r1.usage.prompt_tokens || `turn 2 cached ${cached} of ${r2.usage.prompt_tokens}, turn 1 prompt ${r1.usage.prompt_tokens}`;
});

// a 400 names the field (the client throws BadRequestError)
await check('openai_bad_type_400', async () => {
  try { await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: '5' }); return 'accepted'; }
  catch (e) { return e.status === 400 && /max_tokens/.test(e.message) || `${e.status} ${e.message}`; }
});

await check('openai_parallel_requests', async () => {
  const rs = await Promise.all([0, 1, 2, 3].map(() => openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 8, temperature: 0 })));
  return rs.every((r) => r.choices[0].message.content === greedy) || rs.map((r) => r.choices[0].message.content).join('|');
});

await check('openai_abort_mid_stream', async () => {
  const ac = new AbortController();
  const s = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 200, stream: true }, { signal: ac.signal });
  try { for await (const ch of s) { if (ch.choices[0]?.delta?.content) ac.abort(); } } catch (e) { /* aborted */ }
  const r = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 8, temperature: 0 });
  return r.choices[0].message.content === greedy || `after abort: '${r.choices[0].message.content}'`;
});

await check('openai_completions', async () => {
  const r = await openai.completions.create({ model: 'x', prompt: 'And God said', max_tokens: 6, temperature: 0, logprobs: 2 });
  return r.choices[0].logprobs.tokens.length === 6 && r.usage.completion_tokens === 6 || JSON.stringify(r.choices[0]);
});

let atext = '';
await check('anthropic_messages', async () => {
  const r = await anthropic.messages.create({ model: 'x', max_tokens: 8, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: 'Who made the heaven?' }] });
  atext = r.content[0]?.text;
  return r.type === 'message' && r.role === 'assistant' && r.content[0].type === 'text' && r.usage.output_tokens === 8 || JSON.stringify(r);
});

await check('anthropic_stream_final_message', async () => {
  const s = anthropic.messages.stream({ model: 'x', max_tokens: 8, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: 'Who made the heaven?' }] });
  const m = await s.finalMessage();
  return m.content[0].text === atext && m.stop_reason === 'max_tokens' || JSON.stringify(m);
});

await check('anthropic_tool_result_history', async () => {
  const r = await anthropic.messages.create({ model: 'x', max_tokens: 4, temperature: 0,
    tools: [{ name: 'get_verse', description: 'Look up a verse', input_schema: { type: 'object', properties: { book: { type: 'string' } } } }],
    messages: [{ role: 'user', content: 'Genesis 1?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_verse', input: { book: 'Genesis' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'In the beginning.' }] }] });
  return r.type === 'message' && r.usage.input_tokens + (r.usage.cache_read_input_tokens || 0) > 0 || JSON.stringify(r);
});

// constrained replies through the clients: a forced call (OpenAI required, Anthropic any) is one call
// of the tool with arguments its schema accepts; a json_schema reply parses and has the required keys
const wtools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather',
  parameters: { type: 'object', properties: { city: { enum: ['Zion', 'Jerusalem'] }, days: { type: 'integer' } },
    required: ['city'], additionalProperties: false } } }];
await check('openai_tool_choice_required', async () => {
  const r = await openai.chat.completions.create({ model: 'x', messages: msgs, tools: wtools, tool_choice: 'required',
    max_tokens: 300, temperature: 1, seed: 11 });
  const c = r.choices[0], tc = c.message.tool_calls || [];
  const a = tc.length === 1 ? JSON.parse(tc[0].function.arguments) : {};
  return c.finish_reason === 'tool_calls' && tc.length === 1 && tc[0].function.name === 'get_weather' &&
    ['Zion', 'Jerusalem'].includes(a.city) && (a.days === undefined || Number.isInteger(a.days)) || JSON.stringify(c);
});
await check('openai_stream_tool_choice_named', async () => {
  const s = openai.chat.completions.stream({ model: 'x', messages: msgs, tools: wtools, max_tokens: 300, temperature: 1, seed: 12,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const f = await s.finalChatCompletion();
  const tc = f.choices[0].message.tool_calls || [];
  return tc.length === 1 && ['Zion', 'Jerusalem'].includes(JSON.parse(tc[0].function.arguments).city) || JSON.stringify(f.choices[0]);
});
await check('openai_json_schema', async () => {
  const schema = { type: 'object', properties: { book: { enum: ['Genesis', 'John'] }, chapter: { type: 'integer' } },
    required: ['book', 'chapter'], additionalProperties: false };
  const r = await openai.chat.completions.create({ model: 'x', messages: msgs, max_tokens: 300, temperature: 1, seed: 13,
    response_format: { type: 'json_schema', json_schema: { name: 'verse', strict: true, schema } } });
  const v = JSON.parse(r.choices[0].message.content);
  return ['Genesis', 'John'].includes(v.book) && Number.isInteger(v.chapter) && Object.keys(v).length === 2 || r.choices[0].message.content;
});
await check('anthropic_tool_choice_any', async () => {
  const m = await anthropic.messages.create({ model: 'x', max_tokens: 300, temperature: 1, messages: [{ role: 'user', content: 'Weather?' }],
    tools: [{ name: 'get_weather', input_schema: wtools[0].function.parameters }], tool_choice: { type: 'any' } });
  const u = m.content.filter((b) => b.type === 'tool_use');
  return m.stop_reason === 'tool_use' && u.length === 1 && ['Zion', 'Jerusalem'].includes(u[0].input.city) || JSON.stringify(m);
});

process.exit(failed ? 1 : 0);
}
main();
