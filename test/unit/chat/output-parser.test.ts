// The streaming output parser: fixtures for each shape of answer, malformed and truncated markup, and the property
// that any split of the same text into chunks gives the same events once adjacent text deltas are merged.
import { describe, expect, test } from "bun:test";
import { coerceParameter } from "../../../src/chat/coerce.ts";
import type { ToolDef } from "../../../src/chat/ir.ts";
import { OutputParser, type ParserEvent } from "../../../src/chat/output-parser.ts";

const tools: ToolDef[] = [
  {
    name: "get_weather",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string" },
        days: { type: "integer" },
        detailed: { type: "boolean" },
        threshold: { type: ["number", "null"] },
        unit: { anyOf: [{ type: "string", enum: ["c", "f"] }, { type: "null" }] },
      },
    },
  },
  {
    name: "run",
    parameters: {
      type: "object",
      properties: { cmd: { type: "array", items: { type: "string" } }, env: { type: "object" }, note: { type: "string" } },
    },
  },
];

function ids() {
  let n = 0;
  return () => `call_${n++}`;
}

// Adjacent reasoning/content texts and deltas of the same call concatenated: the split-independent form.
function merged(events: ParserEvent[]): ParserEvent[] {
  const out: ParserEvent[] = [];
  for (const e of events) {
    const last = out.at(-1);
    if (last && (e.type === "reasoning" || e.type === "content") && last.type === e.type) {
      out[out.length - 1] = { ...last, text: last.text + e.text };
    } else if (last && e.type === "tool_call_delta" && last.type === "tool_call_delta" && last.index === e.index) {
      out[out.length - 1] = { ...last, argumentsJson: last.argumentsJson + e.argumentsJson };
    } else out.push(e);
  }
  return out;
}

function parse(chunks: string[], startInReasoning = false): ParserEvent[] {
  const p = new OutputParser({ tools, startInReasoning, newToolCallId: ids() });
  const events = chunks.flatMap((c) => p.push(c));
  return [...events, ...p.finish()];
}

function parseWhole(text: string, startInReasoning = false) {
  return merged(parse([text], startInReasoning));
}

const weatherCall =
  "<tool_call>\n<function=get_weather>\n<parameter=city>\nZürich\n</parameter>\n<parameter=days>\n3\n</parameter>\n" +
  "<parameter=detailed>\nTrue\n</parameter>\n<parameter=threshold>\nNone\n</parameter>\n</function>\n</tool_call>";
const runCall =
  '<tool_call>\n<function=run>\n<parameter=cmd>\n["ls", "-la"]\n</parameter>\n<parameter=env>\n{"A": "1"}\n</parameter>\n' +
  "<parameter=note>\nline one\nline two with </b> and \"quotes\"\n\n</parameter>\n</function>\n</tool_call>";

const samples: { name: string; text: string; reasoning: boolean }[] = [
  { name: "reasoning then content", text: "Let me think.\nStep 2.\n</think>\n\nThe answer is 42.", reasoning: true },
  { name: "content only", text: "Plain answer with <b>html</b> and a < sign.", reasoning: false },
  { name: "reasoning then one call", text: `I need the weather.\n</think>\n\nChecking.\n\n${weatherCall}`, reasoning: true },
  { name: "two calls", text: `</think>\n\n${weatherCall}\n${runCall}`, reasoning: true },
  { name: "call without content", text: weatherCall, reasoning: false },
  { name: "model opens its own think", text: "<think>\nhidden\n</think>\n\nshown", reasoning: false },
  { name: "content after a call", text: `${weatherCall}\nTrailing words.`, reasoning: false },
  { name: "unknown tool and parameter", text: "<tool_call>\n<function=other>\n<parameter=x>\n{\"a\": 1}\n</parameter>\n</function>\n</tool_call>", reasoning: false },
  { name: "no parameters", text: "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>", reasoning: false },
  { name: "truncated reasoning", text: "thinking forever and then </thi", reasoning: true },
  { name: "truncated call", text: "ok\n\n<tool_call>\n<function=run>\n<parameter=note>\npartial val", reasoning: false },
  { name: "not a call", text: "Use <tool_call> tags like <tool_call><b>this</b>.", reasoning: false },
  { name: "malformed function", text: "<tool_call>\n<function=bad\nname>\n</tool_call> after", reasoning: false },
  { name: "missing close tags", text: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n<parameter=days>\n2\n</tool_call>", reasoning: false },
  { name: "junk inside a call", text: "<tool_call>\n<function=get_weather>\nhello\n</function>\n</tool_call>", reasoning: false },
  { name: "CJK and emoji", text: "思考中…🙂\n</think>\n\n答案：<tool_call>\n<function=run>\n<parameter=note>\n你好 🌍\n</parameter>\n</function>\n</tool_call>", reasoning: true },
];

describe("output parser", () => {
  test("reasoning, then content", () => {
    expect(parseWhole(samples[0]!.text, true)).toEqual([
      { type: "reasoning", text: "Let me think.\nStep 2." },
      { type: "content", text: "The answer is 42." },
    ]);
  });

  test("a call: name first, arguments coerced by schema, deltas concatenate to JSON.stringify(arguments)", () => {
    const ev = parseWhole(samples[2]!.text, true);
    const args = { city: "Zürich", days: 3, detailed: true, threshold: null };
    expect(ev).toEqual([
      { type: "reasoning", text: "I need the weather." },
      { type: "content", text: "Checking." },
      { type: "tool_call_start", index: 0, id: "call_0", name: "get_weather" },
      { type: "tool_call_delta", index: 0, argumentsJson: JSON.stringify(args) },
      { type: "tool_call_end", index: 0, call: { id: "call_0", name: "get_weather", arguments: args } },
    ]);
  });

  test("two calls in one turn; arrays, objects and multi-line strings", () => {
    const ev = parseWhole(samples[3]!.text, true);
    const ends = ev.filter((e) => e.type === "tool_call_end");
    expect(ends.map((e) => e.call)).toEqual([
      { id: "call_0", name: "get_weather", arguments: { city: "Zürich", days: 3, detailed: true, threshold: null } },
      { id: "call_1", name: "run", arguments: { cmd: ["ls", "-la"], env: { A: "1" }, note: 'line one\nline two with </b> and "quotes"\n' } },
    ]);
    expect(ev.some((e) => e.type === "content")).toBe(false);
  });

  test("the name goes out as soon as it is known, a string argument as it arrives", () => {
    const p = new OutputParser({ tools, startInReasoning: false, newToolCallId: ids() });
    expect(p.push("<tool_call>\n<function=ru")).toEqual([]);
    expect(p.push("n>\n")).toEqual([{ type: "tool_call_start", index: 0, id: "call_0", name: "run" }]);
    expect(p.push("<parameter=note>\nhello wor")).toEqual([
      { type: "tool_call_delta", index: 0, argumentsJson: '{"note":"' },
      { type: "tool_call_delta", index: 0, argumentsJson: "hello wor" },
    ]);
    expect(p.push("ld\n")).toEqual([{ type: "tool_call_delta", index: 0, argumentsJson: "ld" }]);
    expect(p.push("</parameter>\n</function>\n</tool_call>")).toEqual([
      { type: "tool_call_delta", index: 0, argumentsJson: '"' },
      { type: "tool_call_delta", index: 0, argumentsJson: "}" },
      { type: "tool_call_end", index: 0, call: { id: "call_0", name: "run", arguments: { note: "hello world" } } },
    ]);
  });

  test("content never waits for the end of the turn, only for a possible tag", () => {
    const p = new OutputParser({ tools, startInReasoning: false });
    expect(p.push("Hello wor")).toEqual([{ type: "content", text: "Hello wor" }]);
    expect(p.push("ld <tool")).toEqual([{ type: "content", text: "ld " }]);
    expect(p.push("kit> is fine")).toEqual([{ type: "content", text: "<toolkit> is fine" }]);
    expect(p.push("\n")).toEqual([]); // a newline waits: a call may follow
    expect(p.push("more")).toEqual([{ type: "content", text: "\nmore" }]);
  });

  test("the prompt's open <think>: reasoning until </think>, all reasoning if it never closes", () => {
    expect(parseWhole("just thinking\n", true)).toEqual([{ type: "reasoning", text: "just thinking\n" }]);
    expect(parseWhole(samples[9]!.text, true)).toEqual([{ type: "reasoning", text: "thinking forever and then </thi" }]);
    expect(parseWhole(samples[5]!.text)).toEqual([
      { type: "reasoning", text: "hidden" },
      { type: "content", text: "shown" },
    ]);
  });

  test("malformed markup falls back to content, nothing is lost", () => {
    expect(parseWhole(samples[11]!.text)).toEqual([{ type: "content", text: samples[11]!.text }]);
    expect(parseWhole(samples[12]!.text)).toEqual([{ type: "content", text: samples[12]!.text }]);
  });

  test("only the offered tools become calls: another name, or any call with no tools, stays text", () => {
    const undeclared = samples.find((s) => s.name === "unknown tool and parameter")!.text;
    expect(parseWhole(undeclared)).toEqual([{ type: "content", text: undeclared }]);
    // a declared call after an undeclared one is still a call
    const ev = parseWhole(`${undeclared}\n${weatherCall}`);
    expect(ev[0]).toEqual({ type: "content", text: undeclared });
    expect(ev.filter((e) => e.type === "tool_call_end").map((e) => e.call.name)).toEqual(["get_weather"]);
    // no tools: the markup is text, and nothing is held back waiting for a tag
    const bare = new OutputParser({ tools: [], startInReasoning: false });
    expect(bare.push("Sure.\n\n<tool_")).toEqual([{ type: "content", text: "Sure.\n\n<tool_" }]);
    expect([...bare.push(weatherCall.slice(6)), ...bare.finish()]).toEqual([{ type: "content", text: weatherCall.slice(6) }]);
  });

  test("truncated or unclosed calls close with what was read", () => {
    const t = parseWhole(samples[10]!.text);
    expect(t[0]).toEqual({ type: "content", text: "ok" });
    expect(t.at(-1)).toEqual({ type: "tool_call_end", index: 0, call: { id: "call_0", name: "run", arguments: { note: "partial val" } } });
    const m = parseWhole(samples[13]!.text);
    expect(m.at(-1)).toEqual({ type: "tool_call_end", index: 0, call: { id: "call_0", name: "get_weather", arguments: { city: "Paris", days: 2 } } });
    const junk = parseWhole(samples[14]!.text);
    expect(junk.filter((e) => e.type === "tool_call_end")).toHaveLength(1);
    expect(junk.filter((e) => e.type === "content").map((e) => (e as { text: string }).text).join("")).toContain("hello");
  });

  test("property: any split of the text gives the same merged events", () => {
    let seed = 12345;
    const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (const s of samples) {
      const whole = parseWhole(s.text, s.reasoning);
      const chars = Array.from(s.text);
      // One character at a time, and 200 random splits.
      expect(merged(parse(chars, s.reasoning))).toEqual(whole);
      for (let k = 0; k < 200; k++) {
        const chunks: string[] = [];
        let i = 0;
        while (i < chars.length) {
          const n = 1 + Math.floor(rand() * 12);
          chunks.push(chars.slice(i, i + n).join(""));
          i += n;
        }
        expect({ name: s.name, events: merged(parse(chunks, s.reasoning)) }).toEqual({ name: s.name, events: whole });
      }
      // Every call's deltas concatenate to JSON.stringify of its arguments.
      for (const e of whole) {
        if (e.type !== "tool_call_end") continue;
        const json = whole.filter((d) => d.type === "tool_call_delta" && d.index === e.index).map((d) => (d as { argumentsJson: string }).argumentsJson).join("");
        expect(json).toBe(JSON.stringify(e.call.arguments));
      }
    }
  });
});

describe("schema coercion", () => {
  test("types, anyOf, Python spellings, fallbacks", () => {
    const c = (text: string, schema?: Record<string, unknown>) => coerceParameter(text, schema);
    expect(c("3", { type: "integer" })).toEqual({ value: 3, ok: true });
    expect(c("3.5", { type: "integer" })).toEqual({ value: "3.5", ok: false });
    expect(c("-1.5e3", { type: "number" })).toEqual({ value: -1500, ok: true });
    expect(c("False", { type: "boolean" })).toEqual({ value: false, ok: true });
    expect(c("None", { type: ["string", "null"] })).toEqual({ value: null, ok: true });
    expect(c("none", { type: ["string", "null"] })).toEqual({ value: "none", ok: true });
    expect(c("[1, 2]", { type: "array" })).toEqual({ value: [1, 2], ok: true });
    expect(c("{\"a\": [1]}", { anyOf: [{ type: "object" }, { type: "string" }] })).toEqual({ value: { a: [1] }, ok: true });
    expect(c("007", { type: "string" })).toEqual({ value: "007", ok: true });
    expect(c(" spaced ", { type: "string" })).toEqual({ value: " spaced ", ok: true });
    expect(c("12", { enum: [12, 13] })).toEqual({ value: 12, ok: true });
    expect(c("{\"x\": 1}", {})).toEqual({ value: { x: 1 }, ok: true });
    expect(c("plain", undefined)).toEqual({ value: "plain", ok: true });
  });
});
