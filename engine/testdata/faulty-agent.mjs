// A faulty agent for the controller's fault tests (external_test.go). What it does depends on its
// task's id, through FAULTY_MODES ("ID=MODE;ID=MODE"); a task not listed runs the example agent
// (agent.mjs in the working folder). Every process it starts is noted in FAULTY_PIDS, one pid a
// line, so that the test can check none outlives the run.
//
//   crash-first  the first sample of the task makes a request, then exits 3 with a message on
//                stderr; the others run the example agent
//   hang-first   the first makes a request (holding a KV slot), starts a child and never ends;
//                the others run the example agent
//   silent-first the first makes a request and exits 0 printing nothing; the other prints an
//                unparsable last line
//   rewrite      two requests, the second not extending the first (another system prompt: a
//                new segment), then {"answer": "0"}
import { spawn } from 'node:child_process';
import { appendFileSync, openSync, closeSync } from 'node:fs';
import { join } from 'node:path';

const task = JSON.parse(process.env.AGENTRL_TASK);
const note = (pid) => appendFileSync(process.env.FAULTY_PIDS, `${pid}\n`);
note(process.pid);

// first reports whether this is the first sample of the task to get here.
function first() {
  try {
    closeSync(openSync(join(process.env.FAULTY_DIR, task.id), 'wx'));
    return true;
  } catch {
    return false;
  }
}

// ask makes one chat request with the trajectory's key.
async function ask(system) {
  const r = await fetch(process.env.OPENAI_BASE_URL + '/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer ' + process.env.OPENAI_API_KEY },
    body: JSON.stringify({
      model: process.env.AGENTRL_MODEL,
      messages: [...(system ? [{ role: 'system', content: system }] : []), { role: 'user', content: task.prompt }],
      max_tokens: 4,
    }),
  });
  if (!r.ok) throw new Error(`faulty-agent: the endpoint answered ${r.status}: ${await r.text()}`);
}

function runAgent() {
  const child = spawn(process.execPath, ['agent.mjs'], { stdio: 'inherit' });
  note(child.pid);
  child.on('exit', (code) => process.exit(code ?? 1));
}

const modes = Object.fromEntries((process.env.FAULTY_MODES || '').split(';').filter(Boolean).map((kv) => kv.split('=')));
const mode = modes[task.id] || 'agent';
switch (mode) {
  case 'crash-first':
    if (!first()) {
      runAgent();
      break;
    }
    await ask();
    process.stderr.write('faulty-agent: giving up on purpose\n');
    process.exit(3);
  case 'hang-first': {
    if (!first()) {
      runAgent();
      break;
    }
    await ask();
    const child = spawn('sleep', ['600'], { stdio: 'ignore' });
    note(child.pid);
    setInterval(() => {}, 1000);
    break;
  }
  case 'silent-first':
    await ask();
    if (first()) process.exit(0);
    console.log('the answer is probably 42');
    break;
  case 'rewrite':
    await ask('Solve the problem.');
    await ask('Solve the problem step by step.');
    console.log(JSON.stringify({ answer: '0' }));
    break;
  default:
    runAgent();
}
