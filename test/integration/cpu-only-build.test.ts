// The library a machine without the Vulkan headers builds (README: Node, npm and a C compiler, nothing else):
// `scripts/build/native.ts --cpu-only` leaves the GPU backends out exactly as such a machine's build does, and the
// test command builds it beside the release. It must serve the embedded model on the CPU under --backend auto, and
// refuse a GPU backend in one line.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, splash } from "../helpers/cli.ts";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";

const lib = join(repoRoot, "build", "cpu-only", process.platform === "darwin" ? "libsplash.dylib" : "libsplash.so");
const env = { SPLASH_LIB: lib, SPLASH_BACKEND: "auto" };
let server: ServeProcess;

beforeAll(async () => {
  if (!existsSync(lib)) throw new Error(`${lib} is missing: the test command builds it (bun scripts/build/native.ts --cpu-only)`);
  server = await splashServe([], env);
}, 90_000);

afterAll(async () => {
  await server?.stop();
});

test("splash serve with the CPU-only library: the embedded model on the CPU, answering through the API", async () => {
  expect(server.log()).toContain("on cpu");
  const r = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: server.model, messages: [{ role: "user", content: "Say hi" }], max_tokens: 8, temperature: 0 }),
  });
  expect(r.status).toBe(200);
  const body = (await r.json()) as { usage: { completion_tokens: number } };
  expect(body.usage.completion_tokens).toBeGreaterThan(0);
}, 60_000);

test("--backend vulkan on the CPU-only library: one line saying the build has no Vulkan backend, exit 1", async () => {
  const r = await splash(["run", "--backend", "vulkan", "--max-tokens", "4", "Say hi"], { env });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain("this libsplash was built without the Vulkan backend");
  expect(r.stderr).not.toMatch(/^\s+at /m);
}, 60_000);
