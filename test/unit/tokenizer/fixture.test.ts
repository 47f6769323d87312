// The fixture-1024 tokenizer and template (test/fixtures/tokenizers/fixture-1024): exactly the fixture checkpoints'
// 1024 ids with the special tokens at their reserved ids, lossless round trips, and a template that renders tools,
// tool calls, tool results and the thinking switch into prompts the tokenizer reads back exactly.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderPrompt } from "../../../src/chat/generate.ts";
import type { Conversation } from "../../../src/chat/ir.ts";
import { ChatTemplate } from "../../../src/chat/template.ts";
import { native } from "../../../src/native/library.ts";
import { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";

const dir = join(import.meta.dir, "../../fixtures/tokenizers/fixture-1024");
let tokenizer: Tokenizer;
let template: ChatTemplate;
beforeAll(async () => {
  tokenizer = Tokenizer.fromJson(readFileSync(join(dir, "tokenizer.json"), "utf8"), native());
  template = ChatTemplate.fromSource(readFileSync(join(dir, "chat_template.jinja"), "utf8"), "chat_template.jinja");
});
afterAll(() => tokenizer.free());

describe("fixture-1024", () => {
  test("1024 ids; the special tokens at the reserved ids 1016-1023", () => {
    expect(tokenizer.vocabSize).toBe(1024);
    const added = Object.fromEntries(tokenizer.added.map((a) => [a.content, a.id]));
    expect(added).toEqual({ "<|im_end|>": 1016, "<|endoftext|>": 1017, "<|im_start|>": 1018, "<think>": 1019, "</think>": 1020, "<tool_call>": 1021, "</tool_call>": 1022, "<tool_response>": 1023 });
    for (let id = 0; id < 1016; id++) expect(tokenizer.tokenBytes(id).length).toBeGreaterThan(0);
  });

  test("text round-trips", () => {
    for (const text of ['{"name": "Paris", "days": [1, 2], "ok": true}', "héllo wörld — 東京 🙂", "<think>not a tag</think>"]) expect(tokenizer.decode(tokenizer.encode(text))).toBe(text);
  });

  test("the template renders a tool conversation the tokenizer reads back exactly", () => {
    const conversation: Conversation = {
      messages: [
        { role: "system", content: [{ type: "text", text: "Be brief." }] },
        { role: "user", content: [{ type: "text", text: "Weather in Paris?" }] },
        { role: "assistant", content: [], reasoning: "Use the tool.", toolCalls: [{ id: "c1", name: "get_weather", arguments: { city: "Paris", days: 2 } }] },
        { role: "tool", toolCallId: "c1", content: [{ type: "text", text: "sunny" }] },
      ],
      tools: [{ name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } }],
      toolChoice: "auto",
      parallelToolCalls: true,
      thinking: { enabled: false },
      responseFormat: { type: "text" },
    };
    const prompt = renderPrompt({ tokenizer, template }, conversation);
    expect(prompt.text).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(prompt.text).toContain("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>");
    expect(prompt.text).toContain("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>");
    expect(prompt.text.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    expect(prompt.startInReasoning).toBe(false);
    expect(tokenizer.decode(prompt.ids)).toBe(prompt.text);
    expect(renderPrompt({ tokenizer, template }, { ...conversation, thinking: { enabled: true } }).startInReasoning).toBe(true);
  });
});
