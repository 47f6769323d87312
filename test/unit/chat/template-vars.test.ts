// The IR → template-variables conversion: the same conversation as a template golden, given as IR, renders to the
// Python golden exactly; client strings are escaped; inline <think> is split out; images become parts.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Conversation, Message, ToolDef } from "../../../src/chat/ir.ts";
import { ChatTemplate, type TemplateVariables } from "../../../src/chat/template.ts";
import { splitInlineReasoning, templateVariables } from "../../../src/chat/template-vars.ts";

const root = join(import.meta.dir, "..", "..", "..");
type Golden = { cases: { name: string; vars: TemplateVariables; rendered: string }[] };
const golden = (name: string) => JSON.parse(readFileSync(join(root, "test/fixtures/templates", `${name}.json`), "utf8")) as Golden;
const source = readFileSync(join(root, "test/fixtures/templates/constructs.jinja"), "utf8");
const identity = (s: string) => s;

const weather: ToolDef = {
  name: "get_weather",
  description: "Get the weather — in °C or °F.",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string", description: 'City name, e.g. "Paris"' },
      unit: { type: "string", enum: ["celsius", "fahrenheit"], default: "celsius" },
      days: { type: "integer", minimum: 1, maximum: 14 },
      detailed: { type: "boolean", default: false },
      threshold: { type: ["number", "null"], default: null, multipleOf: 0.5 },
    },
    required: ["city"],
  },
};
const run: ToolDef = {
  name: "run_command",
  description: "Run a shell command.",
  parameters: {
    type: "object",
    properties: { cmd: { type: "array", items: { type: "string" } }, env: { type: "object", additionalProperties: { type: "string" } }, timeout: { type: "number" } },
    required: ["cmd"],
  },
};

const text = (t: string) => [{ type: "text" as const, text: t }];

// The "tools" conversation of scripts/fixtures/template_goldens.py, as the API converters produce it.
const toolTurns: Message[] = [
  { role: "system", content: text("You are a helpful assistant.\n") },
  { role: "user", content: text("What's the weather in Zürich, and list /tmp?") },
  {
    role: "assistant",
    content: text("Let me check both."),
    reasoning: "\nTwo tools are needed.\n\n",
    toolCalls: [
      { id: "call_1", name: "get_weather", arguments: { city: "Zürich", days: 3, detailed: true, threshold: null, unit: "celsius" } },
      { id: "call_2", name: "run_command", arguments: JSON.stringify({ cmd: ["ls", "-la", "/tmp/ü"], env: { LANG: "C", N: "1" }, timeout: 2.5 }) },
    ],
  },
  { role: "tool", toolCallId: "call_1", name: "get_weather", content: text('{"temp": 21.5, "sky": "clear"}') },
  { role: "tool", toolCallId: "call_2", name: "run_command", content: text("total 0\ndrwx  .\n") },
  { role: "assistant", content: text("It is 21.5 °C and clear; /tmp is empty."), reasoning: "Both results are in." },
  { role: "user", content: text("Thanks! Tomorrow?") },
];

function conv(messages: Message[], over: Partial<Conversation> = {}): Conversation {
  return { messages, tools: [], toolChoice: "auto", parallelToolCalls: true, thinking: { enabled: true }, responseFormat: { type: "text" }, ...over };
}

describe("IR → template variables", () => {
  test("renders exactly as the Python golden of the same conversation", () => {
    const t = ChatTemplate.fromSource(source, "constructs");
    const byName = new Map(golden("constructs").cases.map((c) => [c.name, c.rendered]));
    expect(t.render(templateVariables(conv(toolTurns, { tools: [weather, run] }), identity))).toBe(byName.get("tools")!);
    expect(t.render(templateVariables(conv(toolTurns, { tools: [weather, run], thinking: { enabled: false } }), identity))).toBe(byName.get("tools-thinking-off")!);
    const images: Message[] = [
      { role: "user", content: [{ type: "image", source: { kind: "url", url: "http://x/a.png" } }, ...text("What is in this picture?"), { type: "image", source: { kind: "url", url: "http://x/b.png" } }, ...text(" And this one?")] },
    ];
    expect(t.render(templateVariables(conv(images), identity))).toBe(byName.get("images")!);
    const inline: Message[] = [
      { role: "user", content: text("Q") },
      { role: "assistant", content: text("<think>\ninline reasoning\n</think>\n\nVisible answer") },
      { role: "user", content: text("Q2") },
      { role: "assistant", content: text("<think>\nlatest\n</think>\n\nLatest answer") },
    ];
    expect(t.render(templateVariables(conv(inline), identity, false))).toBe(byName.get("inline-think")!);
  });

  test("client strings are escaped; switches pass through", () => {
    const mark = (s: string) => `[${s}]`;
    const v = templateVariables(
      conv(toolTurns.slice(0, 3), { tools: [run], thinking: { enabled: false, preserve: true, effort: "low" } }),
      mark,
    );
    expect(v.messages[0]).toEqual({ role: "system", content: "[You are a helpful assistant.\n]" });
    expect(v.messages[2]!.reasoning_content).toBe("[\nTwo tools are needed.\n\n]");
    expect(v.messages[2]!.tool_calls![1]!.function.arguments).toEqual({ "[cmd]": ["[ls]", "[-la]", "[/tmp/ü]"], "[env]": { "[LANG]": "[C]", "[N]": "[1]" }, "[timeout]": 2.5 });
    expect(v.tools![0]!.function.name).toBe("[run_command]");
    expect(v.enable_thinking).toBe(false);
    expect(v.preserve_thinking).toBe(true);
    expect(v.reasoning_effort).toBe("low");
    expect(v.add_generation_prompt).toBe(true);
  });

  test("tool_choice none renders no tools; unparseable argument strings stay strings", () => {
    expect(templateVariables(conv(toolTurns, { tools: [run], toolChoice: "none" }), identity).tools).toBeUndefined();
    const v = templateVariables(conv([{ role: "assistant", content: [], toolCalls: [{ id: "c", name: "f", arguments: "not json" }] }]), identity);
    expect(v.messages[0]!.tool_calls![0]!.function.arguments).toBe("not json");
  });

  test("inline reasoning split matches the Qwen templates", () => {
    expect(splitInlineReasoning("<think>\na\n</think>\n\nb")).toEqual({ reasoning: "a", content: "b" });
    expect(splitInlineReasoning("no tags")).toEqual({ content: "no tags" });
    expect(splitInlineReasoning("x</think>y</think>\nz")).toEqual({ reasoning: "x", content: "z" });
  });
});

describe("system messages beyond the first", () => {
  const conv = (messages: Message[]): Conversation => ({
    messages,
    tools: [],
    toolChoice: "auto",
    parallelToolCalls: true,
    thinking: { enabled: false },
    responseFormat: { type: "text" },
  });
  const sys = (text: string): Message => ({ role: "system", content: [{ type: "text", text }] });
  const user = (text: string): Message => ({ role: "user", content: [{ type: "text", text }] });
  const tiny = ChatTemplate.load(join(root, "models", "splash-tiny"));

  test("leading system messages merge into one", () => {
    const v = templateVariables(conv([sys("a"), sys("b"), user("q")]), identity);
    expect(v.messages.map((m) => [m.role, m.content])).toEqual([
      ["system", "a\n\nb"],
      ["user", "q"],
    ]);
  });

  test("a later system message becomes a user turn in place, and the template renders it", () => {
    const v = templateVariables(conv([sys("a"), user("q"), sys("reminder"), user("r")]), identity);
    expect(v.messages.map((m) => m.role)).toEqual(["system", "user", "user", "user"]);
    // Without the rewrite the Qwen template raises "The system message must come first".
    const text = tiny.render(v);
    expect(text.indexOf("<|im_start|>system\na")).toBe(0);
    expect(text).toContain("<|im_start|>user\nreminder<|im_end|>");
  });
});
