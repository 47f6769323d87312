// `splash <tool> --url URL [--api-key KEY] [--model NAME]` with stand-in tools: the tool is pointed at the server
// elsewhere (no local server starts), with the limits that server reports; whatever the server cannot give the tool
// (no answer, a refused key, an unknown model, an API the tool needs) is said before the tool starts. And `--port`
// for the server a launcher starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pidAlive } from "../../../src/launch/process.ts";
import { ServerState } from "../../../src/launch/state.ts";
import { splash } from "../../helpers/cli.ts";
import { ScriptedModel, say } from "../../helpers/scripted-model.ts";
import { startServer, type TestServer } from "../../helpers/server.ts";

const tempDir = (name: string) => mkdtempSync(join(tmpdir(), `splash-${name}-`));

// Stand-in tools: record their environment and arguments, exit 3.
const bin = tempDir("bin");
for (const tool of ["claude", "codex", "opencode", "hermes", "qwen"]) {
  const path = join(bin, tool);
  writeFileSync(path, `#!/bin/sh\nprintf '%s\\n' "$@" > "$SPLASH_STATE_DIR/${tool}.args"\nenv > "$SPLASH_STATE_DIR/${tool}.env"\nexit 3\n`);
  chmodSync(path, 0o755);
}

function runner() {
  const state = tempDir("state");
  return {
    state,
    run: (args: string[]) => splash(args, { env: { PATH: `${bin}:/usr/bin:/bin`, SPLASH_STATE_DIR: state } }),
    env: (tool: string) => Object.fromEntries(readFileSync(join(state, `${tool}.env`), "utf8").trim().split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)])),
  };
}

// A port nothing listens on.
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe("--url: a Splash server elsewhere", () => {
  let remote: TestServer;
  let pair: TestServer;
  beforeAll(() => {
    remote = startServer({ models: [new ScriptedModel({ id: "remote-model", contextLength: 70000, maxOutputTokens: 4000, script: () => say({ content: "hi" }) })], apiKey: "sk-remote" });
    pair = startServer({ models: [new ScriptedModel({ id: "a" }), new ScriptedModel({ id: "b", contextLength: 90000 })] });
  });
  afterAll(async () => {
    await remote.stop();
    await pair.stop();
  });

  test("the tool gets the server's address, key, model and limits; nothing local is started", async () => {
    const r = runner();
    const out = await r.run(["claude", "--url", remote.url, "--api-key", "sk-remote", "--", "-p", "hi"]);
    expect(out.code).toBe(3);
    expect(out.stderr).toContain(`using remote-model at ${remote.url}`);
    const env = r.env("claude");
    expect(env).toMatchObject({ ANTHROPIC_BASE_URL: remote.url, ANTHROPIC_AUTH_TOKEN: "sk-remote", ANTHROPIC_MODEL: "remote-model", CLAUDE_CODE_AUTO_COMPACT_WINDOW: "70000", CLAUDE_CODE_MAX_OUTPUT_TOKENS: "4000" });
    expect(existsSync(join(r.state, "servers"))).toBe(false);
  });

  test("a URL given with /v1 (as OpenAI clients take it) or a trailing slash means the same server", async () => {
    const r = runner();
    for (const url of [`${remote.url}/v1`, `${remote.url}/v1/`, `${remote.url}/`]) {
      expect((await r.run(["codex", "--url", url, "--api-key", "sk-remote"])).code).toBe(3);
      expect(readFileSync(join(r.state, "codex.args"), "utf8")).toContain(`model_providers.splash.base_url="${remote.url}/v1"`);
      expect((await r.run(["opencode", "--url", url, "--api-key", "sk-remote"])).code).toBe(3);
      expect(JSON.parse(r.env("opencode").OPENCODE_CONFIG_CONTENT!).provider.splash.options.baseURL).toBe(`${remote.url}/v1`);
    }
  });

  test("--model picks one of several; without it a server with several is a clear error", async () => {
    const r = runner();
    const several = await r.run(["qwen", "--url", pair.url]);
    expect(several.code).toBe(1);
    expect(several.stderr).toContain(`${pair.url} serves several models (a, b)`);
    expect(several.stderr).toContain("pick one with --model");
    expect((await r.run(["hermes", "--url", pair.url, "--model", "b"])).code).toBe(3);
    const hermes = Bun.YAML.parse(readFileSync(join(r.state, "launch", "hermes", "config.yaml"), "utf8")) as { model: Record<string, unknown> };
    expect(hermes.model).toMatchObject({ base_url: `${pair.url}/v1`, default: "b", context_length: 90000 });
    const unknown = await r.run(["qwen", "--url", pair.url, "--model", "c"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(`${pair.url} does not serve c; it serves: a, b`);
  });

  test("a missing or wrong key, and a server that is not there, are said before the tool starts", async () => {
    const r = runner();
    for (const key of [[], ["--api-key", "guess"]]) {
      const out = await r.run(["codex", "--url", remote.url, ...key]);
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/refused the API key \(HTTP 401: (missing|invalid) API key/);
      expect(out.stderr).toContain("pass the server's key with --api-key");
    }
    const port = await closedPort();
    const gone = await r.run(["claude", "--url", `http://127.0.0.1:${port}`]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`cannot reach http://127.0.0.1:${port}/v1/models`);
    expect(existsSync(join(r.state, "codex.args"))).toBe(false);
    expect(existsSync(join(r.state, "claude.args"))).toBe(false);
  });

  test("--print-config shows the plan for the server elsewhere", async () => {
    const r = runner();
    const out = await r.run(["codex", "--url", remote.url, "--api-key", "sk-remote", "--print-config"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(`# Codex CLI (OpenAI Responses) on remote-model, served at ${remote.url}`);
    expect(out.stdout).toContain("export SPLASH_API_KEY=sk-remote");
    expect(existsSync(join(r.state, "codex.args"))).toBe(false);
  });

  test("misused options are usage errors", async () => {
    const r = runner();
    for (const [args, message] of [
      [["claude", "--model", "x"], "--api-key and --model go with --url"],
      [["claude", "--api-key", "k"], "--api-key and --model go with --url"],
      [["claude", "splash-tiny", "--url", remote.url], "MODEL (splash-tiny) names a local model to serve"],
      [["claude", "--url", remote.url, "--port", "9000"], "--port is for the server a launcher starts"],
      [["claude", "--url", remote.url, "--api-key="], "--api-key is empty"],
      [["claude", "--port", "0"], "--port \"0\": expected an integer ≥ 1"],
    ] as const) {
      const out = await r.run([...args]);
      expect({ args, code: out.code }).toEqual({ args, code: 2 });
      expect(out.stderr).toContain(message);
    }
    const notUrl = await r.run(["claude", "--url", "gpu-box:8000"]);
    expect(notUrl.code).toBe(1);
    expect(notUrl.stderr).toContain("expected an http:// or https:// address");
  });
});

describe("--url: another kind of server", () => {
  // A stand-in for an OpenAI-compatible server that has Chat Completions only and reports its context as vLLM does.
  const chatOnly = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      const path = new URL(request.url).pathname;
      if (path === "/v1/models") return Response.json({ object: "list", data: [{ id: "Qwen/Qwen3.8-27B", object: "model", owned_by: "vllm", max_model_len: 131072 }] });
      if (path === "/v1/chat/completions" && request.method === "POST") return Response.json({ error: { message: "messages: field required" } }, { status: 400 });
      return Response.json({ detail: "Not Found" }, { status: 404 });
    },
  });
  afterAll(() => chatOnly.stop(true));
  const url = `http://127.0.0.1:${chatOnly.port}`;

  test("a tool whose API the server lacks is refused, naming what is missing", async () => {
    const r = runner();
    for (const [tool, api, endpoint, title] of [
      ["codex", "OpenAI Responses", "/v1/responses", "Codex CLI"],
      ["claude", "Anthropic Messages", "/v1/messages", "Claude Code"],
    ] as const) {
      const out = await r.run([tool, "--url", url]);
      expect(out.code).toBe(1);
      expect(out.stderr).toContain(`${url} does not serve the ${api} API (POST ${endpoint} answered HTTP 404), which ${title} speaks`);
      expect(existsSync(join(r.state, `${tool}.args`))).toBe(false);
    }
  });

  test("a tool on the API it has runs, with the context the server reports (vLLM's max_model_len)", async () => {
    const r = runner();
    expect((await r.run(["opencode", "--url", url])).code).toBe(3);
    const config = JSON.parse(r.env("opencode").OPENCODE_CONFIG_CONTENT!);
    expect(config.model).toBe("splash/Qwen/Qwen3.8-27B");
    expect(config.provider.splash.models["Qwen/Qwen3.8-27B"].limit).toEqual({ context: 131072, output: 32768 });
  });
});

describe("--port: the server a launcher starts", () => {
  test("listens on the port given; one that is taken is refused before anything starts", async () => {
    const r = runner();
    const port = await closedPort();
    const out = await r.run(["codex", "--port", String(port)]);
    const state = ServerState.parse(JSON.parse(readFileSync(join(r.state, "servers", "splash-tiny.json"), "utf8")));
    try {
      expect(out.code).toBe(3);
      expect(state.port).toBe(port);
      expect(readFileSync(join(r.state, "codex.args"), "utf8")).toContain(`base_url="http://127.0.0.1:${port}/v1"`);
      const other = runner();
      const taken = await other.run(["codex", "--port", String(port)]);
      expect(taken.code).toBe(1);
      expect(taken.stderr).toContain(`cannot listen on 127.0.0.1:${port}: the port is in use`);
      expect(existsSync(join(other.state, "codex.args"))).toBe(false);
    } finally {
      const stop = await r.run(["stop"]);
      expect(stop.stderr).toContain(`stopped the splash-tiny server (pid ${state.pid})`);
      expect(pidAlive(state.pid)).toBe(false);
    }
  }, 60_000);
});
