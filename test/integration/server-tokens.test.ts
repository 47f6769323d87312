// POST /tokenize, /detokenize and /apply-template on `splash serve` with the embedded model, through plain HTTP: ids
// from the served tokenizer (added tokens read as tokens or as text), the way back, and the exact prompt a Chat
// Completions request runs (the chat template's reference renderings; the token count the engine reports when it
// runs the same request). The key, body limit and error shape of /v1/*.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { repoRoot } from "../helpers/cli.ts";
import { post } from "../helpers/server.ts";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";
import golden from "../fixtures/templates/splash-tiny.json";

let server: ServeProcess;
let tok: Tokenizer;
const auth = { authorization: "Bearer sk-tok" };

beforeAll(async () => {
  server = await splashServe(["--draft", "none", "--api-key", "sk-tok", "--max-body", "64K"]);
  tok = await Tokenizer.load(join(repoRoot, "models", "splash-tiny"));
}, 60_000);
afterAll(async () => {
  await server?.stop();
  tok?.free();
});

const call = async (path: string, body: unknown, headers: Record<string, string> = auth) => {
  const res = await post(server.url + path, body, headers);
  return { status: res.status, json: (await res.json()) as Record<string, any> };
};

const TEXT = "<|im_start|>user\nZürich 🙂 <think>x</think><|im_end|>";

describe("POST /tokenize", () => {
  test("added-token strings are their tokens by default (as Hugging Face reads text), text with add_special_tokens: false", async () => {
    const withAdded = await call("/tokenize", { text: TEXT });
    expect(withAdded.status).toBe(200);
    expect(withAdded.json).toEqual({ model: "splash-tiny", tokens: Array.from(tok.encodeWithAddedTokens(TEXT)), count: withAdded.json.tokens.length, max_model_len: 65536 });
    for (const special of ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]) expect(withAdded.json.tokens).toContain(tok.addedTokenId(special));
    const plain = await call("/tokenize", { model: "splash-tiny", text: TEXT, add_special_tokens: false });
    expect(plain.json.tokens).toEqual(Array.from(tok.encode(TEXT)));
    for (const special of ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]) expect(plain.json.tokens).not.toContain(tok.addedTokenId(special));
  });

  test("with_pieces: each token's id, text and bytes; the bytes put together are the text", async () => {
    const r = await call("/tokenize", { text: TEXT, with_pieces: true });
    const pieces = r.json.pieces as { id: number; text: string; bytes: number[] }[];
    expect(pieces.map((p) => p.id)).toEqual(r.json.tokens);
    expect(Buffer.from(pieces.flatMap((p) => p.bytes)).toString("utf8")).toBe(TEXT);
    expect(pieces.find((p) => p.id === tok.addedTokenId("<|im_end|>"))).toEqual({ id: tok.addedTokenId("<|im_end|>")!, text: "<|im_end|>", bytes: [...Buffer.from("<|im_end|>")] });
  });
});

describe("POST /detokenize", () => {
  test("ids back to the text; skip_special_tokens leaves the special tokens out", async () => {
    const { json } = await call("/tokenize", { text: TEXT });
    expect((await call("/detokenize", { tokens: json.tokens })).json).toEqual({ model: "splash-tiny", text: TEXT });
    // <think> is an added token that is not special, as in Hugging Face's tokenizer: it stays.
    expect((await call("/detokenize", { tokens: json.tokens, skip_special_tokens: true })).json.text).toBe("user\nZürich 🙂 <think>x</think>");
  });

  test("ids outside the vocabulary, negative or fractional are a 400 naming the id", async () => {
    const outside = await call("/detokenize", { tokens: [1, 2, tok.vocabSize] });
    expect(outside.status).toBe(400);
    expect(outside.json).toEqual({ error: { type: "invalid_request_error", param: "tokens.2", code: null, message: `tokens.2: token id ${tok.vocabSize} is outside the vocabulary (ids 0 to ${tok.vocabSize - 1})` } });
    for (const [tokens, param] of [[[-1], "tokens.0"], [[1, 2.5], "tokens.1"], ["12", "tokens"]] as const) {
      const r = await call("/detokenize", { tokens });
      expect({ status: r.status, param: r.json.error.param }).toEqual({ status: 400, param });
    }
  });
});

type Case = { name: string; vars: { messages: Record<string, any>[]; tools?: unknown[]; enable_thinking?: boolean }; rendered: string };
const cases = (golden as { cases: Case[] }).cases;

// The template's variables as a Chat Completions request: tool-call arguments travel as JSON strings.
function chatBody(c: Case): Record<string, unknown> {
  const messages = c.vars.messages.map((m) =>
    m.tool_calls ? { ...m, tool_calls: m.tool_calls.map((t: any) => ({ ...t, function: { ...t.function, arguments: JSON.stringify(t.function.arguments) } })) } : m,
  );
  return { messages, ...(c.vars.tools ? { tools: c.vars.tools } : {}), ...(c.vars.enable_thinking === undefined ? {} : { enable_thinking: c.vars.enable_thinking }) };
}

describe("POST /apply-template", () => {
  test.each(["simple", "thinking-off", "thinking-on-explicit", "tools", "tools-thinking-off"])(
    "%s: the prompt is the template's reference rendering; its count is what the engine runs",
    async (name) => {
      const c = cases.find((x) => x.name === name)!;
      const applied = await call("/apply-template", chatBody(c));
      expect(applied.status).toBe(200);
      expect(applied.json.prompt).toBe(c.rendered);
      expect(applied.json.count).toBe((await call("/tokenize", { text: c.rendered })).json.count);
      const body = { model: "splash-tiny", ...chatBody(c), max_tokens: 1 };
      if ("enable_thinking" in body) Object.assign(body, { chat_template_kwargs: { enable_thinking: body.enable_thinking } });
      const ran = await call("/v1/chat/completions", body);
      expect(ran.json.usage.prompt_tokens).toBe(applied.json.count);
    },
    30_000,
  );

  test("client text that looks like template markup stays text: the prompt shows it, the count is of its plain tokens", async () => {
    const messages = [{ role: "user", content: "a <|im_end|> b" }];
    const applied = await call("/apply-template", { messages });
    expect(applied.json.prompt).toContain("a <|im_end|> b");
    const ran = await call("/v1/chat/completions", { model: "splash-tiny", messages, max_tokens: 1 });
    expect(ran.json.usage.prompt_tokens).toBe(applied.json.count);
    expect(applied.json.count).toBeGreaterThan((await call("/tokenize", { text: applied.json.prompt })).json.count);
  });

  test("a request the chat endpoint would refuse is refused the same way", async () => {
    const r = await call("/apply-template", { messages: [{ role: "user", content: "x" }], tool_choice: "required" });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: "invalid_request_error", param: "tool_choice" });
    expect((await call("/apply-template", { messages: [] })).json.error.param).toBe("messages");
    expect((await call("/apply-template", { model: "gpt-9", messages: [{ role: "user", content: "x" }] })).status).toBe(404);
  });
});

describe("same gate as /v1/*", () => {
  test.each(["/tokenize", "/detokenize", "/apply-template"])("%s: the key, the body limit, JSON errors", async (path) => {
    const body = path === "/tokenize" ? { text: "hi" } : path === "/detokenize" ? { tokens: [1] } : { messages: [{ role: "user", content: "hi" }] };
    expect((await call(path, body, {})).json.error).toMatchObject({ type: "authentication_error", code: "missing_api_key" });
    expect((await call(path, body)).status).toBe(200);
    const big = await call(path, { ...body, pad: "x".repeat(70_000) });
    expect(big.status).toBe(413);
    expect(big.json.error.code).toBe("request_too_large");
    const broken = await fetch(server.url + path, { method: "POST", body: "{", headers: auth });
    expect(broken.status).toBe(400);
    expect(((await broken.json()) as { error: { code: string } }).error.code).toBe("invalid_json");
  });
});
