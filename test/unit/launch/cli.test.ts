// `splash <tool>` and `splash stop` as a user runs them (child processes of `bun src/main.ts`): the not-installed
// message, the whole launch flow with a stand-in tool on PATH, --print-config, and stop.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splash } from "../../helpers/cli.ts";
import { startServer, type TestServer } from "../../helpers/server.ts";
import { ScriptedModel, say } from "../../helpers/scripted-model.ts";
import { ensureServer, terminate } from "../../../src/launch/server.ts";
import { readState, writeState } from "../../../src/launch/state.ts";

const SCRIPTED = join(import.meta.dir, "..", "..", "fixtures", "launch", "scripted-serve.ts");

function tempDir(name: string): string {
  return mkdtempSync(join(tmpdir(), `splash-${name}-`));
}

describe("a tool that is not installed", () => {
  test.each([
    ["claude", "npm install -g @anthropic-ai/claude-code"],
    ["codex", "npm install -g @openai/codex"],
    ["opencode", "npm install -g opencode-ai"],
    ["qwen", "npm install -g @qwen-code/qwen-code"],
    ["hermes", "pip install hermes-agent"],
  ])("%s: says how to install it and exits 2, before starting anything", async (tool, install) => {
    const state = tempDir("state");
    const r = await splash([tool], { env: { PATH: "/nonexistent", HOME: tempDir("home"), SPLASH_STATE_DIR: state } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("is not installed");
    expect(r.stderr).toContain(install);
    expect(readdirSync(state)).toEqual([]);
  });
});

describe("with a server running for the model", () => {
  let server: TestServer;
  let state: string;
  let bin: string;

  beforeAll(() => {
    const model = new ScriptedModel({ id: "scripted-tiny", contextLength: 70000, maxOutputTokens: 4000, script: () => say({ content: "hi" }) });
    server = startServer({ models: [model], apiKey: "sk-live" });
    state = tempDir("state");
    process.env.SPLASH_STATE_DIR = state;
    // This test process serves it: its pid is alive and /health lists the model, as a launched server's would.
    writeState({ key: "scripted-tiny", model: "scripted-tiny", pid: process.pid, port: server.port, apiKey: "sk-live", version: "0.1.0", startedAt: new Date().toISOString(), log: "/dev/null" });
    // Stand-in tools: print what they were given, exit 3.
    bin = tempDir("bin");
    for (const tool of ["claude", "codex", "opencode", "hermes", "qwen"]) {
      const path = join(bin, tool);
      writeFileSync(path, `#!/bin/sh\nprintf '%s\\n' "$@" > "$SPLASH_STATE_DIR/${tool}.args"\nenv > "$SPLASH_STATE_DIR/${tool}.env"\nexit 3\n`);
      chmodSync(path, 0o755);
    }
  });

  afterAll(async () => {
    await server.stop();
  });

  const run = (args: string[]) => splash(args, { env: { PATH: `${bin}:/usr/bin:/bin`, SPLASH_STATE_DIR: state, USER_OWN_SETTING: "kept" } });
  const envOf = async (tool: string) => Object.fromEntries((await Bun.file(join(state, `${tool}.env`)).text()).trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]));
  const argsOf = async (tool: string) => (await Bun.file(join(state, `${tool}.args`)).text()).trimEnd().split("\n");

  test("claude: reuses the server, sets the env, keeps the user's, passes the arguments, returns the exit code", async () => {
    const r = await run(["claude", "scripted-tiny", "--", "-p", "hello there", "--output-format", "json"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`using the scripted-tiny server at ${server.url}`);
    const env = await envOf("claude");
    expect(env.ANTHROPIC_BASE_URL).toBe(server.url);
    expect(env.ANTHROPIC_AUTH_TOKEN).toBe("sk-live");
    expect(env.ANTHROPIC_MODEL).toBe("scripted-tiny");
    // The served limits, not a spec's: the server is asked.
    expect(env.CLAUDE_CODE_AUTO_COMPACT_WINDOW).toBe("70000");
    expect(env.CLAUDE_CODE_MAX_OUTPUT_TOKENS).toBe("4000");
    expect(env.USER_OWN_SETTING).toBe("kept");
    expect(await argsOf("claude")).toEqual(["-p", "hello there", "--output-format", "json"]);
    expect(existsSync(join(state, "launch", "claude", ".claude.json"))).toBe(true);
  });

  test("qwen: a conflicting --model of the user's wins, and the launcher says so", async () => {
    const r = await run(["qwen", "scripted-tiny", "--", "--model", "mine", "-p", "x"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain("your --model mine is passed as given, instead of Splash's scripted-tiny");
    expect(await argsOf("qwen")).toEqual(["--auth-type", "openai", "--model", "mine", "-p", "x"]);
  });

  test("codex, opencode, hermes: their config lands in the Splash-owned directory", async () => {
    for (const tool of ["codex", "opencode", "hermes"]) expect((await run([tool, "scripted-tiny"])).code).toBe(3);
    expect((await envOf("codex")).CODEX_HOME).toBe(join(state, "launch", "codex"));
    expect(existsSync(join(state, "launch", "codex", "config.toml"))).toBe(true);
    expect(JSON.parse((await envOf("opencode")).OPENCODE_CONFIG_CONTENT!).provider.splash.options.baseURL).toBe(`${server.url}/v1`);
    const hermes = Bun.YAML.parse(await Bun.file(join(state, "launch", "hermes", "config.yaml")).text()) as { model: { base_url: string; context_length: number } };
    expect(hermes.model).toMatchObject({ base_url: `${server.url}/v1`, context_length: 70000 });
  });

  test("--print-config shows the running server's address, key and limits, and runs nothing", async () => {
    const r = await run(["codex", "scripted-tiny", "--print-config", "--", "exec", "hi"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`model_providers.splash.base_url="${server.url}/v1"`);
    expect(r.stdout).toContain("export SPLASH_API_KEY=sk-live");
    expect(r.stdout).toContain('"context_window": 70000');
    expect(r.stdout).toMatch(/\nexec hi\n$|' exec hi\n$/);
  });
});

test("--print-config without a server: the spec's limits and a placeholder port; nothing is written", async () => {
  const state = tempDir("state");
  const r = await splash(["opencode", "qwen3.8-27b", "--print-config"], { env: { SPLASH_STATE_DIR: state } });
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("no server runs for it yet");
  expect(r.stdout).toContain('"baseURL":"http://127.0.0.1:PORT/v1"');
  expect(r.stdout).toMatch(/"limit":\{"context":\d+,"output":\d+\}/);
  expect(readdirSync(state)).toEqual([]);
});

test("an unknown model is refused before anything starts", async () => {
  const state = tempDir("state");
  const bin = tempDir("bin");
  writeFileSync(join(bin, "claude"), "#!/bin/sh\nexit 0\n");
  chmodSync(join(bin, "claude"), 0o755);
  const r = await splash(["claude", "no-such-model"], { env: { PATH: `${bin}:/usr/bin:/bin`, SPLASH_STATE_DIR: state } });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("no model or directory named no-such-model");
});

describe("splash stop", () => {
  test("stops every launched server with --all; says so when none runs", async () => {
    const state = tempDir("state");
    process.env.SPLASH_STATE_DIR = state;
    const servers = await Promise.all(
      ["one", "two"].map((key) =>
        ensureServer(key, async () => ({ key, model: "scripted-tiny", command: (port, apiKey) => [process.execPath, SCRIPTED, "--port", String(port), "--api-key", apiKey] })),
      ),
    );
    try {
      const r = await splash(["stop", "--all"], { env: { SPLASH_STATE_DIR: state } });
      expect(r.code).toBe(0);
      expect(r.stderr.match(/stopped the scripted-tiny server/g)?.length).toBe(2);
      expect(readState("one")).toBeUndefined();
      const again = await splash(["stop"], { env: { SPLASH_STATE_DIR: state } });
      expect(again.code).toBe(0);
      expect(again.stderr).toContain("no server started by a launcher is running");
    } finally {
      await Promise.all(servers.map((s) => terminate(s.pid, 1000)));
    }
  });

  test("MODEL and --all together are a usage error", async () => {
    const r = await splash(["stop", "x", "--all"], { env: { SPLASH_STATE_DIR: tempDir("state") } });
    expect(r.code).toBe(2);
  });
});
