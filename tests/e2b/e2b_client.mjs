// E2B's official JS SDK (the pinned `e2b`) against the daemon's E2B front, one scenario per run:
// `node e2b_client.mjs <scenario> [args...]` with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// set. Prints one JSON object per step; tests/e2e/test_e2b.py asserts on them.
import { Sandbox } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const print = (o) => console.log(JSON.stringify(o))
const failure = (e) => ({ error: e.constructor.name, message: String(e.message) })
const info = (i) => ({
  sandboxId: i.sandboxId, templateId: i.templateId, metadata: i.metadata, state: i.state,
  startedAt: i.startedAt.toISOString(), endAt: i.endAt.toISOString(), cpuCount: i.cpuCount,
  memoryMB: i.memoryMB, envdVersion: i.envdVersion,
})
async function attempt(step, f) {
  const t0 = Date.now()
  try {
    print({ step, ...(await f()), took_ms: Date.now() - t0 })
  } catch (e) {
    print({ step, ...failure(e), took_ms: Date.now() - t0 })
  }
}
const ids = async (query) => (await Sandbox.list({ query }).nextItems()).map((s) => s.sandboxId)

const scenarios = {
  // create, info, list by metadata, timeout, connect from a second client, kill twice.
  async lifecycle(tag) {
    const sbx = await Sandbox.create('base', { metadata: { tag, 'a b': 'c&d' }, timeoutMs: 120_000 })
    print({ step: 'create', sandboxId: sbx.sandboxId })
    await attempt('info', async () => info(await sbx.getInfo()))
    await attempt('list', async () => ({ ids: await ids({ metadata: { tag } }) }))
    await attempt('list_escaped', async () => ({ ids: await ids({ metadata: { 'a b': 'c&d' } }) }))
    await attempt('list_other_tag', async () => ({ ids: await ids({ metadata: { tag: 'x' } }) }))
    await attempt('set_timeout', async () => {
      await sbx.setTimeout(30_000)
      return info(await sbx.getInfo())
    })
    await attempt('connect', async () => {
      const second = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 60_000 })
      return { sandboxId: second.sandboxId, ...info(await second.getInfo()) }
    })
    await attempt('kill', async () => ({ killed: await Sandbox.kill(sbx.sandboxId) }))
    await attempt('kill_again', async () => ({ killed: await Sandbox.kill(sbx.sandboxId) }))
    await attempt('info_after', async () => info(await Sandbox.getInfo(sbx.sandboxId)))
    await attempt('connect_after', async () => (await Sandbox.connect(sbx.sandboxId)).sandboxId)
  },
  // Another key's view of sandbox `id`.
  async foreign(id) {
    await attempt('info', async () => info(await Sandbox.getInfo(id)))
    await attempt('connect', async () => ({ id: (await Sandbox.connect(id)).sandboxId }))
    await attempt('set_timeout', async () => ({ ok: await Sandbox.setTimeout(id, 5_000) }))
    await attempt('list', async () => ({ ids: await ids() }))
    await attempt('kill', async () => ({ killed: await Sandbox.kill(id) }))
  },
  // A sandbox with `tag` and a 1 h timeout, left running (printed).
  async keep(tag) {
    const sbx = await Sandbox.create('base', { metadata: { tag }, timeoutMs: 3_600_000 })
    print({ step: 'create', sandboxId: sbx.sandboxId })
  },
  // A sandbox that ends by itself: nobody calls until it is gone.
  async expires() {
    const sbx = await Sandbox.create('base', { timeoutMs: 2_000 })
    const created = Date.now()
    print({ step: 'create', sandboxId: sbx.sandboxId, ...info(await sbx.getInfo()) })
    await new Promise((r) => setTimeout(r, 2_500))
    for (;;) {
      try {
        await Sandbox.getInfo(sbx.sandboxId)
      } catch (e) {
        print({ step: 'gone', after_ms: Date.now() - created, ...failure(e) })
        return
      }
      if (Date.now() - created > 60_000) return print({ step: 'still_there' })
      await new Promise((r) => setTimeout(r, 200))
    }
  },
  // Options this server cannot honour, each refused by name.
  async refused() {
    await attempt('internet', async () => (await Sandbox.create('base', { allowInternetAccess: true })).sandboxId)
    await attempt('template', async () => (await Sandbox.create('no-such-template')).sandboxId)
    await attempt('auto_pause', async () => (await Sandbox.create('base', { lifecycle: { onTimeout: 'pause' } })).sandboxId)
    await attempt('too_long', async () => (await Sandbox.create('base', { timeoutMs: 90_000_000 })).sandboxId)
  },
  // The sandbox plane's health, and a clear refusal of what is not there yet.
  async sandbox_plane() {
    const sbx = await Sandbox.create('base', { timeoutMs: 60_000 })
    await attempt('running', async () => ({ running: await sbx.isRunning() }))
    await attempt('read', async () => ({ text: await sbx.files.read('/home/user/x') }))
    await Sandbox.kill(sbx.sandboxId)
    await attempt('running_after_kill', async () => ({ running: await sbx.isRunning() }))
  },
  // Commands: exit codes, env and cwd, streamed output; a background process listed, fed stdin,
  // connected to from a second client and killed; a command past its timeout.
  async commands() {
    const sbx = await Sandbox.create('base', { timeoutMs: 120_000, envs: { FROM_CREATE: 'c' } })
    const result = (r) => ({ exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, error: r.error })
    const run = async (cmd, opts) => {
      try {
        return result(await sbx.commands.run(cmd, opts))
      } catch (e) {
        return { ...(e.exitCode !== undefined ? result(e) : {}), ...failure(e) }
      }
    }
    await attempt('run', () => run('echo out; echo err >&2; pwd; echo $USER $HOME $FROM_CREATE $MINE', { envs: { MINE: 'm' } }))
    await attempt('cwd', () => run('pwd; echo x > made; ls', { cwd: '/tmp' }))
    await attempt('relative_cwd', () => run('mkdir -p sub && cd sub && pwd'))
    await attempt('exit_code', () => run('echo before; exit 3'))
    await attempt('no_cwd', () => run('pwd', { cwd: '/no/such/dir' }))
    await attempt('root', () => run('id', { user: 'root' }))
    await attempt('streams', async () => {
      const out = []
      const err = []
      await sbx.commands.run('for i in 1 2 3; do echo $i; sleep 0.2; done; echo e >&2', {
        onStdout: (d) => out.push(d), onStderr: (d) => err.push(d),
      })
      return { out, err }
    })
    const bg = await sbx.commands.run('read line; echo got:$line; exec sleep 600', { background: true, stdin: true, timeoutMs: 0 })
    print({ step: 'background', pid: bg.pid })
    await attempt('list', async () => ({ processes: (await sbx.commands.list()).map((p) => ({ pid: p.pid, cmd: p.cmd, args: p.args })) }))
    await attempt('stdin', async () => {
      await sbx.commands.sendStdin(bg.pid, 'abc\n')
      for (let i = 0; i < 100 && !bg.stdout.includes('got:'); i++) await new Promise((r) => setTimeout(r, 50))
      return { stdout: bg.stdout }
    })
    await attempt('connect', async () => {
      const second = await Sandbox.connect(sbx.sandboxId)
      const handle = await second.commands.connect(bg.pid)
      const listed = (await second.commands.list()).map((p) => p.pid)
      await handle.disconnect()
      return { pid: handle.pid, listed }
    })
    await attempt('kill', async () => ({ killed: await sbx.commands.kill(bg.pid) }))
    await attempt('killed', async () => {
      try {
        return result(await bg.wait())
      } catch (e) {
        return { ...failure(e), exitCode: e.exitCode, stdout: e.stdout }
      }
    })
    await attempt('kill_again', async () => ({ killed: await sbx.commands.kill(bg.pid) }))
    await attempt('list_after', async () => ({ pids: (await sbx.commands.list()).map((p) => p.pid) }))
    await attempt('timeout', async () => {
      const t0 = Date.now()
      const r = await run('sleep 30', { timeoutMs: 1_000 })
      return { ...r, ms: Date.now() - t0 }
    })
    await attempt('list_end', async () => {  // the kill at the lifetime is the daemon's, meanwhile
      let pids = []
      for (let i = 0; i < 100; i++) {
        pids = (await sbx.commands.list()).map((p) => p.pid)
        if (pids.length === 0) break
        await new Promise((r) => setTimeout(r, 50))
      }
      return { pids }
    })
    await Sandbox.kill(sbx.sandboxId)
  },
  // A sandbox with a background process (`sleep 600`), both left running (printed).
  async keep_process() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000 })
    const bg = await sbx.commands.run('sleep 600', { background: true, timeoutMs: 0 })
    await bg.disconnect()
    print({ step: 'create', sandboxId: sbx.sandboxId, pid: bg.pid })
  },
  // Files both ways (multipart, octet-stream, gzip, a stream, several at once, empty, binary),
  // the Filesystem RPCs, a watch, and the errors the SDK types.
  async files() {
    const sbx = await Sandbox.create('base', { timeoutMs: 300_000 })
    const f = sbx.files
    const entry = (e) => ({ name: e.name, type: e.type, path: e.path, size: e.size, owner: e.owner,
      permissions: e.permissions, modified: e.modifiedTime instanceof Date })
    const events = []
    const watch = await f.watchDir('/home/user', (e) => events.push({ name: e.name, type: e.type }),
      { recursive: true })
    await attempt('write', async () => ({ info: await f.write('notes/a.txt', 'hello\n') }))
    await attempt('read', async () => ({ text: await f.read('/home/user/notes/a.txt') }))
    await attempt('read_run', async () => ({ out: (await sbx.commands.run('cat notes/a.txt; [ -O notes/a.txt ] && echo mine')).stdout }))
    const bytes = new Uint8Array(3 << 20).map((_, i) => (i * 7 + 3) % 256)
    await attempt('write_octet', async () => ({ info: await f.write('big.bin', bytes.buffer, { useOctetStream: true }) }))
    await attempt('read_bytes', async () => {
      const got = await f.read('big.bin', { format: 'bytes' })
      return { size: got.length, same: got.every((b, i) => b === bytes[i]) }
    })
    await attempt('write_gzip', async () => ({ info: await f.write('z.txt', 'zipped '.repeat(1000), { gzip: true }) }))
    await attempt('read_gzip', async () => ({ size: (await f.read('z.txt')).length }))
    await attempt('write_stream', async () => {
      const stream = new ReadableStream({ start(c) { for (let i = 0; i < 4; i++) c.enqueue(new TextEncoder().encode(`part ${i}\n`)); c.close() } })
      return { info: await f.write('streamed.txt', stream) }
    })
    await attempt('read_stream', async () => {
      const chunks = []
      for await (const c of await f.read('streamed.txt', { format: 'stream' })) chunks.push(Buffer.from(c))
      return { text: Buffer.concat(chunks).toString() }
    })
    await attempt('write_many', async () => ({ infos: await f.write([{ path: 'm/1.txt', data: 'one' }, { path: '/tmp/2.txt', data: new Blob(['two']) }]) }))
    await attempt('write_empty', async () => ({ info: await f.write('empty.txt', '') }))
    await attempt('read_empty', async () => ({ text: await f.read('empty.txt'), bytes: (await f.read('empty.txt', { format: 'bytes' })).length }))
    await attempt('list', async () => ({ entries: (await f.list('/home/user')).map(entry) }))
    await attempt('list_depth', async () => ({ names: (await f.list('/home/user', { depth: 2 })).map((e) => e.path) }))
    await attempt('info', async () => entry(await f.getInfo('notes/a.txt')))
    await attempt('exists', async () => ({ yes: await f.exists('notes/a.txt'), no: await f.exists('nope') }))
    await attempt('make_dir', async () => ({ made: await f.makeDir('d1/d2'), again: await f.makeDir('d1/d2') }))
    await attempt('rename', async () => entry(await f.rename('notes/a.txt', 'moved/b.txt')))
    await attempt('remove', async () => {
      await f.remove('d1')
      return { exists: await f.exists('d1') }
    })
    await attempt('read_missing', async () => ({ text: await f.read('nope.txt') }))
    await attempt('list_missing', async () => ({ entries: await f.list('/nope') }))
    await attempt('remove_missing', async () => ({ removed: await f.remove('/home/user/nope') }))
    await attempt('read_dir', async () => ({ text: await f.read('/home/user') }))
    await attempt('write_outside', async () => ({ info: await f.write('/etc/passwd', 'x') }))
    await attempt('write_over_dir', async () => ({ info: await f.write('moved', 'x') }))
    await attempt('list_as_root', async () => ({ entries: await f.list('/', { user: 'root' }) }))
    await new Promise((r) => setTimeout(r, 500))
    await watch.stop()
    print({ step: 'watch', events })
    await Sandbox.kill(sbx.sandboxId)
  },
  // runCode (@e2b/code-interpreter): state between cells, the last expression, a DataFrame's
  // HTML, a matplotlib PNG, an error's traceback, streamed callbacks, env vars, contexts with
  // their own globals and cwd, a cell past its timeout interrupted with its context kept;
  // JavaScript and bash contexts.
  async code() {
    const sbx = await CodeSandbox.create({ timeoutMs: 300_000 })
    const ex = (e) => ({ text: e.text, stdout: e.logs.stdout, stderr: e.logs.stderr,
      error: e.error && { name: e.error.name, value: e.error.value, traceback: e.error.traceback },
      results: e.results.map((r) => ({ main: r.isMainResult, formats: r.formats(), text: r.text,
        html: r.html && r.html.slice(0, 60), png: r.png && r.png.slice(0, 12) })),
      count: e.executionCount })
    await attempt('state', async () => {
      await sbx.runCode('x = 41')
      return ex(await sbx.runCode('x + 1'))
    })
    await attempt('string', async () => ex(await sbx.runCode('"hi"')))
    await attempt('dataframe', async () => ex(await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})')))
    await attempt('figure', async () => ex(await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\nprint("drawn")')))
    await attempt('error', async () => ex(await sbx.runCode('def f():\n    return 1 / 0\nf()')))
    await attempt('streams', async () => {
      const out = [], err = [], results = []
      await sbx.runCode('import sys, subprocess\nprint("a")\nprint("b", file=sys.stderr)\nsubprocess.run(["echo", "sub"])\ndisplay(7)\n8', {
        onStdout: (m) => out.push(m.line), onStderr: (m) => err.push(m.line), onResult: (r) => results.push(r.text) })
      return { out: out.join(''), err: err.join(''), results }
    })
    await attempt('env', async () => ex(await sbx.runCode('import os\nos.environ.get("CELL_VAR")', { envs: { CELL_VAR: 'v1' } })))
    await attempt('env_after', async () => ex(await sbx.runCode('import os\nos.environ.get("CELL_VAR")')))
    await attempt('context', async () => {
      const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
      const own = await sbx.runCode('import os\n(os.getcwd(), "x" in globals())', { context: ctx })
      const list = (await sbx.listCodeContexts()).map((c) => c.id)
      await sbx.runCode('y = 5', { context: ctx })
      await sbx.restartCodeContext(ctx)
      const restarted = await sbx.runCode('"y" in globals()', { context: ctx })
      await sbx.removeCodeContext(ctx)
      const after = (await sbx.listCodeContexts()).map((c) => c.id)
      let removed
      try { await sbx.runCode('1', { context: ctx }) } catch (e) { removed = failure(e) }
      return { id: ctx.id, cwd: ctx.cwd, own: own.text, listed: list.includes(ctx.id),
        restarted: restarted.text, gone: !after.includes(ctx.id), removed }
    })
    await attempt('timeout', async () => {
      const t0 = Date.now()
      let timedOut
      try { await sbx.runCode('import time\nwhile True: time.sleep(0.1)', { timeoutMs: 1500 }) } catch (e) { timedOut = failure(e) }
      const after = ex(await sbx.runCode('x'))
      return { timedOut, ms: Date.now() - t0, after }
    })
    await attempt('language', async () => ex(await sbx.runCode('1', { language: 'r' })))
    // JavaScript: its own default context, state and top-level await, console output, errors.
    await attempt('js', async () => {
      await sbx.runCode('const base = await Promise.resolve(40)', { language: 'js' })
      const out = []
      const value = ex(await sbx.runCode('console.log("from node"); base + 2', { language: 'javascript', onStdout: (m) => out.push(m.line) }))
      const error = ex(await sbx.runCode('function g() { null.x }\ng()', { language: 'js' }))
      const python = ex(await sbx.runCode('"base" in globals()'))
      const ctx = await sbx.createCodeContext({ language: 'js', cwd: '/tmp' })
      const own = ex(await sbx.runCode('[process.cwd(), typeof base]', { context: ctx }))
      let timedOut
      try { await sbx.runCode('while (true) {}', { language: 'js', timeoutMs: 1000 }) } catch (e) { timedOut = failure(e) }
      const kept = ex(await sbx.runCode('base', { language: 'js' }))
      return { value, out, error, python, own, language: ctx.language, timedOut, kept }
    })
    // bash: variables and functions last between cells, a failing command is an error.
    await attempt('bash', async () => {
      await sbx.runCode('n=3; twice() { echo $(( $1 * 2 )); }', { language: 'bash' })
      const state = ex(await sbx.runCode('twice $n; pwd', { language: 'bash', envs: { ONLY: 'here' } }))
      const failed = ex(await sbx.runCode('echo $ONLY; ls /nope', { language: 'bash' }))
      let timedOut
      try { await sbx.runCode('sleep 30; echo late', { language: 'bash', timeoutMs: 1000 }) } catch (e) { timedOut = failure(e) }
      const kept = ex(await sbx.runCode('twice $n', { language: 'bash' }))
      return { state, failed, timedOut, kept }
    })
    await CodeSandbox.kill(sbx.sandboxId)
  },
  // Three sandboxes listed two per page.
  // Pause with memory and files only, resume by connect, fork into three, a snapshot twice.
  async pause(tag) {
    const sbx = await CodeSandbox.create('base', { metadata: { tag }, timeoutMs: 300_000 })
    print({ step: 'create', sandboxId: sbx.sandboxId })
    const state = async (s) => {
      const r = await s.runCode('x += 1; x')
      return { text: r.text, error: r.error?.value, file: await s.files.read('/home/user/f.txt') }
    }
    await attempt('prepare', async () => {
      await sbx.files.write('/home/user/f.txt', 'kept')
      return { error: (await sbx.runCode('x = 40')).error?.value }
    })
    await attempt('pause_memory', async () => ({ paused: await sbx.pause() }))
    await attempt('pause_again', async () => ({ paused: await sbx.pause() }))
    await attempt('info_paused', async () => info(await sbx.getInfo()))
    await attempt('list_paused', async () => ({ ids: await ids({ metadata: { tag }, state: ['paused'] }) }))
    await attempt('list_running', async () => ({ ids: await ids({ metadata: { tag }, state: ['running'] }) }))
    await attempt('connect', async () => state(await CodeSandbox.connect(sbx.sandboxId)))
    await attempt('info_resumed', async () => info(await sbx.getInfo()))
    await attempt('pause_files', async () => ({ paused: await sbx.pause({ keepMemory: false }) }))
    await attempt('connect_files', async () => {
      const again = await CodeSandbox.connect(sbx.sandboxId)
      await again.runCode('x = 50')
      return state(again)
    })
    await attempt('fork', async () => {
      const forks = await sbx.fork({ count: 3 })
      const out = []
      for (const f of forks) out.push(f instanceof Error ? { error: String(f) } : { id: f.sandboxId, ...(await state(f)) })
      return { forks: out }
    })
    await attempt('snapshot', async () => {
      const snap = await sbx.createSnapshot({ name: `snap-${tag}` })
      const listed = await Sandbox.listSnapshots({ sandboxId: sbx.sandboxId }).nextItems()
      const started = []
      for (let i = 0; i < 2; i++) {
        const s = await CodeSandbox.create(snap.snapshotId, { timeoutMs: 60_000 })
        started.push({ id: s.sandboxId, file: await s.files.read('/home/user/f.txt') })
        await s.kill()
      }
      return { snapshot: snap, listed, started, deleted: await Sandbox.deleteSnapshot(snap.snapshotId),
               deleted_again: await Sandbox.deleteSnapshot(snap.snapshotId) }
    })
    await attempt('kill', async () => ({ killed: await sbx.kill() }))
  },
  // A sandbox left with a file and a variable, for a daemon restart (restart_after).
  async restart_before() {
    const sbx = await CodeSandbox.create('base', { timeoutMs: 600_000 })
    print({ step: 'create', sandboxId: sbx.sandboxId })
    await sbx.files.write('/home/user/r.txt', 'before the restart')
    await attempt('prepare', async () => ({ error: (await sbx.runCode('x = 7')).error?.value }))
  },
  async restart_after(id) {
    await attempt('info', async () => info(await Sandbox.getInfo(id)))
    const sbx = await CodeSandbox.connect(id)
    await attempt('file', async () => ({ text: await sbx.files.read('/home/user/r.txt') }))
    await attempt('command', async () => ({ stdout: (await sbx.commands.run('echo hi')).stdout }))
    await attempt('code', async () => ({ text: (await sbx.runCode('6 * 7')).text }))
    await attempt('kill', async () => ({ killed: await sbx.kill() }))
  },
  // Left alone until the daemon's idle sweep pauses it, then used without a connect.
  async idle() {
    const sbx = await CodeSandbox.create('base', { timeoutMs: 300_000 })
    print({ step: 'create', sandboxId: sbx.sandboxId })
    await sbx.files.write('/home/user/idle.txt', 'kept')
    await attempt('prepare', async () => ({ error: (await sbx.runCode('x = 5')).error?.value }))
    await attempt('paused', async () => {
      for (let i = 0; i < 100; i++) {
        const { state } = await sbx.getInfo()
        if (state === 'paused') return { state, after_ms: i * 100 }
        await new Promise((r) => setTimeout(r, 100))
      }
      return { state: 'running' }
    })
    await attempt('code', async () => {
      const r = await sbx.runCode('x')
      return { text: r.text, error: r.error?.name }
    })
    await attempt('file', async () => ({ text: await sbx.files.read('/home/user/idle.txt') }))
    await attempt('kill', async () => ({ killed: await sbx.kill() }))
  },
  async paging(tag) {
    const made = []
    for (let i = 0; i < 3; i++) made.push((await Sandbox.create('base', { metadata: { tag }, timeoutMs: 60_000 })).sandboxId)
    print({ step: 'create', ids: made })
    const pages = Sandbox.list({ query: { metadata: { tag } }, limit: 2 })
    const all = []
    while (pages.hasNext) all.push((await pages.nextItems()).map((s) => s.sandboxId))
    print({ step: 'pages', pages: all })
    for (const id of made) await Sandbox.kill(id)
  },
}

const [scenario, ...args] = process.argv.slice(2)
try {
  await scenarios[scenario](...args)
  print({ end: true })
} catch (e) {
  print({ step: 'uncaught', ...failure(e), stack: String(e.stack) })
  process.exitCode = 1
}
// The SDK leaves its request timer running after an error answer (runCode's 400 or 404): 60 s
// before Node would exit by itself.
process.exit()
