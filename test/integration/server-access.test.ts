// Who may reach the server, over real sockets with forged headers: Host names (DNS rebinding), browser Origins
// (cross-site requests, CORS preflights), and the request body limit; each refusal in its surface's error shape, and
// a refused request never reaches the model.
import { afterAll, describe, expect, test } from "bun:test";
import { hostname } from "node:os";
import { ScriptedModel } from "../helpers/scripted-model.ts";
import { startServer } from "../helpers/server.ts";

const user = [{ role: "user", content: "hi" }];
const surfaces = {
  chat: { path: "/v1/chat/completions", body: { model: "m", messages: user }, shape: "openai" },
  responses: { path: "/v1/responses", body: { model: "m", input: "hi" }, shape: "openai" },
  messages: { path: "/v1/messages", body: { model: "m", max_tokens: 16, messages: user }, shape: "anthropic" },
  tokenize: { path: "/tokenize", body: { text: "hi" }, shape: "openai" },
} as const;
const names = Object.keys(surfaces) as (keyof typeof surfaces)[];

// The error's type and code in whichever shape the surface uses.
async function errorOf(res: Response, shape: "openai" | "anthropic"): Promise<{ type: string; code?: string; message: string }> {
  const json = (await res.json()) as { type?: string; error: { type: string; code?: string; message: string } };
  if (shape === "anthropic") {
    expect(json.type).toBe("error");
    expect(Object.keys(json.error).sort()).toEqual(["message", "type"]);
  } else expect(Object.keys(json.error).sort()).toEqual(["code", "message", "param", "type"]);
  return json.error;
}

const send = (url: string, path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url + path, { method: "POST", body: typeof body === "string" ? body : JSON.stringify(body), headers: { "content-type": "application/json", ...headers } });

describe("Host: a loopback server answers only to its own names", () => {
  const model = new ScriptedModel({ id: "m" });
  const server = startServer({ models: [model] });
  afterAll(() => server.stop());

  test.each(names)("%s: a rebound name is refused with 403 in the surface's shape, before the model runs", async (name) => {
    const { path, body, shape } = surfaces[name];
    const calls = model.calls.length;
    for (const stream of [false, true]) {
      const res = await send(server.url, path, { ...body, stream }, { host: `attacker.example:${server.port}` });
      expect(res.status).toBe(403);
      expect(res.headers.get("content-type")).toContain("application/json");
      const error = await errorOf(res, shape);
      expect(error.type).toBe("permission_error");
      expect(error.message).toContain("'attacker.example'");
      expect(error.message).toContain("--allow-host attacker.example");
      if (shape === "openai") expect(error.code).toBe("host_not_allowed");
    }
    expect(model.calls.length).toBe(calls);
  });

  test("the plain endpoints too: /health, /metrics, /", async () => {
    for (const path of ["/health", "/metrics", "/"]) {
      expect((await fetch(server.url + path, { headers: { host: "attacker.example" } })).status).toBe(403);
    }
  });

  test("its address, localhost, 127.0.0.1 and [::1] (any port, any case) are answered", async () => {
    for (const host of [`127.0.0.1:${server.port}`, `localhost:${server.port}`, "LOCALHOST", `[::1]:${server.port}`, "localhost.", "127.0.0.1"]) {
      const res = await send(server.url, "/v1/chat/completions", surfaces.chat.body, { host });
      expect({ host, status: res.status }).toEqual({ host, status: 200 });
    }
  });

  test("a name that merely starts like localhost, or another address, is not", async () => {
    for (const host of ["localhost.attacker.example", "127.0.0.1.nip.io", "10.0.0.5", "[::2]:80"]) {
      expect({ host, status: (await fetch(`${server.url}/health`, { headers: { host } })).status }).toEqual({ host, status: 403 });
    }
  });
});

describe("Host: bound beyond loopback (here to all interfaces)", () => {
  test("any IP address and this machine's name are answered, other names are not", async () => {
    const server = startServer({ host: "0.0.0.0", apiKey: "k" });
    try {
      for (const host of ["192.168.1.77:8080", "10.0.0.5", "[fe80::1]:8080", `${hostname()}:${server.port}`, `${hostname().split(".")[0]}:${server.port}`]) {
        expect({ host, status: (await fetch(`${server.url}/health`, { headers: { host } })).status }).toEqual({ host, status: 200 });
      }
      expect((await fetch(`${server.url}/health`, { headers: { host: "attacker.example" } })).status).toBe(403);
    } finally {
      await server.stop();
    }
  });

  test("--allow-host adds names, '.example.com' with its subdomains, '*' any", async () => {
    const server = startServer({ host: "0.0.0.0", apiKey: "k", access: { allowHosts: ["llm.example.com", ".corp.example"] } });
    const any = startServer({ access: { allowHosts: ["*"] } });
    try {
      const status = async (url: string, host: string) => (await fetch(`${url}/health`, { headers: { host } })).status;
      expect(await status(server.url, "llm.example.com:443")).toBe(200);
      expect(await status(server.url, "corp.example")).toBe(200);
      expect(await status(server.url, "gpu1.corp.example")).toBe(200);
      expect(await status(server.url, "example.com")).toBe(403);
      expect(await status(server.url, "evilcorp.example")).toBe(403);
      expect(await status(any.url, "anything.example")).toBe(200);
    } finally {
      await server.stop();
      await any.stop();
    }
  });
});

describe("Origin: browser pages", () => {
  const model = new ScriptedModel({ id: "m" });
  const server = startServer({ models: [model] });
  const allowing = startServer({ models: [model], apiKey: "k", access: { allowOrigins: ["http://localhost:5173"] } });
  afterAll(async () => {
    await server.stop();
    await allowing.stop();
  });

  test.each(names)("%s: a cross-site text/plain POST (no preflight, no key) is refused and runs nothing", async (name) => {
    const { path, body, shape } = surfaces[name];
    const calls = model.calls.length;
    for (const stream of [false, true]) {
      const res = await send(server.url, path, { ...body, stream }, { "content-type": "text/plain;charset=UTF-8", origin: "http://attacker.example" });
      expect(res.status).toBe(403);
      expect(res.headers.get("access-control-allow-origin")).toBeNull();
      const error = await errorOf(res, shape);
      expect(error.type).toBe("permission_error");
      expect(error.message).toContain("--allow-origin http://attacker.example");
      if (shape === "openai") expect(error.code).toBe("origin_not_allowed");
    }
    // A rebinding page: its own name as Host and as Origin.
    const rebound = await send(server.url, path, body, { "content-type": "text/plain", host: "attacker.example", origin: "http://attacker.example" });
    expect(rebound.status).toBe(403);
    expect(model.calls.length).toBe(calls);
  });

  test("the server's own page (same host and port) is served; another port or name of the same machine is another origin", async () => {
    expect((await send(server.url, "/v1/chat/completions", surfaces.chat.body, { origin: `http://127.0.0.1:${server.port}` })).status).toBe(200);
    expect((await send(server.url, "/v1/chat/completions", surfaces.chat.body, { origin: `http://localhost:${server.port}`, host: `localhost:${server.port}` })).status).toBe(200);
    expect((await send(server.url, "/v1/chat/completions", surfaces.chat.body, { origin: `http://localhost:${server.port}` })).status).toBe(403);
    expect((await send(server.url, "/v1/chat/completions", surfaces.chat.body, { origin: "http://127.0.0.1:5173" })).status).toBe(403);
    expect((await send(server.url, "/v1/chat/completions", surfaces.chat.body, { origin: "null" })).status).toBe(403);
  });

  test("an origin --allow-origin lists gets its answers with CORS headers, errors included", async () => {
    const origin = "http://localhost:5173";
    const ok = await send(allowing.url, "/v1/chat/completions", surfaces.chat.body, { origin, authorization: "Bearer k" });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("access-control-allow-origin")).toBe(origin);
    expect(ok.headers.get("vary")).toContain("Origin");
    const streamed = await send(allowing.url, "/v1/messages", { ...surfaces.messages.body, stream: true }, { origin, "x-api-key": "k" });
    expect(streamed.headers.get("access-control-allow-origin")).toBe(origin);
    expect(await streamed.text()).toContain("message_stop");
    const unauthorized = await send(allowing.url, "/v1/chat/completions", surfaces.chat.body, { origin });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get("access-control-allow-origin")).toBe(origin);
    const other = await send(allowing.url, "/v1/chat/completions", surfaces.chat.body, { origin: "http://localhost:5174", authorization: "Bearer k" });
    expect(other.status).toBe(403);
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("CORS preflight: answered for a listed origin (without the key, which browsers do not send on it), refused for others", async () => {
    const preflight = (origin: string) =>
      fetch(`${allowing.url}/v1/messages`, {
        method: "OPTIONS",
        headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type,x-api-key,anthropic-version,anthropic-dangerous-direct-browser-access" },
      });
    const ok = await preflight("http://localhost:5173");
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect(ok.headers.get("access-control-allow-methods")).toContain("POST");
    expect(ok.headers.get("access-control-allow-headers")).toBe("content-type,x-api-key,anthropic-version,anthropic-dangerous-direct-browser-access");
    expect(Number(ok.headers.get("access-control-max-age"))).toBeGreaterThan(0);
    const refused = await preflight("http://attacker.example");
    expect(refused.status).toBe(403);
    expect(refused.headers.get("access-control-allow-origin")).toBeNull();
  });

  test("--allow-origin '*' serves any page", async () => {
    const open = startServer({ access: { allowOrigins: ["*"] } });
    try {
      const res = await send(open.url, "/v1/chat/completions", { ...surfaces.chat.body, model: "splash-test" }, { origin: "https://app.example" });
      expect(res.status).toBe(200);
      expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example");
    } finally {
      await open.stop();
    }
  });
});

describe("request body limit", () => {
  const model = new ScriptedModel({ id: "m" });
  const server = startServer({ models: [model], maxBodyBytes: 4096 });
  afterAll(() => server.stop());
  const padded = (body: object, size: number) => ({ ...body, metadata: { pad: "x".repeat(size) } });

  test.each(names)("%s: a body over --max-body is a 413 in the surface's shape, streaming or not; one under it is served", async (name) => {
    const { path, body, shape } = surfaces[name];
    const calls = model.calls.length;
    for (const stream of [false, true]) {
      const res = await send(server.url, path, padded({ ...body, stream }, 5000));
      expect(res.status).toBe(413);
      expect(res.headers.get("content-type")).toContain("application/json");
      const error = await errorOf(res, shape);
      expect(error.type).toBe(shape === "anthropic" ? "request_too_large" : "invalid_request_error");
      expect(error.message).toMatch(/^the request body \(\d\.\d KiB\) is larger than this server accepts \(4\.0 KiB; the server's --max-body sets it\)$/);
      if (shape === "openai") expect(error.code).toBe("request_too_large");
    }
    expect(model.calls.length).toBe(calls);
    expect((await send(server.url, path, padded(body, 3000))).status).toBe(200);
  });

  test("a body sent without a length (chunked) is cut off at the limit, with the same 413", async () => {
    const chunks = [JSON.stringify(surfaces.messages.body).slice(0, -1), `,"pad":"${"x".repeat(3000)}`, `${"y".repeat(3000)}"}`];
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
        controller.close();
      },
    });
    const res = await fetch(`${server.url}/v1/messages`, { method: "POST", body, headers: { "content-type": "application/json" } });
    expect(res.status).toBe(413);
    expect(await errorOf(res, "anthropic")).toEqual({ type: "request_too_large", message: "the request body is larger than this server accepts (4.0 KiB; the server's --max-body sets it)" });
  });

  test("the default limit takes a 27 MB body (a 20 MiB image in base64)", async () => {
    const big = startServer({ models: [new ScriptedModel({ id: "m" })] });
    try {
      const res = await send(big.url, "/v1/chat/completions", padded(surfaces.chat.body, 27_000_000));
      expect(res.status).toBe(200);
    } finally {
      await big.stop();
    }
  });
});
