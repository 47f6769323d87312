// `splash qwen` end to end: the real Qwen Code (npm, its last release for Node 20) in headless mode through the
// launcher, against a Splash server; it must exit 0 with the model's answer, and the server must have served it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { splash } from "../helpers/cli.ts";
import type { TestServer } from "../helpers/server.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis, registerServer, SCRIPTED_ANSWER, scriptedSplashTiny, served } from "../fixtures/launch/agent-clis.ts";

let bin: string;
let server: TestServer;

beforeAll(async () => {
  bin = await npmClis();
  server = scriptedSplashTiny("sk-e2e-qwen");
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
});

test("qwen -p --output-format json", async () => {
  const run = agentEnv([bin]);
  registerServer(run.state, server, "sk-e2e-qwen");
  const before = await served(server.url);
  const r = await splash(["qwen", "--", "-p", "Say hello.", "--output-format", "json"], { env: run.env, cwd: run.cwd });
  expect(r.stderr).toContain(`using the splash-tiny server at ${server.url}`);
  expect(r.code).toBe(0);
  const messages = JSON.parse(r.stdout) as { type: string; subtype?: string; is_error?: boolean; result?: string }[];
  expect(messages.at(-1)).toMatchObject({ type: "result", subtype: "success", is_error: false });
  expect(messages.at(-1)!.result).toContain(SCRIPTED_ANSWER);
  expect((await served(server.url)).chat ?? 0).toBeGreaterThan(before.chat ?? 0);
}, 90_000);
