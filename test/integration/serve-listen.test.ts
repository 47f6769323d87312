// `splash serve` refuses what it cannot do well, before the model loads: a port another server holds (a second
// server never shares it), a port it may not use (said as such), an empty API key. The key may come from
// SPLASH_API_KEY.
import { afterAll, describe, expect, test } from "bun:test";
import { ListenError, createServer } from "../../src/server/server.ts";
import { repoRoot, splash } from "../helpers/cli.ts";
import { ScriptedModel } from "../helpers/scripted-model.ts";
import { post, startServer } from "../helpers/server.ts";
import { splashServe } from "../helpers/splash-serve.ts";

describe("a port another Splash server holds", () => {
  const first = startServer({ models: [new ScriptedModel({ id: "first" })] });
  afterAll(() => first.stop());

  test("a second server on it fails to start, and the first keeps all the traffic", async () => {
    let error: unknown;
    try {
      const second = createServer({ host: "127.0.0.1", port: first.port, models: [new ScriptedModel({ id: "second" })] });
      await second.stop();
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ListenError);
    expect((error as ListenError).message).toBe(`cannot listen on 127.0.0.1:${first.port}: the port is in use`);
    for (let i = 0; i < 20; i++) {
      const health = (await (await fetch(`${first.url}/health`)).json()) as { models: string[] };
      expect(health.models).toEqual(["first"]);
    }
  });

  test("splash serve on it exits 1 with the port-in-use message, before loading the model", async () => {
    const r = await splash(["serve", "--port", String(first.port)]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot listen on 127.0.0.1:${first.port}: the port is in use`);
    expect(r.stderr).toContain("pick another --port, or stop what is using it");
    expect(r.stderr).not.toContain("loading");
  });
});

// Ports below 1024 need privileges; as root the test runs the command without the capability that grants them (still
// root, so a checkout only root may read works too).
const asRoot = process.getuid?.() === 0;
const lowPortsOpen = Number(await Bun.file("/proc/sys/net/ipv4/ip_unprivileged_port_start").text().catch(() => "1024")) <= 80;

test.skipIf(process.platform !== "linux" || lowPortsOpen)("a port this user may not use: the error says permission, not 'in use'", async () => {
  const serve = [process.execPath, `${repoRoot}/src/main.ts`, "serve", "--port", "80"];
  const cmd = asRoot ? ["setpriv", "--bounding-set=-net_bind_service", ...serve] : serve;
  const proc = Bun.spawn(cmd, { env: { ...process.env, HOME: "/tmp", XDG_CACHE_HOME: "/tmp" }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
  expect(code).toBe(1);
  expect(stderr).toContain("cannot listen on 127.0.0.1:80: permission denied");
  expect(stderr).toContain("ports below 1024 need administrator rights");
  expect(stderr).not.toContain("stop what is using it");
});

describe("the API key", () => {
  test("--api-key= (empty) is refused, as is an empty SPLASH_API_KEY", async () => {
    for (const args of [["--api-key="], ["--api-key", ""], ["--api-key", "  "]]) {
      const r = await splash(["serve", ...args]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("--api-key is empty");
    }
    const r = await splash(["serve"], { env: { SPLASH_API_KEY: "" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("SPLASH_API_KEY is set but empty");
  });

  test("SPLASH_API_KEY is the key when --api-key is not given; --api-key wins over it", async () => {
    const body = { model: "splash-tiny", max_tokens: 1, messages: [{ role: "user", content: "Hi" }] };
    const fromEnv = await splashServe(["--draft", "none"], { SPLASH_API_KEY: "sk-env" });
    try {
      expect((await post(`${fromEnv.url}/v1/messages`, body)).status).toBe(401);
      expect((await post(`${fromEnv.url}/v1/messages`, body, { "x-api-key": "sk-env" })).status).toBe(200);
    } finally {
      await fromEnv.stop();
    }
    const given = await splashServe(["--draft", "none", "--api-key", "sk-flag"], { SPLASH_API_KEY: "sk-env" });
    try {
      expect((await post(`${given.url}/v1/messages`, body, { "x-api-key": "sk-env" })).status).toBe(401);
      expect((await post(`${given.url}/v1/messages`, body, { "x-api-key": "sk-flag" })).status).toBe(200);
    } finally {
      await given.stop();
    }
  }, 60_000);
});

describe("access and limit options", () => {
  test("bad values are usage errors, before the model loads", async () => {
    for (const [args, message] of [
      [["--allow-origin", "localhost:5173"], "expected origins such as http://localhost:5173"],
      [["--allow-origin", "http://localhost:5173/app"], "no path"],
      [["--allow-host", "a,,b"], "expected names separated by commas"],
      [["--max-body", "100"], "expected at least 1K"],
      [["--max-body", "lots"], "expected a size such as 512M"],
      [["--drain-timeout", "-1"], "--drain-timeout"],
      [["--log-format", "xml"], "Expected one of: text, json"],
    ] as const) {
      const r = await splash(["serve", ...args]);
      expect({ args, code: r.code }).toEqual({ args, code: 2 });
      expect(r.stderr).toContain(message);
    }
  });

  test("--allow-host, --allow-origin and --max-body reach the server", async () => {
    const server = await splashServe(["--draft", "none", "--allow-host", "llm.example,.corp.example", "--allow-origin", "http://localhost:5173", "--max-body", "2K"]);
    try {
      const body = { model: "splash-tiny", max_tokens: 1, messages: [{ role: "user", content: "Hi" }] };
      expect((await post(`${server.url}/v1/messages`, body, { host: "llm.example" })).status).toBe(200);
      expect((await post(`${server.url}/v1/messages`, body, { host: "gpu.corp.example:8080" })).status).toBe(200);
      expect((await post(`${server.url}/v1/messages`, body, { host: "other.example" })).status).toBe(403);
      const cors = await post(`${server.url}/v1/messages`, body, { origin: "http://localhost:5173" });
      expect(cors.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
      expect((await post(`${server.url}/v1/messages`, body, { origin: "http://localhost:5174" })).status).toBe(403);
      expect((await post(`${server.url}/v1/messages`, { ...body, pad: "x".repeat(3000) })).status).toBe(413);
    } finally {
      await server.stop();
    }
  }, 60_000);
});
