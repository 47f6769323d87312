// The launcher's own server: `splash codex` with no server running starts the real `splash serve` of the embedded
// model in the background, waits for it, runs the real Codex CLI against it (which must exit 0 with an answer),
// leaves the server running for the next launch (its log shows the agent's requests), and `splash stop` ends it;
// the same from the compiled executable.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { $ } from "bun";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, splash, type CliResult } from "../helpers/cli.ts";
import { scrapeMetrics } from "../helpers/server.ts";
import { commandLine, pidAlive } from "../../src/launch/process.ts";
import { ServerState } from "../../src/launch/state.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis } from "../fixtures/launch/agent-clis.ts";

let run: ReturnType<typeof agentEnv>;
let first: CliResult;
let state: ServerState;

const stateFile = () => `${run.state}/servers/splash-tiny.json`;

beforeAll(async () => {
  run = agentEnv([await npmClis()]);
  first = await splash(["codex", "--", "exec", "--skip-git-repo-check", "--ephemeral", "Say hello."], { env: run.env, cwd: run.cwd });
  state = ServerState.parse(JSON.parse(readFileSync(stateFile(), "utf8")));
}, INSTALL_TIMEOUT_MS);

afterAll(async () => {
  if (state && pidAlive(state.pid)) process.kill(state.pid, "SIGKILL");
});

test("the first launch starts splash serve for the embedded model and Codex gets an answer from it", async () => {
  expect(first.stderr).toContain("starting the splash-tiny server");
  expect(first.stderr).toMatch(/splash-tiny is ready at http:\/\/127\.0\.0\.1:\d+/);
  expect(first.code).toBe(0);
  expect(first.stdout.trim().length).toBeGreaterThan(0);
  const log = readFileSync(state.log, "utf8");
  expect(log).toContain('"event":"listening"');
  // The server's request log shows what the agent sent and got.
  expect(log).toMatch(/ POST \/v1\/responses 200 model=splash-tiny prompt=\d+ cached=\d+ completion=\d+ ttft=\d+ms total=\d+ms finish=\w+ client=127\.0\.0\.1 agent="?codex_exec\//);
  const metrics = await scrapeMetrics(`http://127.0.0.1:${state.port}`);
  expect(metrics.get('splash_requests_total{surface="responses",status="200"}') ?? 0).toBeGreaterThan(0);
});

test("the server keeps running for the next launch, which finds it", async () => {
  expect(pidAlive(state.pid)).toBe(true);
  const r = await splash(["codex", "--print-config"], { env: run.env, cwd: run.cwd });
  expect(r.code).toBe(0);
  expect(r.stdout).toContain(`served at http://127.0.0.1:${state.port} by pid ${state.pid}`);
});

test("splash stop ends it", async () => {
  const r = await splash(["stop"], { env: run.env });
  expect(r.code).toBe(0);
  expect(r.stderr).toContain(`stopped the splash-tiny server (pid ${state.pid}`);
  expect(pidAlive(state.pid)).toBe(false);
});

// The compiled binary starts itself as the server (not Bun plus a script path).
test("from the single executable, the launcher starts that executable's own serve", async () => {
  const dir = mkdtempSync(join(tmpdir(), "splash-bin-"));
  const exe = join(dir, "splash");
  await $`${process.execPath} ${join(repoRoot, "scripts/build/binary.ts")} --outfile ${exe}`.quiet();
  // A stand-in tool: the launch under test is the server's, not the tool's.
  writeFileSync(join(dir, "codex"), "#!/bin/sh\nexit 0\n");
  chmodSync(join(dir, "codex"), 0o755);
  const env = agentEnv([dir]);
  const proc = Bun.spawn([exe, "codex"], { env: { ...process.env, ...env.env }, cwd: env.cwd, stdout: "pipe", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  expect(stderr).toContain("splash-tiny is ready");
  expect(code).toBe(0);
  const s = ServerState.parse(JSON.parse(readFileSync(`${env.state}/servers/splash-tiny.json`, "utf8")));
  try {
    expect(commandLine(s.pid)?.slice(0, 2)).toEqual([exe, "serve"]);
  } finally {
    const stop = Bun.spawn([exe, "stop"], { env: { ...process.env, ...env.env }, stderr: "pipe" });
    expect(await new Response(stop.stderr).text()).toContain("stopped the splash-tiny server");
  }
  expect(pidAlive(s.pid)).toBe(false);
}, 120_000);
