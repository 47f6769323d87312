// The output parser on answers a grammar wrote (OutputParserOptions.constrained): it reads them exactly as the grammar
// wrote them, where an unconstrained answer would be read leniently. Tool-call tags inside a JSON answer's strings
// stay content; a parameter value ends only at "\n</parameter>", so raw text holding "</function>" or
// "<parameter=", and JSON strings holding "</parameter>", keep it. Any split of the text gives the same events.
import { describe, expect, test } from "bun:test";
import type { ToolDef } from "../../../src/chat/ir.ts";
import { OutputParser, type OutputParserOptions, type ParserEvent } from "../../../src/chat/output-parser.ts";

const tools: ToolDef[] = [{ name: "note", parameters: { type: "object", properties: { text: { type: "string" }, meta: { type: "object" } }, required: ["text"] } }];

function parse(chunks: string[], calls: NonNullable<OutputParserOptions["constrained"]>["calls"]): { content: string; calls: unknown[] } {
  let n = 0;
  const p = new OutputParser({ tools, startInReasoning: false, newToolCallId: () => `call_${n++}`, constrained: { calls } });
  const events: ParserEvent[] = [...chunks.flatMap((c) => p.push(c)), ...p.finish()];
  return {
    content: events.flatMap((e) => (e.type === "content" ? [e.text] : [])).join(""),
    calls: events.flatMap((e) => (e.type === "tool_call_end" ? [e.call] : [])),
  };
}

// The text cut at every position, and into single characters.
function splits(text: string): string[][] {
  const out = [[text], [...text]];
  for (let i = 1; i < text.length; i++) out.push([text.slice(0, i), text.slice(i)]);
  return out;
}

const call = (value: string, meta = "{}") => `<tool_call>\n<function=note>\n<parameter=text>\n${value}\n</parameter>\n<parameter=meta>\n${meta}\n</parameter>\n</function>\n</tool_call>`;

describe("constrained output", () => {
  test('calls "never": a JSON answer whose strings hold tool-call markup is all content', () => {
    const answer = '{"a": "<tool_call>\\n<function=note>", "b": "</think>"}';
    for (const chunks of splits(answer)) expect(parse(chunks, "never")).toEqual({ content: answer, calls: [] });
  });

  test('calls "leading": the answer is JSON (markup inside stays content) or calls after format newlines', () => {
    const json = '["x <tool_call> y"]';
    for (const chunks of splits(json)) expect(parse(chunks, "leading")).toEqual({ content: json, calls: [] });
    const calls = `\n\n${call("hi")}\n${call("there")}`;
    for (const chunks of splits(calls)) {
      expect(parse(chunks, "leading")).toEqual({
        content: "",
        calls: [
          { id: "call_0", name: "note", arguments: { text: "hi", meta: {} } },
          { id: "call_1", name: "note", arguments: { text: "there", meta: {} } },
        ],
      });
    }
  });

  test("a raw value holding other tags, and ending in a newline, is kept whole", () => {
    const value = "a </function> b <parameter=x>\n</tool_call> c\n";
    for (const chunks of splits(call(value))) expect(parse(chunks, "leading").calls).toEqual([{ id: "call_0", name: "note", arguments: { text: value, meta: {} } }]);
  });

  test("a JSON value whose string holds </parameter> is kept whole; an empty raw value is empty", () => {
    const meta = '{"k": "</parameter>", "n": [1]}';
    for (const chunks of splits(call("", meta))) expect(parse(chunks, "leading").calls).toEqual([{ id: "call_0", name: "note", arguments: { text: "", meta: { k: "</parameter>", n: [1] } } }]);
  });

  test("an answer that writes <think> does not open reasoning (the prompt decides where reasoning is)", () => {
    for (const chunks of splits("<think>x</think> text")) expect(parse(chunks, "anywhere")).toEqual({ content: "<think>x</think> text", calls: [] });
  });

  test('calls "anywhere": text, then calls', () => {
    for (const chunks of splits(`Sure.\n\n${call("x")}`)) expect(parse(chunks, "anywhere")).toEqual({ content: "Sure.", calls: [{ id: "call_0", name: "note", arguments: { text: "x", meta: {} } }] });
  });
});
