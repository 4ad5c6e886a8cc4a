#!/usr/bin/env node
// A ReTool agent for agentrl-tui's external environment (env.name: external), on the official
// openai package. The workbench starts it once per trajectory with
//
//   OPENAI_BASE_URL, OPENAI_API_KEY   the policy's OpenAI-compatible endpoint and this trajectory's key
//   the task as JSON on stdin         {"id", "prompt", "meta"} (also in AGENTRL_TASK)
//
// and reads its result from the last line it prints: {"answer": "…", "info": {…}}.
//
// It asks the model to solve the problem with a python tool. Both ways a model may call the tool
// are handled: an OpenAI tool call (the code runs, a role "tool" message carries its output), and
// the ReTool text protocol the built-in model was trained on (code between <code> and </code>, the
// request stopping at "</code>"; the output goes back in a user message as
// <interpreter>OUTPUT</interpreter>, exactly as the ReTool environment writes it). It stops at
// the first \boxed{…} answer, after AGENTRL_MAX_TURNS turns, or when the endpoint says the
// conversation no longer fits the model's context (then with no answer). Code runs in the workbench's
// sandbox (`agentrl-tui tool run`), never in a bare interpreter.
//
// Settings, all optional (environment variables):
//   AGENTRL_MODEL          model name sent to the endpoint (default: the one model the endpoint's
//                          GET /v1/models lists, e.g. agentrl-builtin under `agentrl-tui serve`;
//                          the workbench always sets it)
//   AGENTRL_MAX_TURNS      most model calls (default 3, as rollout.max_turns)
//   AGENTRL_MAX_TOKENS     max_tokens of each call (default: not sent, the server's limit)
//   AGENTRL_TEMPERATURE    temperature of each call (default: not sent, the server's)
//   AGENTRL_AGENT_TOOLS    "openai" declares the python tool in `tools` (default); "none" does
//                          not, leaving only the ReTool text protocol the built-in model was
//                          trained on (recipes/agent-retool.yaml sets it)
//   AGENTRL_BIN            the agentrl-tui binary (default: agentrl-tui on PATH; the workbench
//                          sets it to itself; by hand, e.g. AGENTRL_BIN=$PWD/agentrl-tui)
//   AGENTRL_AGENT_EXECUTOR the sandbox's executor, python or starlark (default python)
//   AGENTRL_TOOL_TIMEOUT   limit of one code run, a Go duration (default 5s)
//   AGENTRL_MAX_OBS_CHARS  output kept per run, in bytes, as env.observation.max_chars (default 512)
//   AGENTRL_TRANSCRIPT_DIR a folder to write the conversation to (the messages sent, each reply
//                          received, the key), one JSON file per run, for debugging and the
//                          workbench's tests (default: none)

import { spawn } from 'node:child_process';
import { accessSync, constants, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import OpenAI from 'openai';

// The ReTool environment's system prompt (envs/retool DefaultSystem).
const SYSTEM =
  'Solve the problem. You may run code by writing it between <code> and </code>; its output comes back in <interpreter></interpreter>. Give the final answer as \\boxed{answer}.';

// The ReTool environment's reply to a turn with neither code nor an answer.
const FORMAT_HELP = 'Write Python between <code> and </code>, or give the final answer as \\boxed{answer}.';

const PYTHON_TOOL = {
  type: 'function',
  function: {
    name: 'python',
    description: 'Runs a Python program in a sandbox and returns what it prints.',
    parameters: {
      type: 'object',
      properties: { code: { type: 'string', description: 'The program; print() the values you need.' } },
      required: ['code'],
    },
  },
};

function intSetting(name, fallback) {
  const v = process.env[name];
  if (v === undefined || v === '') return fallback;
  const n = Number.parseInt(v, 10);
  if (!Number.isInteger(n) || n < 0 || String(n) !== v.trim()) {
    throw new Error(`${name}=${v} is not a whole number`);
  }
  return n;
}

function settings() {
  const env = process.env;
  const tools = env.AGENTRL_AGENT_TOOLS || 'openai';
  if (tools !== 'openai' && tools !== 'none') {
    throw new Error(`AGENTRL_AGENT_TOOLS=${tools}: want openai or none`);
  }
  const temperature = env.AGENTRL_TEMPERATURE ? Number(env.AGENTRL_TEMPERATURE) : undefined;
  if (temperature !== undefined && !Number.isFinite(temperature)) {
    throw new Error(`AGENTRL_TEMPERATURE=${env.AGENTRL_TEMPERATURE} is not a number`);
  }
  return {
    model: env.AGENTRL_MODEL || '', // '': asked of the endpoint (servedModel)
    maxTurns: Math.max(1, intSetting('AGENTRL_MAX_TURNS', 3)),
    maxTokens: intSetting('AGENTRL_MAX_TOKENS', 0),
    temperature,
    tools: tools === 'openai',
    bin: sandboxBinary(env),
    executor: env.AGENTRL_AGENT_EXECUTOR || 'python',
    toolTimeout: env.AGENTRL_TOOL_TIMEOUT || '5s',
    maxObsChars: intSetting('AGENTRL_MAX_OBS_CHARS', 512),
  };
}

// isExecutable reports whether path is a file this process may run.
function isExecutable(path) {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

// sandboxBinary is the agentrl-tui whose `tool run` runs the model's code: AGENTRL_BIN, else
// agentrl-tui on PATH. Neither is an error said before the first model call, not at the first
// code run.
function sandboxBinary(env) {
  const set = env.AGENTRL_BIN;
  if (set && set.includes('/')) {
    if (isExecutable(set)) return set;
    throw new Error(`AGENTRL_BIN=${set} is not an executable file: set it to the agentrl-tui binary, whose \`tool run\` is the sandbox the code runs in`);
  }
  const found = onPath(set || 'agentrl-tui', env.PATH);
  if (found) return found;
  if (set) throw new Error(`AGENTRL_BIN=${set} is not on PATH: set AGENTRL_BIN to the agentrl-tui binary's path`);
  throw new Error(
    'AGENTRL_BIN is not set and agentrl-tui is not on PATH: set AGENTRL_BIN to the agentrl-tui binary (e.g. AGENTRL_BIN=$PWD/agentrl-tui), whose `tool run` is the sandbox the code runs in',
  );
}

// onPath returns the path of the executable name on PATH, or ''.
function onPath(name, path) {
  for (const dir of (path || '').split(delimiter)) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return '';
}

// servedModel is the model the endpoint serves (GET /v1/models), for a run by hand without
// AGENTRL_MODEL: `agentrl-tui serve` serves one (agentrl-builtin, a folder's name, RUN-stepS).
async function servedModel(client) {
  let ids;
  try {
    ids = (await client.models.list()).data.map((m) => m.id);
  } catch (err) {
    throw new Error(
      `AGENTRL_MODEL is not set and the endpoint's GET /v1/models failed (${err && err.message ? err.message : err}): set AGENTRL_MODEL to the model name the endpoint serves`,
    );
  }
  if (ids.length !== 1) {
    throw new Error(
      `AGENTRL_MODEL is not set and the endpoint's GET /v1/models lists ${ids.length} models (${ids.join(', ')}): set AGENTRL_MODEL to the one to use`,
    );
  }
  return ids[0];
}

// readTask reads the task from stdin, or from AGENTRL_TASK when stdin is empty.
function readTask() {
  let text = '';
  try {
    text = readFileSync(0, 'utf8');
  } catch {
    // no stdin
  }
  if (!text.trim()) text = process.env.AGENTRL_TASK || '';
  const task = JSON.parse(text);
  if (typeof task.prompt !== 'string' || !task.prompt) throw new Error('the task has no prompt');
  return task;
}

// runTool runs code in the workbench's sandbox: {observation, status, output, detail}.
function runTool(cfg, code) {
  const args = ['tool', 'run', '--executor', cfg.executor, '--timeout', cfg.toolTimeout];
  return new Promise((resolve, reject) => {
    const child = spawn(cfg.bin, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', (e) =>
      reject(new Error(`cannot run the sandbox ${cfg.bin} (${e.code || e.message}); set AGENTRL_BIN to the agentrl-tui binary`)),
    );
    child.on('close', (status) => {
      if (status !== 0) {
        reject(new Error(`${cfg.bin} ${args.join(' ')} exited ${status}: ${err.trim()}`));
        return;
      }
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new Error(`${cfg.bin} tool run printed no JSON: ${out.slice(0, 200)}`));
      }
    });
    child.stdin.on('error', () => {}); // the sandbox may exit before reading everything
    child.stdin.end(code);
  });
}

// observation is a run's output as the ReTool environment shows it (envs/retool Observe): stdout,
// or the error, or a timeout/limit notice, cut to maxChars bytes; in <interpreter> tags unless
// bare (for a role "tool" message).
function observation(run, maxChars, bare) {
  let body = run.output || '';
  if (run.status === 'timeout') body = body.replace(/\n+$/, '') + `\n[timeout: ${run.detail || ''}]`;
  if (run.status === 'killed') body = body.replace(/\n+$/, '') + `\n[stopped: ${run.detail || ''}]`;
  if (run.status === 'ok' && body.trim() === '') body = '[no output: use print() to see values]';
  body = body.replace(/^\n+|\n+$/g, '');
  const bytes = Buffer.from(body, 'utf8');
  if (maxChars > 0 && bytes.length > maxChars) {
    let cut = maxChars;
    while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--; // do not split a UTF-8 sequence
    body = bytes.subarray(0, cut).toString('utf8') + '\n[… truncated]';
  }
  return bare ? body : `<interpreter>\n${body}\n</interpreter>`;
}

// parseTurn reads a text turn as the ReTool parser does: the <code> blocks, and the last \boxed{}
// outside them. A <code> left open counts as closed when the reply stopped at "</code>" (the stop
// string is not part of an OpenAI reply).
function parseTurn(text, stoppedAtCode) {
  const code = [];
  let rest = '';
  let error = '';
  let from = 0;
  for (;;) {
    const open = text.indexOf('<code>', from);
    if (open < 0) {
      rest += text.slice(from);
      break;
    }
    rest += text.slice(from, open) + '\n';
    const body = open + '<code>'.length;
    const close = text.indexOf('</code>', body);
    if (close < 0) {
      if (stoppedAtCode) code.push(text.slice(body).replace(/^\n+|\n+$/g, ''));
      else error = '<code> is not closed by </code>';
      break;
    }
    code.push(text.slice(body, close).replace(/^\n+|\n+$/g, ''));
    from = close + '</code>'.length;
  }
  return { code, answer: lastBoxed(rest), error };
}

// lastBoxed returns the content of the last \boxed{…} (nested braces allowed), or null.
function lastBoxed(text) {
  let found = null;
  for (let at = text.indexOf('\\boxed{'); at >= 0; at = text.indexOf('\\boxed{', at + 1)) {
    const start = at + '\\boxed{'.length;
    let depth = 1;
    let j = start;
    for (; j < text.length && depth > 0; j++) {
      if (text[j] === '{') depth++;
      else if (text[j] === '}') depth--;
    }
    if (depth === 0) found = text.slice(start, j - 1).trim();
  }
  return found;
}

// transcript is the conversation as this agent saw it, written to AGENTRL_TRANSCRIPT_DIR at exit.
const transcript = { key: process.env.OPENAI_API_KEY || '', messages: [], replies: [] };

function writeTranscript() {
  const dir = process.env.AGENTRL_TRANSCRIPT_DIR;
  if (!dir) return;
  const name = `${process.pid}-${Date.now()}.json`;
  writeFileSync(join(dir, name), JSON.stringify(transcript));
}

async function main() {
  const cfg = settings();
  const task = readTask();
  if (!process.env.OPENAI_BASE_URL) {
    throw new Error('OPENAI_BASE_URL is not set: the workbench sets it to its endpoint (this agent never calls api.openai.com)');
  }
  const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY || 'none', maxRetries: 0 });
  if (!cfg.model) cfg.model = await servedModel(client);
  const messages = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: task.prompt },
  ];
  transcript.messages = messages;
  const info = { turns: 0, tool_calls: 0, tool_errors: 0, finish: 'max_turns' };
  let answer = null;
  while (info.turns < cfg.maxTurns && answer === null) {
    info.turns++;
    const request = { model: cfg.model, messages, stop: ['</code>'] };
    if (cfg.tools) request.tools = [PYTHON_TOOL];
    if (cfg.maxTokens > 0) request.max_tokens = cfg.maxTokens;
    if (cfg.temperature !== undefined) request.temperature = cfg.temperature;
    let reply;
    try {
      reply = await client.chat.completions.create(request);
    } catch (err) {
      // The conversation outgrew the model's context: it ends without an answer, as the ReTool
      // loop ends a trajectory that runs out of context. Any other error is the agent's failure.
      if (err && err.status === 400 && err.code === 'context_length_exceeded') {
        info.turns--; // the request was refused: no turn
        info.finish = 'context';
        break;
      }
      throw err;
    }
    const choice = reply.choices[0];
    const msg = choice.message;
    transcript.replies.push({ content: msg.content ?? null, tool_calls: msg.tool_calls ?? [], finish_reason: choice.finish_reason });
    const last = info.turns >= cfg.maxTurns;

    if (msg.tool_calls && msg.tool_calls.length > 0) {
      // Sent back as received, so that the server sees its own reply extended.
      messages.push({ role: 'assistant', content: msg.content ?? null, tool_calls: msg.tool_calls });
      for (const call of msg.tool_calls) {
        let content;
        let code = null;
        try {
          code = JSON.parse(call.function.arguments || '{}').code;
        } catch {
          // reported below
        }
        if (call.function.name !== 'python' || typeof code !== 'string') {
          content = `Error: call the python tool with {"code": "…"}.`;
          info.tool_errors++;
        } else {
          const run = await runTool(cfg, code);
          info.tool_calls++;
          if (run.status !== 'ok') info.tool_errors++;
          content = observation(run, cfg.maxObsChars, true);
        }
        messages.push({ role: 'tool', tool_call_id: call.id, content });
      }
      answer = lastBoxed(msg.content || '');
      continue;
    }

    const text = msg.content || '';
    messages.push({ role: 'assistant', content: text });
    const turn = parseTurn(text, choice.finish_reason === 'stop');
    if (turn.answer !== null) {
      answer = turn.answer;
      break;
    }
    if (last) break; // the ReTool loop shows no output after its last turn
    let feedback;
    if (turn.code.length > 0) {
      const shown = [];
      for (const code of turn.code) {
        const run = await runTool(cfg, code);
        info.tool_calls++;
        if (run.status !== 'ok') info.tool_errors++;
        shown.push(observation(run, cfg.maxObsChars, false));
      }
      feedback = shown.join('\n');
    } else {
      feedback = `Format error: ${turn.error || 'no code and no final answer'}. ${FORMAT_HELP}`;
    }
    messages.push({ role: 'user', content: feedback });
  }
  if (answer !== null) info.finish = 'answer';
  writeTranscript();
  process.stdout.write(JSON.stringify({ answer: answer ?? '', info }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`retool-agent: ${err && err.message ? err.message : err}\n`);
  process.exit(1);
});
