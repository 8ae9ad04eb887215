// The kernel of an E2B JavaScript context (docs/e2b.md "Code contexts"), run by code_context.py
// as its child: cells arrive as lines {"code", "env_vars"} on stdin, and each gets its result
// and error lines, then {"type": "done"}, on the descriptor named by argv. Cells run in this
// process's global scope, so declarations last; top-level await is Node's REPL's own rewrite.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const util = require('util');
const vm = require('vm');

const answers = Number(process.argv[process.argv.length - 1]);
let rewriteAwait = null;
try {
  ({processTopLevelAwait: rewriteAwait} = require('internal/repl/await'));
} catch {
  // without --expose-internals: a cell with top-level await is a SyntaxError
}

function answer(message) {
  fs.writeSync(answers, JSON.stringify(message) + '\n');
}

// The stack down to the cells' frames (this kernel's own are left out).
function traceback(e) {
  const lines = String(e.stack || '').split('\n');
  const frame = (line) => /^\s+at /.test(line);
  return lines.filter((line) => !frame(line) || line.includes('<cell ')).join('\n');
}

function errorOf(e) {
  if (e instanceof Error) return {type: 'error', name: e.name, value: e.message, traceback: traceback(e)};
  return {type: 'error', name: 'Error', value: util.inspect(e), traceback: ''};
}

// A cell's pending await ends at an interrupt (SIGINT, once its synchronous part is done).
let interrupted = null;
process.on('SIGINT', () => interrupted && interrupted(new Error('interrupted')));
// What throws outside any cell's await goes to stderr, not down with the context.
process.on('uncaughtException', (e) => process.stderr.write(`Uncaught ${util.inspect(e)}\n`));
process.on('unhandledRejection', (e) => process.stderr.write(`Unhandled ${util.inspect(e)}\n`));

Object.assign(globalThis, {
  require: require('module').createRequire(path.join(process.cwd(), '<cell>')),
  __dirname: process.cwd(),
});

async function run(code, number) {
  let wrapped = null;
  try {
    wrapped = rewriteAwait ? rewriteAwait(code) : null;
  } catch {
    // not JavaScript: compiled as it is, for the engine's own SyntaxError
  }
  const script = new vm.Script(wrapped ?? code, {filename: `<cell ${number}>`});
  let value = script.runInThisContext({breakOnSigint: true, displayErrors: false});
  if (wrapped !== null) {
    const stop = new Promise((_, reject) => (interrupted = reject));
    value = (await Promise.race([value, stop]))?.value;
  }
  if (value !== undefined) {
    globalThis._ = value;
    answer({type: 'result', is_main_result: true,
            text: typeof value === 'string' ? value : util.inspect(value)});
  }
}

let number = 0;
let queue = Promise.resolve();
readline.createInterface({input: process.stdin}).on('line', (line) => {
  queue = queue.then(async () => {
    const request = JSON.parse(line);
    const env = request.env_vars || {};
    const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    try {
      await run(request.code, ++number);
    } catch (e) {
      answer(errorOf(e));
    } finally {
      interrupted = null;
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
      answer({type: 'done'});
    }
  });
});
