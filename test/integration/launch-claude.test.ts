// `splash claude` end to end: the real Claude Code (npm, pinned for Node 20) in print mode through the launcher,
// against a Splash server; it must exit 0 with the model's answer, and the server must have served its request.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { splash, type CliResult } from "../helpers/cli.ts";
import { scrapeMetrics, type TestServer } from "../helpers/server.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis, registerServer, SCRIPTED_ANSWER, scriptedSplashTiny, served } from "../fixtures/launch/agent-clis.ts";

let bin: string;
let server: TestServer;
let before: Record<string, number>;
let run: CliResult;

beforeAll(async () => {
  bin = await npmClis();
  server = scriptedSplashTiny("sk-e2e-claude");
  const env = agentEnv([bin]);
  registerServer(env.state, server, "sk-e2e-claude");
  before = await served(server.url);
  run = await splash(["claude", "--", "-p", "Say hello.", "--output-format", "json"], { env: env.env, cwd: env.cwd });
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
});

test("the launcher reuses the server and Claude Code's request reaches /v1/messages with the key", async () => {
  expect(run.stderr).toContain(`using the splash-tiny server at ${server.url}`);
  const metrics = await scrapeMetrics(server.url);
  const messages = [...metrics].filter(([series]) => series.startsWith('splash_requests_total{surface="messages"'));
  expect(messages.length).toBeGreaterThan(0);
  expect(messages.some(([series]) => /status="40[14]"/.test(series))).toBe(false);
});

// Claude Code 2.1.197 sends a `{"role":"system"}` input message (its agent-type list) among the turns; the server
// takes it as a system message placed where it was sent (src/chat/template-vars.ts).
test("claude -p --output-format json answers and exits 0", async () => {
  expect(run.code).toBe(0);
  const result = JSON.parse(run.stdout);
  expect(result).toMatchObject({ type: "result", subtype: "success", is_error: false });
  expect(result.result).toContain(SCRIPTED_ANSWER);
  expect((await served(server.url)).messages ?? 0).toBeGreaterThan(before.messages ?? 0);
});
