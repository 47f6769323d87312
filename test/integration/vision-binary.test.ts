// Image decoding inside the single executable: compiled from src/main.ts, copied alone into an empty directory and
// run with a bare environment, it serves the vision fixture and accepts PNG, JPEG, WebP and GIF images (the JPEG
// and WebP decoders are WebAssembly files embedded in the binary).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { $ } from "bun";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "../helpers/cli.ts";
import { visionFixtureModelDir } from "../helpers/vision-fixture-model.ts";

let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
let url: string;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "splash-vision-bin-"));
  await $`bun ${join(repoRoot, "scripts/build/binary.ts")} --outfile ${join(dir, "empty", "splash")}`.quiet();
  cpSync(visionFixtureModelDir(), join(dir, "model"), { recursive: true, dereference: true });
  proc = Bun.spawn([join(dir, "empty", "splash"), "serve", join(dir, "model"), "--port", "0", "--kv-budget", "64M", "--threads", "2"], {
    cwd: join(dir, "empty"),
    env: { PATH: "/usr/bin:/bin", HOME: mkdtempSync(join(tmpdir(), "splash-home-")) },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const reader = proc.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes('"listening"')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`splash serve exited: ${await new Response(proc.stderr).text()}`);
    out += value;
  }
  url = (JSON.parse(out.split("\n").find((l) => l.includes('"listening"'))!) as { url: string }).url;
}, 180_000);

afterAll(async () => {
  proc?.kill();
  await proc?.exited;
  rmSync(dir, { recursive: true, force: true }); // the binary is ~100 MB: not left behind
});

test("the compiled binary decodes every supported format", async () => {
  const fixtures = join(import.meta.dir, "../fixtures");
  const files: [string, string][] = [
    ["models/images/a-64x96.png", "image/png"],
    ["models/images/b-123x201.jpg", "image/jpeg"],
    ["vision/lossy.webp", "image/webp"],
    ["vision/still.gif", "image/gif"],
  ];
  for (const [file, type] of files) {
    const data = `data:${type};base64,${readFileSync(join(fixtures, file)).toString("base64")}`;
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "model", max_tokens: 2, messages: [{ role: "user", content: [{ type: "text", text: "hi" }, { type: "image_url", image_url: { url: data } }] }] }),
    });
    const body = (await res.json()) as { usage?: { prompt_tokens: number } };
    expect(res.status, `${file}: ${JSON.stringify(body)}`).toBe(200);
    expect(body.usage!.prompt_tokens).toBeGreaterThan(10);
  }
});
