// `splash opencode` end to end: the real OpenCode (npm) in `run` mode through the launcher, against a Splash server;
// it must exit 0 with the model's answer among its JSON events, and the server must have served its requests.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { splash } from "../helpers/cli.ts";
import type { TestServer } from "../helpers/server.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis, registerServer, SCRIPTED_ANSWER, scriptedSplashTiny, served } from "../fixtures/launch/agent-clis.ts";

let bin: string;
let server: TestServer;

beforeAll(async () => {
  bin = await npmClis();
  server = scriptedSplashTiny("sk-e2e-opencode");
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
});

test("opencode run --format json", async () => {
  const run = agentEnv([bin]);
  registerServer(run.state, server, "sk-e2e-opencode");
  const before = await served(server.url);
  const r = await splash(["opencode", "--", "run", "--format", "json", "Say hello."], { env: run.env, cwd: run.cwd });
  expect(r.stderr).toContain(`using the splash-tiny server at ${server.url}`);
  expect(r.code).toBe(0);
  const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { type: string; part?: { text?: string } });
  expect(events.filter((e) => e.type === "text").map((e) => e.part?.text).join("")).toContain(SCRIPTED_ANSWER);
  // A title request with the small model, then the turn: both on the local model.
  expect((await served(server.url)).chat ?? 0).toBeGreaterThanOrEqual((before.chat ?? 0) + 2);
}, 90_000);
