// `splash codex` end to end: the real Codex CLI (npm) in exec mode through the launcher, against a Splash server;
// it must exit 0 with the model's answer on stdout, and the server must have served its Responses request.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { splash } from "../helpers/cli.ts";
import type { TestServer } from "../helpers/server.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis, registerServer, SCRIPTED_ANSWER, scriptedSplashTiny, served } from "../fixtures/launch/agent-clis.ts";

let bin: string;
let server: TestServer;

beforeAll(async () => {
  bin = await npmClis();
  server = scriptedSplashTiny("sk-e2e-codex");
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  await server?.stop();
});

test("codex exec --skip-git-repo-check", async () => {
  const run = agentEnv([bin]);
  registerServer(run.state, server, "sk-e2e-codex");
  const before = await served(server.url);
  // stdin is not a terminal and not a pipe (the helper gives /dev/null): Codex would otherwise wait to read it.
  const r = await splash(["codex", "--", "exec", "--skip-git-repo-check", "--ephemeral", "Say hello."], { env: run.env, cwd: run.cwd });
  expect(r.stderr).toContain(`using the splash-tiny server at ${server.url}`);
  expect(r.code).toBe(0);
  expect(r.stdout.trim()).toBe(SCRIPTED_ANSWER);
  expect(r.stderr).not.toContain("Model metadata for `splash-tiny` not found");
  expect((await served(server.url)).responses ?? 0).toBeGreaterThan(before.responses ?? 0);
}, 90_000);
