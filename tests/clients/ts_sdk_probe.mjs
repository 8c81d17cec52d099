// The official TypeScript SDK's client against `pmem serve --http`, as an application would use
// it (tests/test_real_clients.py runs it): dynamic registration, PKCE, the consent page filled
// like a browser would (GET the page, POST the passphrase and the ticked scopes), the token
// exchange, a read, a write, a refresh once the access token has lapsed, and a call after the
// server restarted, all on one Client with no reconnect code. Each step prints one JSON line;
// at "restart" it waits for a line on stdin (the test restarts the server, then writes "go").
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import readline from "node:readline";

const env = process.env;
const base = env.PMEM_PROBE_BASE;
const redirect = "http://127.0.0.1:43119/callback";
const say = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const stdin = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => stdin.once("line", resolve));

let info, tokens, verifier, code;
let tokenSaves = 0;
let consents = 0;
const provider = {
  get redirectUrl() { return redirect; },
  get clientMetadata() {
    return {
      client_name: "ts-sdk-probe",
      redirect_uris: [redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      scope: env.PMEM_PROBE_SCOPES,
    };
  },
  clientInformation() { return info; },
  saveClientInformation(i) { info = i; },
  tokens() { return tokens; },
  saveTokens(t) { tokens = t; tokenSaves += 1; },
  saveCodeVerifier(v) { verifier = v; },
  codeVerifier() { return verifier; },
  async redirectToAuthorization(url) { code = await consent(url); },
  // what the SDK calls when the server refuses a grant (invalid_grant, invalid_client)
  invalidateCredentials(what) {
    if (what === "all" || what === "tokens") tokens = undefined;
    if (what === "all" || what === "client") info = undefined;
    if (what === "all" || what === "verifier") verifier = undefined;
  },
};

function attr(tag, name) {
  const m = tag.match(new RegExp(`${name}="([^"]*)"`)) || tag.match(new RegExp(`${name}=([^\\s>]+)`));
  return m ? m[1].replace(/&amp;/g, "&").replace(/&quot;/g, '"').replace(/&#x27;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">") : null;
}

async function consent(url) {
  const page = await fetch(url);
  if (page.status !== 200) throw new Error(`consent page: ${page.status}`);
  const html = await page.text();
  const form = new URLSearchParams();
  for (const tag of html.match(/<input[^>]*type=hidden[^>]*>/g) || []) form.append(attr(tag, "name"), attr(tag, "value"));
  form.append("passphrase", env.PMEM_PROBE_PASSPHRASE);
  form.append("decision", "approve");
  // the first consent grants PMEM_PROBE_SCOPES (the owner ticks those); a later one (a step-up)
  // grants what the client asked for, as an owner who ticks the scope the client says it needs
  consents += 1;
  const offered = (html.match(/<input[^>]*type=checkbox[^>]*>/g) || []).map((tag) => attr(tag, "value"));
  const requested = (new URL(url).searchParams.get("scope") || "").split(" ").filter((s) => offered.includes(s));
  const asked = consents === 1 ? env.PMEM_PROBE_SCOPES : requested.join(" ");
  for (const s of asked.split(" ")) form.append("grant", s);
  const action = attr(html.match(/<form[^>]*>/)[0], "action");
  const answer = await fetch(new URL(action, base), { method: "POST", body: form, redirect: "manual" });
  const location = answer.headers.get("location");
  if (answer.status !== 302 || !location) throw new Error(`consent post: ${answer.status}`);
  say({ step: "consent", status: answer.status, scope: asked });
  return new URL(location).searchParams.get("code");
}

const client = new Client({ name: "ts-sdk-probe", version: "1.0.0" });
async function connect() {
  const first = new StreamableHTTPClientTransport(new URL(base + "/mcp"), { authProvider: provider });
  try {
    await client.connect(first);
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    await first.finishAuth(code);
    await client.connect(new StreamableHTTPClientTransport(new URL(base + "/mcp"), { authProvider: provider }));
  }
}

const text = (r) => (r.content && r.content[0] && r.content[0].text) || "";
const commit = (title) => ({
  name: "commit_memory",
  arguments: {
    title,
    kind: "decision",
    canonical_summary: env.PMEM_PROBE_EVIDENCE_TEXT,
    index_summary: title,
    evidence: [{ source_key: env.PMEM_PROBE_EVIDENCE_KEY, text: env.PMEM_PROBE_EVIDENCE_TEXT }],
  },
});

async function stepUp() {
  // a read-only grant, then a write: the 403 challenge leads the SDK to a second consent
  await connect();
  say({ step: "connected", server: client.getServerVersion(), registered: Boolean(info && info.client_id) });
  const tools = await client.listTools();
  say({ step: "tools", names: tools.tools.map((t) => t.name) });
  let write;
  try {
    write = await client.callTool(commit("TS SDK step-up"));
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
    say({ step: "step-up", consented: Boolean(code) });
    await client.transport.finishAuth(code);
    write = await client.callTool(commit("TS SDK step-up"));
  }
  say({ step: "write", error: Boolean(write.isError), text: text(write).slice(0, 80) });
}

async function session() {
  await connect();
  say({ step: "connected", server: client.getServerVersion(), registered: Boolean(info && info.client_id) });
  const tools = await client.listTools();
  say({ step: "tools", names: tools.tools.map((t) => t.name) });
  const read = await client.callTool({ name: "load_context", arguments: { limit: 3 } });
  say({ step: "read", error: Boolean(read.isError) });
  const write = await client.callTool(commit("TS SDK probe"));
  say({ step: "write", error: Boolean(write.isError), text: text(write).slice(0, 80) });
  const saves = tokenSaves;
  await new Promise((r) => setTimeout(r, Number(env.PMEM_PROBE_WAIT_MS)));
  const afterExpiry = await client.callTool({ name: "current_state", arguments: {} });
  say({ step: "refresh", error: Boolean(afterExpiry.isError), refreshed: tokenSaves > saves });
  say({ step: "restart" });
  await nextLine();
  const afterRestart = await client.callTool({ name: "load_context", arguments: { limit: 3 } });
  say({ step: "after-restart", error: Boolean(afterRestart.isError) });
}

try {
  await (env.PMEM_PROBE_MODE === "step-up" ? stepUp() : session());
  await client.close();
  say({ step: "done" });
} catch (err) {
  say({ step: "failed", error: String(err && err.message ? err.message : err).slice(0, 300) });
  process.exitCode = 1;
} finally {
  stdin.close();
  process.exit(); // open sockets of a failed client must not keep the probe alive
}
