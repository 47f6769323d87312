// Tool calls in the Qwen XML format under a grammar: random outputs parse as well-formed calls to allowed tools,
// their arguments (raw text for string parameters, JSON otherwise) validate against the tool's schema, and raw text
// never holds a tag the call parser looks for.
import { beforeAll, describe, expect, test } from "bun:test";
import type { ToolDef } from "../../../../src/chat/ir.ts";
import { StructuredOutput, type ConstraintRequest } from "../../../../src/engine/grammar/index.ts";
import { model, outputs, parseCalls, qwen3Vocabulary, validator, type Call, type Model } from "../../../fixtures/grammar/harness.ts";

const TOOLS: ToolDef[] = [
  {
    name: "write_file",
    description: "Write a file",
    parameters: { type: "object", properties: { path: { type: "string" }, content: { type: "string" }, mode: { type: "string", enum: ["create", "overwrite"] } }, required: ["path", "content"] },
  },
  {
    name: "search",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", minLength: 1, maxLength: 12 },
        limit: { type: "integer", minimum: 1, maximum: 50 },
        filters: { type: "object", properties: { lang: { type: "string", enum: ["ts", "py"] }, since: { type: "string", format: "date" } }, additionalProperties: false },
        tags: { type: "array", items: { type: "string" }, maxItems: 3 },
        exact: { type: "boolean" },
        id: { type: "string", format: "uuid" },
      },
      required: ["query", "limit"],
    },
    strict: true,
  },
  { name: "get_time", parameters: { type: "object", properties: {} } },
  // Raw text parameters with lengths beside patterns counting follows through their DFA, cut short by the bound.
  {
    name: "tag",
    parameters: {
      type: "object",
      properties: {
        slug: { type: "string", pattern: "^[a-z]+(-[a-z]+)*$", maxLength: 5 },
        owner: { type: "string", format: "email", maxLength: 9 },
        lines: { type: "string", pattern: "^\\S+(\\n\\S+)*$", minLength: 3, maxLength: 6 },
      },
      required: ["slug", "owner", "lines"],
    },
  },
];

const ajv = validator();
const validators = new Map(TOOLS.map((t) => [t.name, ajv.compile(t.parameters)]));
function checkCalls(calls: Call[]): void {
  for (const call of calls) {
    const validate = validators.get(call.name)!;
    if (!validate(call.arguments)) throw new Error(`${call.name} ${JSON.stringify(call.arguments)}: ${JSON.stringify(validate.errors)}`);
  }
}

const TIMEOUT = 60_000; // a raw-text tool grammar compiles in ~3 s over the 151K vocabulary on the 2-core machine
let so: StructuredOutput;
let models: Model[];
beforeAll(async () => {
  const vocab = await qwen3Vocabulary();
  so = await StructuredOutput.create(vocab);
  models = [model(vocab, "uniform", 21), model(vocab, "skewed", 22)];
}, TIMEOUT);

const request = (over: Partial<ConstraintRequest>): ConstraintRequest => ({ responseFormat: { type: "text" }, tools: TOOLS, toolChoice: "auto", parallelToolCalls: false, ...over });

describe("tool-call grammars", () => {
  test("tool_choice required, one call", async () => {
    const grammar = await so.prepare(request({ toolChoice: "required" }));
    expect(grammar!.kind).toBe("tool_calls");
    for (const out of await outputs(grammar!, models, 4, 1)) {
      const calls = parseCalls(out.text, TOOLS);
      expect(calls.length).toBe(1);
      checkCalls(calls);
    }
  }, TIMEOUT);

  test("tool_choice names a tool, parallel calls allowed", async () => {
    const grammar = await so.prepare(request({ toolChoice: { name: "search" }, parallelToolCalls: true }));
    let most = 0;
    for (const out of await outputs(grammar!, models, 4, 2)) {
      const calls = parseCalls(out.text, TOOLS);
      expect(calls.every((c) => c.name === "search")).toBe(true);
      checkCalls(calls);
      most = Math.max(most, calls.length);
    }
    expect(most).toBeGreaterThan(1);
  }, TIMEOUT);

  test("raw parameters with lengths beside patterns and a format end as matches within their bounds", async () => {
    const grammar = await so.prepare(request({ toolChoice: { name: "tag" } }));
    for (const out of await outputs(grammar!, models, 8, 3)) {
      const calls = parseCalls(out.text, TOOLS);
      expect(calls.map((c) => c.name)).toEqual(["tag"]);
      checkCalls(calls);
    }
  }, TIMEOUT);

  test("tool_choice auto with a strict tool: text, then optional calls", async () => {
    const grammar = await so.prepare(request({ parallelToolCalls: true }));
    expect(grammar!.kind).toBe("text_or_tool_calls");
    for (const out of await outputs(grammar!, models, 4, 3)) {
      const at = out.text.indexOf("<tool_call>");
      if (at >= 0) checkCalls(parseCalls(out.text.slice(at), TOOLS));
    }
  }, TIMEOUT);

  test("auto with a JSON response format: the JSON value or calls", async () => {
    const schema = { type: "object", properties: { answer: { type: "integer" } }, required: ["answer"] };
    const grammar = await so.prepare(request({ responseFormat: { type: "json_schema", schema } }));
    expect(grammar!.kind).toBe("json_or_tool_calls");
    const validate = ajv.compile(schema);
    for (const out of await outputs(grammar!, models, 4, 4)) {
      if (out.text.trimStart().startsWith("<tool_call>")) checkCalls(parseCalls(out.text, TOOLS));
      else expect(validate(JSON.parse(out.text))).toBe(true);
    }
  }, TIMEOUT);

  test("no grammar when nothing is forced or strict", async () => {
    expect(await so.prepare(request({ tools: [TOOLS[0]!] }))).toBeNull();
    expect(await so.prepare(request({ toolChoice: "none" }))).toBeNull();
  }, TIMEOUT);

  test("the call tags are usable as the tokenizer's added tokens", async () => {
    const grammar = await so.prepare(request({ toolChoice: "required" }));
    const c = await grammar!.start({ thinking: false });
    const mask = new Uint32Array(Math.ceil(so.vocabulary.size / 32));
    c.fillMask(mask);
    const id = so.vocabulary.added.get("<tool_call>")!;
    expect((mask[id >>> 5]! >>> (id & 31)) & 1).toBe(1);
    const think = so.vocabulary.added.get("<think>")!;
    expect((mask[think >>> 5]! >>> (think & 31)) & 1).toBe(0);
    c.release();
  }, TIMEOUT);
});
