// `splash hermes` end to end: the real Hermes Agent (PyPI, in a virtual environment under build/agent-clis) with a
// single query through the launcher, against a Splash server; it must exit 0 with the model's answer, and the
// server must have served its Chat Completions request.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { splash } from "../helpers/cli.ts";
import type { TestServer } from "../helpers/server.ts";
import { agentEnv, hermesCli, INSTALL_TIMEOUT_MS, registerServer, SCRIPTED_ANSWER, scriptedSplashTiny, served } from "../fixtures/launch/agent-clis.ts";

let bin: string;
let server: TestServer;

beforeAll(async () => {
  bin = await hermesCli();
  server = scriptedSplashTiny("sk-e2e-hermes");
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
});

test("hermes chat -q -Q", async () => {
  const run = agentEnv([bin]);
  registerServer(run.state, server, "sk-e2e-hermes");
  const before = await served(server.url);
  // Its first run would otherwise pip-install optional features into its environment (edge-tts, ≈1 min): the test
  // downloads nothing while it runs.
  const env = { ...run.env, HERMES_DISABLE_LAZY_INSTALLS: "1" };
  const r = await splash(["hermes", "--", "chat", "-q", "Say hello.", "-Q"], { env, cwd: run.cwd });
  expect(r.stderr).toContain(`using the splash-tiny server at ${server.url}`);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain(SCRIPTED_ANSWER);
  expect((await served(server.url)).chat ?? 0).toBeGreaterThan(before.chat ?? 0);
}, 90_000);
