// Chat Completions' logit_bias on the embedded model: a ban and a boost change the answer as OpenAI documents
// (-100 bans a token, 100 makes it the only choice), the same with no drafter, the MTP layer and the DFlash drafter
// (greedy output is the same whatever drafts), streaming and not; a key that is no token id of the model is a 400
// naming it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createApp } from "../../src/server/app.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const M = "splash-tiny";
const messages = [{ role: "user", content: "Write a Python function that reverses a string." }];

let tokenizer: Tokenizer;
const models = new Map<string, { loaded: LoadedModel; app: ReturnType<typeof createApp> }>();
beforeAll(async () => {
  tokenizer = await Tokenizer.load(resolveModel(M).dir);
  for (const draft of ["none", "mtp", "dflash"] as const) {
    const loaded = await loadModel(resolveModel(M), { threads: 2, kvBudget: 64 << 20, draft });
    models.set(draft, { loaded, app: createApp({ models: [loaded.chat] }) });
  }
});
afterAll(async () => {
  for (const { loaded } of models.values()) await loaded.close();
  tokenizer.free();
});

const id = (text: string) => {
  const ids = tokenizer.encode(text);
  expect(ids.length).toBe(1);
  return ids[0]!;
};

// The answer's tokens (their text, from the logprobs), streamed or not.
async function answer(draft: string, extra: Record<string, unknown>, stream: boolean): Promise<string[]> {
  const body = { model: M, messages, max_tokens: 16, temperature: 0, reasoning_effort: "none", logprobs: true, stream, ...extra };
  const r = await models.get(draft)!.app.handle(new Request("http://localhost/v1/chat/completions", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }));
  const text = await r.text();
  expect(r.status, text.slice(0, 200)).toBe(200);
  type Choice = { logprobs?: { content?: { token: string }[] } | null };
  if (!stream) return (JSON.parse(text) as { choices: Choice[] }).choices[0]!.logprobs!.content!.map((t) => t.token);
  return text
    .split("\n\n")
    .filter((f) => f.startsWith("data: {"))
    .flatMap((f) => ((JSON.parse(f.slice(6)) as { choices: Choice[] }).choices[0]?.logprobs?.content ?? []).map((t) => t.token));
}

describe.each([false, true])("streaming %p", (stream) => {
  test("a ban removes the token the answer began with, a boost of 100 makes every token the boosted one; the same with every drafter", async () => {
    const plain = await answer("none", {}, stream);
    expect(plain[0]).toBe("```");
    const banned = await answer("none", { logit_bias: { [id("```")]: -100 } }, stream);
    expect(banned.length).toBeGreaterThan(0);
    expect(banned).not.toContain("```");
    const boosted = await answer("none", { logit_bias: { [id("python")]: 100 } }, stream);
    expect(boosted).toEqual(Array.from({ length: 16 }, () => "python"));
    for (const draft of ["mtp", "dflash"]) {
      expect(await answer(draft, { logit_bias: { [id("```")]: -100 } }, stream)).toEqual(banned);
      expect(await answer(draft, { logit_bias: { [id("python")]: 100 } }, stream)).toEqual(boosted);
    }
    expect(models.get("mtp")!.loaded.engine.stats().speculation!.cycles).toBeGreaterThan(0);
  }, 60_000);
});

test.each([
  ["an id past the vocabulary", { 6107: 5 }, "logit_bias.6107"],
  ["a negative id", { "-1": 5 }, "logit_bias.-1"],
  ["a key that is no number", { abc: 5 }, "logit_bias.abc"],
  ["a fractional id", { "1.5": 5 }, "logit_bias.1.5"],
  ["a bias above 100", { 5: 101 }, "logit_bias.5"],
  ["a bias that is no number", { 5: "x" }, "logit_bias.5"],
  ["a list", [5], "logit_bias"],
] as const)("logit_bias with %s is a 400 naming it", async (_, bias, param) => {
  const r = await models.get("none")!.app.handle(new Request("http://localhost/v1/chat/completions", { method: "POST", body: JSON.stringify({ model: M, messages, max_tokens: 4, logit_bias: bias }), headers: { "content-type": "application/json" } }));
  const body = (await r.json()) as { error: { param: string; type: string; message: string } };
  expect({ status: r.status, param: body.error.param, type: body.error.type }).toEqual({ status: 400, param, type: "invalid_request_error" });
});
