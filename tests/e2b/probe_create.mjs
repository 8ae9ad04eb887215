const base = process.env.E2B_API_URL
const headers = { 'X-API-KEY': process.env.E2B_API_KEY, Authorization: `Bearer ${process.env.E2B_API_KEY}`, 'Content-Type': 'application/json' }
const timed = async (f) => { const t0 = performance.now(); const r = await f(); return [performance.now() - t0, r] }
const rows = { v2: [], v1sessions: [] }
for (let i = 0; i < 40; i++) {
  const [b, r] = await timed(async () => (await (await fetch(base + '/v2/sandboxes', { method: 'POST', headers, body: JSON.stringify({ templateID: 'base', timeout: 60 }) })).json()))
  await (await fetch(base + '/sandboxes/' + r.sandboxID, { method: 'DELETE', headers })).text()
  const [c, s] = await timed(async () => (await (await fetch(base + '/v1/sessions', { method: 'POST', headers, body: '{}' })).json()))
  await (await fetch(base + '/v1/sessions/' + s.session_id, { method: 'DELETE', headers })).text()
  if (i >= 5) { rows.v2.push(b); rows.v1sessions.push(c) }
}
for (const [k, v] of Object.entries(rows)) { v.sort((x, y) => x - y); console.log(k, v[Math.floor(v.length / 2)].toFixed(2)) }
