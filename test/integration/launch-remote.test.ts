// `splash codex --url` and `splash claude --url` end to end: the real Codex CLI and Claude Code, launched against a
// second Splash server (its own process, bound to every interface with a key, a scripted model) reached by this
// machine's network address as a remote one would be. Each must exit 0 with the model's answer; no local server is
// started; the remote server's request log shows what each agent sent and got.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { networkInterfaces } from "node:os";
import { join } from "node:path";
import { splash } from "../helpers/cli.ts";
import { agentEnv, INSTALL_TIMEOUT_MS, npmClis, SCRIPTED_ANSWER } from "../fixtures/launch/agent-clis.ts";

const SCRIPTED = join(import.meta.dir, "..", "fixtures", "launch", "scripted-serve.ts");
const KEY = "sk-remote-e2e";

// An address of this machine other clients would use (loopback only when it has no other).
const address = Object.values(networkInterfaces()).flat().find((a) => a && a.family === "IPv4" && !a.internal)?.address ?? "127.0.0.1";

let bin: string;
let remote: Bun.Subprocess<"ignore", "pipe", "pipe">;
let url: string;
let remoteLog = "";

beforeAll(async () => {
  bin = await npmClis();
  remote = Bun.spawn([process.execPath, SCRIPTED, "--host", "0.0.0.0", "--port", "0", "--api-key", KEY, "--model", "remote-qwen"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  void (async () => {
    for await (const chunk of remote.stderr) remoteLog += new TextDecoder().decode(chunk);
  })();
  let out = "";
  for await (const chunk of remote.stdout) {
    out += new TextDecoder().decode(chunk);
    const line = out.split("\n").find((l) => l.includes('"listening"'));
    if (line) {
      url = `http://${address}:${new URL((JSON.parse(line) as { url: string }).url).port}`;
      break;
    }
  }
}, INSTALL_TIMEOUT_MS);

afterAll(() => {
  remote?.kill();
});

test("codex exec through --url", async () => {
  const run = agentEnv([bin]);
  const r = await splash(["codex", "--url", url, "--api-key", KEY, "--", "exec", "--skip-git-repo-check", "--ephemeral", "Say hello."], { env: run.env, cwd: run.cwd });
  expect(r.stderr).toContain(`using remote-qwen at ${url}`);
  expect(r.code).toBe(0);
  expect(r.stdout.trim()).toBe(SCRIPTED_ANSWER);
  expect(existsSync(join(run.state, "servers"))).toBe(false);
  expect(remoteLog).toMatch(/ POST \/v1\/responses 200 model=remote-qwen prompt=\d+ cached=0 completion=\d+ ttft=\d+ms total=\d+ms finish=stop client=\S+ agent="?codex_exec\//);
}, 90_000);

test("claude -p through --url", async () => {
  const run = agentEnv([bin]);
  const r = await splash(["claude", "--url", `${url}/v1`, "--api-key", KEY, "--", "-p", "Say hello.", "--output-format", "json"], { env: run.env, cwd: run.cwd });
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout)).toMatchObject({ type: "result", subtype: "success", is_error: false });
  expect(JSON.parse(r.stdout).result).toContain(SCRIPTED_ANSWER);
  expect(remoteLog).toMatch(/ POST \/v1\/messages 200 model=remote-qwen .*finish=stop client=\S+ agent="claude-cli\//);
}, 90_000);
