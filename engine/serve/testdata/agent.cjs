// A small agent on the official openai npm package, driven by engine/serve's tests. It reads
// OPENAI_BASE_URL and OPENAI_API_KEY as any agent does, runs the scenario named by its first
// argument and prints one JSON object on stdout. AGENTRL_OPENAI_NODE is the folder whose
// node_modules holds the package.
const path = require("path");
const OpenAI = require(path.join(process.env.AGENTRL_OPENAI_NODE, "node_modules", "openai"));

const client = new OpenAI({ maxRetries: 0, timeout: 120000 });
const model = process.env.MODEL || "builtin";
const system = process.env.SYSTEM;
const question = process.env.QUESTION || "What is 14 + 75?";
const seed = process.env.SEED ? Number(process.env.SEED) : undefined;
const messages = [{ role: "system", content: system }, { role: "user", content: question }];
const python = {
  type: "function",
  function: {
    name: "python",
    description: "Run Python code and return what it prints.",
    parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] },
  },
};

// apiError describes an error the client raised: its class and the server's error object.
function apiError(e) {
  if (!(e instanceof OpenAI.APIError)) throw e;
  return { class: e.constructor.name, status: e.status, code: e.code, type: e.type, param: e.param, message: e.message };
}

const scenarios = {
  // One whole reply.
  async whole() {
    const c = await client.chat.completions.create({ model, messages, max_tokens: 40, seed });
    const m = c.choices[0];
    return { content: m.message.content, tool_calls: m.message.tool_calls || [], finish_reason: m.finish_reason, usage: c.usage };
  },
  // The same reply streamed: the role first, content deltas, the finish reason, the usage.
  async stream() {
    const s = await client.chat.completions.create({ model, messages, max_tokens: 40, seed, stream: true, stream_options: { include_usage: true } });
    let content = "", role = "", finish = null, usage = null, chunks = 0;
    for await (const chunk of s) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        if (ch.delta.role) role = ch.delta.role;
        if (ch.delta.content) content += ch.delta.content;
        if (ch.finish_reason) finish = ch.finish_reason;
      }
    }
    return { content, role, finish_reason: finish, usage, chunks };
  },
  // A conversation with a tool call: the reply's message goes back as the client returned it,
  // then the tool's output as a role: tool message, then the next reply (streamed, with the
  // stream helper that accumulates tool calls).
  async conversation() {
    const first = await client.chat.completions.create({ model, messages, tools: [python], max_tokens: 60 });
    const msg = first.choices[0].message;
    if (!msg.tool_calls || msg.tool_calls.length === 0) return { error: "no tool call", first };
    const args = JSON.parse(msg.tool_calls[0].function.arguments);
    const output = process.env.TOOL_OUTPUT || "89";
    messages.push(msg, { role: "tool", tool_call_id: msg.tool_calls[0].id, content: output });
    const s = client.chat.completions.stream({ model, messages, tools: [python], max_tokens: 60 });
    const second = await s.finalChatCompletion();
    return { first: { message: msg, finish_reason: first.choices[0].finish_reason, usage: first.usage, code: args.code },
      second: { message: second.choices[0].message, finish_reason: second.choices[0].finish_reason } };
  },
  // Errors the client raises as APIError subclasses: n = 2, an unknown model; then a good request.
  async errors() {
    const out = {};
    try { await client.chat.completions.create({ model, messages, n: 2 }); out.n2 = "no error"; } catch (e) { out.n2 = apiError(e); }
    try { await client.chat.completions.create({ model: "gpt-4o", messages }); out.model = "no error"; } catch (e) { out.model = apiError(e); }
    const c = await client.chat.completions.create({ model, messages, max_tokens: 4 });
    out.after = c.choices[0].finish_reason;
    return out;
  },
  // A request with a key that no longer works.
  async refused() {
    try { await client.chat.completions.create({ model, messages, max_tokens: 4 }); return { error: "no error" }; } catch (e) { return apiError(e); }
  },
  // The models list and a raw completion.
  async misc() {
    const list = await client.models.list();
    const c = await client.completions.create({ model, prompt: question, max_tokens: 8, seed });
    return { models: list.data.map((m) => m.id), text: c.choices[0].text, finish_reason: c.choices[0].finish_reason };
  },
};

scenarios[process.argv[2]]()
  .then((out) => console.log(JSON.stringify(out)))
  .catch((e) => { console.error(e && e.stack ? e.stack : String(e)); process.exit(1); });
