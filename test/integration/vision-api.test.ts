// Image input over real HTTP with the official SDKs, served by the vision fixture (random weights, a real tower):
// OpenAI chat `image_url` parts, Responses `input_image`, Anthropic `image` blocks, with the committed PNG and JPEG
// files; image tokens counted in usage; bad images (corrupt, unsupported, too large, URL not allowed) are a 400
// naming the problem; http(s) URLs are fetched only with --allow-image-urls. Then the prefix cache across turns with
// images: the next turn of a conversation with an image resumes from the cache, a different image at the same
// place (same size, so the same token ids) does not.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import type { Conversation, ImageSource, Message } from "../../src/chat/ir.ts";
import type { LoadedModel } from "../../src/models/load.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { rejection } from "../helpers/server.ts";
import { loadVisionFixtureModel, VISION_MODEL_ID } from "../helpers/vision-fixture-model.ts";

const images = join(import.meta.dir, "../fixtures/models/images");
const PNG = readFileSync(join(images, "a-64x96.png")); // 64×96: 4×6 patches → 6 tokens
const JPEG = readFileSync(join(images, "b-123x201.jpg")); // → 64×128: 4×8 patches → 8 tokens
const OTHER_PNG = readFileSync(join(images, "d-40x50.png")); // upscaled to 64×96: the same 6 tokens as PNG
const dataUrl = (b: Buffer, type: string) => `data:${type};base64,${b.toString("base64")}`;
const model = VISION_MODEL_ID;

let loaded: LoadedModel;
let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  loaded = await loadVisionFixtureModel();
  server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat], sampling: { temperature: 0 } });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await server.stop();
  await loaded.close();
});

// An image adds <|vision_start|> + its pads + <|vision_end|> to the prompt.
const withImage = (tokens: number) => tokens + 2;

async function chatTokens(content: OpenAI.Chat.ChatCompletionContentPart[]): Promise<number> {
  const c = await openai.chat.completions.create({ model, max_tokens: 3, messages: [{ role: "user", content }] });
  expect(c.choices[0]!.message.content).toBeString();
  return c.usage!.prompt_tokens;
}

describe("images through the three APIs", () => {
  const text = { type: "text" as const, text: "Describe the picture." };

  test("OpenAI chat: image_url parts (PNG, JPEG, both) count their tokens", async () => {
    const base = await chatTokens([text]);
    expect(await chatTokens([text, { type: "image_url", image_url: { url: dataUrl(PNG, "image/png") } }])).toBe(base + withImage(6));
    expect(await chatTokens([{ type: "image_url", image_url: { url: dataUrl(JPEG, "image/jpeg") } }, text])).toBe(base + withImage(8));
    const both = [{ type: "image_url" as const, image_url: { url: dataUrl(PNG, "image/png") } }, text, { type: "image_url" as const, image_url: { url: dataUrl(JPEG, "image/jpeg") } }];
    expect(await chatTokens(both)).toBe(base + withImage(6) + withImage(8));
  });

  test("OpenAI chat streaming with an image", async () => {
    const stream = await openai.chat.completions.create({ model, max_tokens: 3, stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: [text, { type: "image_url", image_url: { url: dataUrl(PNG, "image/png") } }] }] });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    expect(usage!.prompt_tokens).toBe((await chatTokens([text])) + withImage(6));
  });

  test("Responses: input_image", async () => {
    const ask = (content: OpenAI.Responses.ResponseInputContent[]) => openai.responses.create({ model, max_output_tokens: 3, input: [{ role: "user", content }] });
    const base = (await ask([{ type: "input_text", text: "Describe the picture." }])).usage!.input_tokens;
    const r = await ask([{ type: "input_text", text: "Describe the picture." }, { type: "input_image", detail: "auto", image_url: dataUrl(JPEG, "image/jpeg") }]);
    expect(r.output).toBeArray(); // 3 tokens: "incomplete" (max_output_tokens), which is fine here
    expect(r.usage!.input_tokens).toBe(base + withImage(8));
  });

  test("Anthropic: image blocks (base64), also streaming and count_tokens", async () => {
    const block = (b: Buffer, media_type: "image/png" | "image/jpeg") => ({ type: "image" as const, source: { type: "base64" as const, media_type, data: b.toString("base64") } });
    const ask = (content: Anthropic.ContentBlockParam[]) => anthropic.messages.create({ model, max_tokens: 3, messages: [{ role: "user", content }] });
    const base = (await ask([{ type: "text", text: "Describe the picture." }])).usage.input_tokens;
    const content: Anthropic.ContentBlockParam[] = [block(PNG, "image/png"), block(JPEG, "image/jpeg"), { type: "text", text: "Describe the picture." }];
    expect((await ask(content)).usage.input_tokens).toBe(base + withImage(6) + withImage(8));
    const streamed = await anthropic.messages.stream({ model, max_tokens: 3, messages: [{ role: "user", content }] }).finalMessage();
    expect(streamed.usage.input_tokens).toBe(base + withImage(6) + withImage(8));
    const counted = await anthropic.messages.countTokens({ model, messages: [{ role: "user", content }] });
    expect(counted.input_tokens).toBe(base + withImage(6) + withImage(8));
  });
});

describe("bad images are a 400 naming the problem", () => {
  const ask = (url: string) => openai.chat.completions.create({ model, max_tokens: 3, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] });
  const expect400 = async (p: PromiseLike<unknown>, code: string, words: string) => {
    const e = (await rejection(p)) as { status: number; code?: string; message: string };
    expect(e.status).toBe(400);
    expect(e.code).toBe(code);
    expect(e.message).toContain(words);
  };

  test("corrupt, unsupported, too large (OpenAI shape)", async () => {
    await expect400(ask(dataUrl(PNG.subarray(0, 400), "image/png")), "invalid_image", "PNG image could not be decoded");
    const bmp = Buffer.alloc(64);
    bmp.write("BM");
    await expect400(ask(dataUrl(bmp, "image/bmp")), "unsupported_image", "BMP");
    const bomb = Buffer.from(PNG.subarray(0, 33));
    bomb.writeUInt32BE(100000, 16);
    bomb.writeUInt32BE(100000, 20);
    await expect400(ask(dataUrl(bomb, "image/png")), "image_too_large", "100000×100000");
  });

  test("an http URL is refused unless the server allows it", async () => {
    await expect400(ask("https://example.invalid/cat.png"), "invalid_image_url", "--allow-image-urls");
  });

  test("Anthropic shape: invalid_request_error with the reason", async () => {
    const e = (await rejection(
      anthropic.messages.create({ model, max_tokens: 3, messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/jpeg", data: JPEG.subarray(0, 600).toString("base64") } }] }] }),
    )) as { status: number; error: { error: { type: string; message: string } } };
    expect(e.status).toBe(400);
    expect(e.error.error.type).toBe("invalid_request_error");
    expect(e.error.error.message).toContain("JPEG image is truncated");
  });
});

test("with --allow-image-urls an http(s) image is fetched (bounded by the byte limit)", async () => {
  const files = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => (new URL(req.url).pathname === "/a.png" ? new Response(PNG, { headers: { "content-type": "image/png" } }) : new Response("no", { status: 404 })) });
  const fetching = await loadVisionFixtureModel({ vision: { allowUrls: true } });
  const s = createServer({ host: "127.0.0.1", port: 0, models: [fetching.chat], sampling: { temperature: 0 } });
  try {
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const ask = (url: string) => client.chat.completions.create({ model, max_tokens: 3, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] });
    const c = await ask(`http://127.0.0.1:${files.port}/a.png`);
    expect(c.usage!.prompt_tokens).toBe((await ask(dataUrl(PNG, "image/png"))).usage!.prompt_tokens);
    const e = (await rejection(ask(`http://127.0.0.1:${files.port}/missing.png`))) as { status: number; code: string; message: string };
    expect([e.status, e.code]).toEqual([400, "invalid_image_url"]);
    expect(e.message).toContain("HTTP 404");
  } finally {
    await s.stop();
    await fetching.close();
    files.stop(true);
  }
});

describe("prefix cache across turns with images", () => {
  const source = (b: Buffer): ImageSource => ({ kind: "bytes", data: new Uint8Array(b) });
  // the image sits in the first block (64 tokens); the text after it fills a few more
  const long = "Here is a screenshot of the failing build; read every line of the log carefully. ".repeat(6);
  const conversation = (messages: Message[]): Conversation => ({ messages, tools: [], toolChoice: "auto", parallelToolCalls: true, thinking: { enabled: false }, responseFormat: { type: "text" } });
  const first = (img: Buffer): Message => ({ role: "user", content: [{ type: "image", source: source(img) }, { type: "text", text: long }] });
  const sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 };

  async function run(c: Conversation): Promise<{ text: string; promptTokens: number; cached: number }> {
    let text = "";
    let usage = { promptTokens: 0, cachedPromptTokens: 0 };
    for await (const ev of loaded.chat.generate(c, { stop: [], sampling, maxTokens: 6, signal: new AbortController().signal })) {
      if (ev.type === "content" || ev.type === "reasoning") text += ev.text;
      if (ev.type === "done") usage = ev.usage;
    }
    return { text, promptTokens: usage.promptTokens, cached: usage.cachedPromptTokens };
  }

  test("the next turn hits the cache; the same tokens with another image do not", async () => {
    const turn1 = await run(conversation([first(PNG)]));
    expect(turn1.promptTokens).toBeGreaterThan(128);
    const again = await run(conversation([first(PNG)]));
    expect(again.cached).toBeGreaterThanOrEqual(64); // the repeated screenshot's blocks are served from the cache
    expect(again.text).toBe(turn1.text); // and give the same greedy answer as computing them
    const turn2 = await run(conversation([first(PNG), { role: "assistant", content: [{ type: "text", text: turn1.text }] }, { role: "user", content: [{ type: "text", text: "And the next step?" }] }]));
    expect(turn2.cached).toBeGreaterThanOrEqual(Math.floor((turn1.promptTokens - 1) / 64) * 64);
    // d-40x50.png renders to the same 6 pads: identical token ids, different image → no block may be shared
    const other = await run(conversation([first(OTHER_PNG)]));
    expect(other.promptTokens).toBe(turn1.promptTokens);
    expect(other.cached).toBe(0);
  });
});
