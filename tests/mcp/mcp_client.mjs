// The official MCP TypeScript SDK's client against a streamable HTTP endpoint, for the end-to-end
// tests (tests/e2e/test_mcp.py): a real client, not our reading of the spec.
//
//   node tests/mcp/mcp_client.mjs URL [--header 'Name: value']... ACTION...
//
// ACTION is JSON: {"list": true} (tools/list), {"ping": true}, or
// {"call": "execute_code", "arguments": {...}} (tools/call). It connects (initialize), prints
// {"connected": {...}}, then one line per action, {"result": <the SDK's result>} or
// {"error": {"message", "code"}}, then ends the session (DELETE) and prints {"terminated": ...}.
// Exit 0 unless the usage is wrong (2) or connecting failed (1, after {"connect_error": ...}).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

function usage(why) {
  console.error(`${why}\nusage: node mcp_client.mjs URL [--header 'Name: value']... ACTION...`);
  process.exit(2);
}

// fetch's own errors say only "fetch failed"; the reason (ECONNREFUSED, ...) is their cause.
function errorJson(e) {
  const cause = e?.cause?.message ? ` (${e.cause.message})` : '';
  return { message: (e?.message ?? String(e)) + cause, code: e?.code ?? null };
}

const [url, ...rest] = process.argv.slice(2);
if (!url) usage('no URL');
const headers = {};
const actions = [];
for (let i = 0; i < rest.length; i++) {
  if (rest[i] === '--header') {
    const header = rest[++i] ?? '';
    const colon = header.indexOf(':');
    if (colon <= 0) usage(`--header wants 'Name: value', not '${header}'`);
    headers[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
    continue;
  }
  try {
    actions.push(JSON.parse(rest[i]));
  } catch (e) {
    usage(`an action is JSON: ${rest[i]}: ${e.message}`);
  }
}

const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: 'code-interpreter-e2e', version: '1.0.0' });
try {
  await client.connect(transport);
} catch (e) {
  console.log(JSON.stringify({ connect_error: errorJson(e) }));
  process.exit(1);
}
console.log(JSON.stringify({
  connected: {
    sessionId: transport.sessionId ?? null,
    protocolVersion: transport.protocolVersion ?? null,
    serverVersion: client.getServerVersion() ?? null,
    serverCapabilities: client.getServerCapabilities() ?? null,
    instructions: client.getInstructions() ?? null,
  },
}));

for (const action of actions) {
  try {
    let result;
    if (action.list) {
      result = await client.listTools();
    } else if (action.ping) {
      result = await client.ping();
    } else if (typeof action.call === 'string') {
      result = await client.callTool({ name: action.call, arguments: action.arguments });
    } else {
      throw new Error(`unknown action ${JSON.stringify(action)}`);
    }
    console.log(JSON.stringify({ result }));
  } catch (e) {
    console.log(JSON.stringify({ error: errorJson(e) }));
  }
}

try {
  await transport.terminateSession();
  console.log(JSON.stringify({ terminated: true }));
} catch (e) {
  console.log(JSON.stringify({ terminated: false, error: errorJson(e) }));
}
await client.close();
