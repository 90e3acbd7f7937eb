// The OpenAI Responses API through the official `openai` npm client (run by tests/cli_server_clients.sh
// for kjv-moe and tiny-deepseek4): responses.create and responses.stream for a forced call, its
// function_call_output sent back through previous_response_id and the answer, the streamed reply
// (finalResponse and the deltas the helper emits) equal to the whole one with the same seed,
// text.format json_schema replies valid; with "think" (a template with a thinking mode: deepseek4)
// reasoning.effort gives a reasoning item before the message, streamed as the whole reply. Prints
// "ok NAME" or "FAIL NAME: why" per check.
const OpenAI = require('openai').OpenAI;

const base = process.argv[2], tag = process.argv[3] || 'responses', think = process.argv[4] === 'think';
const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', timeout: 120000, maxRetries: 0 });
let failed = 0;
const say = (n, r) => {
  if (r === true) console.log(`ok ${tag}_${n}`);
  else { failed++; console.log(`FAIL ${tag}_${n}: ${String(r).replace(/\n/g, ' ').slice(0, 400)}`); }
};
async function check(name, fn) { try { say(name, await fn()); } catch (e) { say(name, e); } }

// the output items without the ids that name the response and the fields the stream helper adds
// (parsed, parsed_arguments)
const strip = (out) => JSON.stringify(out, (k, v) => ['id', 'call_id', 'parsed', 'parsed_arguments'].includes(k) ? undefined : v);

// streams params with the helper; the final response and the output rebuilt from the deltas alone
async function streamed(params) {
  const s = openai.responses.stream(params);
  const text = {}, args = {};
  s.on('response.output_text.delta', (e) => { text[e.output_index] = (text[e.output_index] || '') + e.delta; });
  s.on('response.reasoning_text.delta', (e) => { text[e.output_index] = (text[e.output_index] || '') + e.delta; });
  s.on('response.function_call_arguments.delta', (e) => { args[e.output_index] = (args[e.output_index] || '') + e.delta; });
  const f = await s.finalResponse();
  const bad = f.output.map((o, i) => o.type !== 'function_call' ? (o.content[0].text === (text[i] || '') ? '' : `text ${i}`)
    : o.arguments === args[i] ? '' : `arguments ${i}`).filter((x) => x);
  return { f, bad };
}

const tools = [{ type: 'function', name: 'get_weather', description: 'Weather in a city', strict: true,
  parameters: { type: 'object', properties: { city: { enum: ['Zion', 'Jerusalem'] }, days: { type: 'integer' } },
    required: ['city'], additionalProperties: false } }];
const validCall = (o) => o && o.type === 'function_call' && o.name === 'get_weather' && (() => {
  const a = JSON.parse(o.arguments);
  return ['Zion', 'Jerusalem'].includes(a.city) && (a.days === undefined || Number.isInteger(a.days)) &&
    Object.keys(a).every((k) => k === 'city' || k === 'days');
})();

async function roundTrip(stream, seed) {
  const p1 = { model: 'x', input: 'What is the weather in Zion?', tools, tool_choice: 'required', temperature: 1, seed,
    max_output_tokens: 300 };
  let r1, bad = [];
  if (stream) ({ f: r1, bad } = await streamed(p1));
  else r1 = await openai.responses.create(p1);
  const call = r1.output.find((o) => o.type === 'function_call');
  if (r1.status !== 'completed' || r1.output.length !== 1 || !validCall(call) || bad.length) return `call: ${JSON.stringify(r1.output)} ${bad}`;
  const p2 = { model: 'x', previous_response_id: r1.id, tools, temperature: 1, seed: seed + 1, max_output_tokens: 12,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 30 degrees.' }] };
  let r2;
  if (stream) ({ f: r2, bad } = await streamed(p2));
  else r2 = await openai.responses.create(p2);
  if (bad.length || r2.previous_response_id !== r1.id || !r2.output.length) return `answer: ${JSON.stringify(r2)} ${bad}`;
  const last = r2.output[r2.output.length - 1];
  if (last.type === 'message' && typeof r2.output_text !== 'string') return 'no output_text';
  return last.type === 'message' || validCall(last) || JSON.stringify(r2.output);
}

async function main() {
  await check('create_round_trip', () => roundTrip(false, 31));
  await check('stream_round_trip', () => roundTrip(true, 31));

  // the same request whole and streamed, same seed: the same output
  for (const [name, extra] of [['text', { input: 'Who made the heaven?', max_output_tokens: 16 }],
    ['forced_call', { input: 'Weather?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 300 }],
    ...(think ? [['reasoning', { input: 'Who made the heaven?', reasoning: { effort: 'high' }, reasoning_budget: 6, max_output_tokens: 20 }]] : [])]) {
    await check(`stream_equals_create_${name}`, async () => {
      const p = { model: 'x', temperature: 1, seed: 41, ...extra };
      const a = await openai.responses.create(p);
      const { f, bad } = await streamed(p);
      if (name === 'reasoning' && !(a.output[0].type === 'reasoning' && a.output[0].content[0].text)) return JSON.stringify(a.output);
      return !bad.length && strip(a.output) === strip(f.output) && a.status === f.status &&
        a.usage.output_tokens === f.usage.output_tokens && a.output_text === f.output_text ||
        `${strip(a.output)} vs ${strip(f.output)} ${bad}`;
    });
  }

  // text.format json_schema, whole and streamed
  const schema = { type: 'object', properties: { book: { enum: ['Genesis', 'John'] }, chapter: { type: 'integer' } },
    required: ['book', 'chapter'], additionalProperties: false };
  for (const stream of [false, true]) {
    await check(`json_schema${stream ? '_stream' : ''}`, async () => {
      const p = { model: 'x', input: 'A verse?', temperature: 1, seed: 51 + stream, max_output_tokens: 300,
        text: { format: { type: 'json_schema', name: 'verse', strict: true, schema } } };
      const r = stream ? (await streamed(p)).f : await openai.responses.create(p);
      const v = JSON.parse(r.output_text);
      return ['Genesis', 'John'].includes(v.book) && Number.isInteger(v.chapter) && Object.keys(v).length === 2 || r.output_text;
    });
  }

  await check('unknown_previous_id_404', async () => {
    try { await openai.responses.create({ model: 'x', input: 'x', previous_response_id: 'resp_missing' }); return 'accepted'; }
    catch (e) { return e.status === 404 && /resp_missing/.test(e.message) || `${e.status} ${e.message}`; }
  });
  process.exit(failed ? 1 : 0);
}
main();
