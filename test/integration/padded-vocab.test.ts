// A checkpoint whose output head has rows past its tokenizer (test/helpers/padded-model.ts: 1024 tokens, 1088 rows,
// the padded rows made the likely ones) serves every API without ever choosing or listing a padded row: sampling at
// temperature 2 over many requests, top_logprobs 20, streaming and not, with no drafter, the MTP layer, a DFlash and a
// DFlash2 drafter (whose candidate selector would otherwise take the padded rows as its candidates) on the CPU, and on
// Vulkan (lavapipe, which runs without a drafter). Before the rows were masked, such a
// request failed with "500 internal error: token id 1031 is outside the vocabulary (1024)".
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { Model } from "../../src/native/model.ts";
import { createApp } from "../../src/server/app.ts";
import { DFLASH_DRAFTER, loadPaddedModel, PADDED_MODEL_ID, paddedDflash2Dir, paddedModelDir, TOKENS } from "../helpers/padded-model.ts";

const M = PADDED_MODEL_ID;
const user = (k: number) => [{ role: "user", content: `Write item ${k} of a list of Python functions.` }];

test("without the token mask, the padded rows are what the model picks", async () => {
  const model = await Model.load(paddedModelDir(), { threads: 2, backend: "cpu" });
  const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
  const greedy = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
  let padded = 0;
  for (let k = 0; k < 20; k++) {
    const tokens = Int32Array.from({ length: 6 }, (_, i) => (k * 97 + i * 13) % TOKENS);
    const [out] = cache.step([{ slot: 0, nPast: 0, tokens, pages: Int32Array.from([0, 1]), sample: { sampling: greedy } }]);
    if (out!.token >= TOKENS) padded++;
  }
  cache.free();
  model.free();
  expect(padded).toBeGreaterThanOrEqual(18);
});

type Sent = { status: number; text: string };

const cases = [
  { backend: "cpu", draft: "none" },
  { backend: "cpu", draft: "mtp" },
  { backend: "cpu", draft: "dflash" },
  { backend: "cpu", draft: "dflash2" },
  { backend: "vulkan", draft: "none" },
] as const;

describe.each(cases)("$backend, drafter $draft", ({ backend, draft }) => {
  let loaded: LoadedModel;
  let app: ReturnType<typeof createApp>;
  beforeAll(async () => {
    loaded = await loadPaddedModel({ backend, draft, drafterDir: draft === "dflash2" ? paddedDflash2Dir() : DFLASH_DRAFTER });
    app = createApp({ models: [loaded.chat] });
  });
  afterAll(() => loaded.close());

  async function send(path: string, body: Record<string, unknown>): Promise<Sent> {
    const r = await app.handle(new Request(`http://localhost${path}`, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }));
    return { status: r.status, text: await r.text() };
  }

  // The JSON payloads of a stream's events; an error event fails the test with its text.
  function events(sent: Sent): Record<string, unknown>[] {
    expect(sent.status).toBe(200);
    const out = sent.text
      .split("\n\n")
      .flatMap((frame) => frame.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]"))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    expect(out.filter((e) => e.type === "error" || "error" in e || e.type === "response.failed").map((e) => JSON.stringify(e))).toEqual([]);
    return out;
  }

  test("temperature 2, many requests on all three APIs, streaming and not: every one completes", async () => {
    expect(loaded.draft).toBe(draft);
    const requests = Array.from({ length: 4 }, (_, k) =>
      [false, true].flatMap((stream) => [
        send("/v1/chat/completions", { model: M, messages: user(k), max_tokens: 24, temperature: 2, seed: k, stream }),
        send("/v1/responses", { model: M, input: user(k), max_output_tokens: 24, temperature: 2, seed: k, stream }),
        send("/v1/messages", { model: M, messages: user(k), max_tokens: 24, temperature: 1, top_k: 0, seed: k, stream }),
      ]),
    ).flat();
    const sent = await Promise.all(requests);
    for (const s of sent) {
      expect(s.status, s.text.slice(0, 300)).toBe(200);
      if (!s.text.startsWith("{")) events(s);
    }
    if (draft !== "none") expect(loaded.engine.stats().speculation!.cycles).toBeGreaterThan(0);
  }, 120_000); // lavapipe

  test("a logit_bias naming a padded row is a 400 naming it; one naming a token is served", async () => {
    const padded = await send("/v1/chat/completions", { model: M, messages: user(1), max_tokens: 4, logit_bias: { [TOKENS + 6]: 5 } });
    expect(padded.status).toBe(400);
    expect((JSON.parse(padded.text) as { error: { param: string } }).error.param).toBe(`logit_bias.${TOKENS + 6}`);
    const token = await send("/v1/chat/completions", { model: M, messages: user(1), max_tokens: 4, temperature: 2, logit_bias: { 7: 5 } });
    expect(token.status).toBe(200);
  }, 120_000);

  test("top_logprobs 20 on Chat Completions and Responses, streaming and not: 20 alternatives of real tokens each", async () => {
    for (const stream of [false, true]) {
      const chat = await send("/v1/chat/completions", { model: M, messages: user(9), max_tokens: 16, temperature: 2, seed: 3, logprobs: true, top_logprobs: 20, reasoning_effort: "none", stream });
      const chatTokens = stream
        ? events(chat).flatMap((e) => ((e.choices as { logprobs?: { content?: unknown[] } }[])[0]?.logprobs?.content ?? []) as { top_logprobs: { logprob: number; bytes: number[] }[] }[])
        : ((JSON.parse(chat.text) as { choices: { logprobs: { content: { top_logprobs: { logprob: number; bytes: number[] }[] }[] } }[] }).choices[0]!.logprobs.content);
      expect(chat.status).toBe(200);
      expect(chatTokens.length).toBeGreaterThan(0);
      for (const t of chatTokens) {
        expect(t.top_logprobs.length).toBe(20);
        for (const alt of t.top_logprobs) expect(Number.isFinite(alt.logprob)).toBe(true);
      }
      const resp = await send("/v1/responses", { model: M, input: user(9), max_output_tokens: 16, temperature: 2, seed: 3, top_logprobs: 20, reasoning: { effort: "none" }, stream });
      expect(resp.status).toBe(200);
      const text = stream
        ? events(resp).flatMap((e) => (e.type === "response.output_text.delta" ? ((e.logprobs ?? []) as { top_logprobs: { logprob: number }[] }[]) : []))
        : (JSON.parse(resp.text) as { output: { type: string; content?: { logprobs?: { top_logprobs: { logprob: number }[] }[] }[] }[] }).output.flatMap((o) => (o.type === "message" ? o.content!.flatMap((c) => c.logprobs ?? []) : []));
      expect(text.length).toBeGreaterThan(0);
      for (const t of text) {
        expect(t.top_logprobs.length).toBe(20);
        for (const alt of t.top_logprobs) expect(Number.isFinite(alt.logprob)).toBe(true);
      }
    }
  }, 120_000);
});
