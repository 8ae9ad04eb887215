// tests/bench/bench_e2b.py's client: E2B's SDK against the daemon, each round interleaved with
// the same work through the daemon's own REST API from the same process (fetch, one keep-alive
// agent), so both pay Node's HTTP. Prints one JSON object: milliseconds per round of each.
// `node bench_client.mjs ROUNDS WARMUP` with E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY set.
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const [rounds, warmup] = process.argv.slice(2).map(Number)
const base = process.env.E2B_API_URL
const headers = { Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }
const rest = async (method, path, body) => {
  const r = await fetch(base + path, { method, headers, body: body && JSON.stringify(body) })
  const text = await r.text()
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`)
  return text ? JSON.parse(text) : null
}
const timed = async (f) => {
  const t0 = performance.now()
  await f()
  return performance.now() - t0
}

const sbx = await Sandbox.create('base', { timeoutMs: 600_000 })
const code = await CodeSandbox.create({ timeoutMs: 600_000 })
const session = (await rest('POST', '/v1/sessions', {})).session_id
const out = { command: [], session_bash: [], create: [], session_create: [], run_code: [],
  session_execute: [] }
for (let i = 0; i < rounds + warmup; i++) {
  const keep = i >= warmup
  const command = await timed(async () => {
    const r = await sbx.commands.run('true')
    if (r.exitCode !== 0) throw new Error(`commands.run: ${JSON.stringify(r)}`)
  })
  const bash = await timed(async () => {
    const r = await rest('POST', `/v1/sessions/${session}/bash`, { cmd: 'true' })
    if (r.exit_code !== 0) throw new Error(`bash: ${JSON.stringify(r)}`)
  })
  const runCode = await timed(async () => {
    const e = await code.runCode('1+1')
    if (e.text !== '2') throw new Error(`runCode: ${JSON.stringify(e)}`)
  })
  const execute = await timed(async () => {
    const r = await rest('POST', `/v1/sessions/${session}/execute`, { code: '1+1' })
    if (r.exit_code !== 0) throw new Error(`execute: ${JSON.stringify(r)}`)
  })
  // Which create goes first alternates: the first after the calls above pays the machine's
  // wake-up from their pauses (a cold sandbox start waits on several processes).
  let create, created
  const sdkCreate = async () => {
    let made
    create = await timed(async () => { made = await Sandbox.create('base', { timeoutMs: 60_000 }) })
    await Sandbox.kill(made.sandboxId)
  }
  const sessionCreate = async () => {
    let id
    created = await timed(async () => { id = (await rest('POST', '/v1/sessions', {})).session_id })
    await rest('DELETE', `/v1/sessions/${id}`)
  }
  for (const f of i % 2 ? [sdkCreate, sessionCreate] : [sessionCreate, sdkCreate]) await f()
  if (keep) {
    out.command.push(command)
    out.session_bash.push(bash)
    out.create.push(create)
    out.session_create.push(created)
    out.run_code.push(runCode)
    out.session_execute.push(execute)
  }
}
await Sandbox.kill(sbx.sandboxId)
await CodeSandbox.kill(code.sandboxId)
await rest('DELETE', `/v1/sessions/${session}`)
console.log(JSON.stringify(out))
