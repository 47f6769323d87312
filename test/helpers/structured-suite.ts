// The structured-output suite run through a whole ChatModel (template, tokenizer, grammar, engine, output parser):
// every schema of test/fixtures/grammar/schemas.ts as a json_schema response format, and tool calls forced by
// tool_choice, each output checked with ajv. Used by test/integration/structured-output.test.ts on the fixture model.
//
// Speculative decoding reuses it as is: pass `draft` (GenerationOptions.draft, e.g. "dflash" on a model
// loaded with the qwen35-dense-tiny-dflash drafter) and the same outputs must validate, with drafted tokens checked
// against the grammar before verification.
import type { ChatModel, Conversation, GenerationOptions, ToolCall, ToolDef } from "../../src/chat/ir.ts";
import { validator } from "../fixtures/grammar/harness.ts";
import { SCHEMAS } from "../fixtures/grammar/schemas.ts";

export { SCHEMAS };

// Temperature 1 and nothing else shaping the distribution: what a random model then writes is what the grammar allows.
export const RANDOM_SAMPLING: GenerationOptions["sampling"] = { temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 };

export type SuiteOptions = { seed: number; draft?: GenerationOptions["draft"]; thinking?: boolean };

export function conversation(extra: Partial<Conversation>, thinking = false): Conversation {
  return {
    messages: [{ role: "user", content: [{ type: "text", text: "Answer with JSON only." }] }],
    tools: [],
    toolChoice: "auto",
    parallelToolCalls: true,
    thinking: { enabled: thinking },
    responseFormat: { type: "text" },
    ...extra,
  };
}

export type Outcome = { content: string; reasoning: string; calls: ToolCall[]; finishReason: string; completionTokens: number };

export async function run(model: ChatModel, conv: Conversation, options: SuiteOptions): Promise<Outcome> {
  const out: Outcome = { content: "", reasoning: "", calls: [], finishReason: "", completionTokens: 0 };
  const opts: GenerationOptions = { stop: [], sampling: { ...RANDOM_SAMPLING, seed: options.seed }, signal: new AbortController().signal };
  if (options.draft) opts.draft = options.draft;
  for await (const e of model.generate(conv, opts)) {
    if (e.type === "content") out.content += e.text;
    else if (e.type === "reasoning") out.reasoning += e.text;
    else if (e.type === "tool_call_end") out.calls.push(e.call);
    else if (e.type === "done") {
      out.finishReason = e.finishReason;
      out.completionTokens = e.usage.completionTokens;
    }
  }
  return out;
}

const ajv = validator();

// Why an output is not a valid answer for the schema, or null when it is one.
export function schemaProblem(schema: Record<string, unknown>, outcome: Outcome): string | null {
  if (outcome.finishReason !== "stop") return `finished with ${outcome.finishReason}`;
  if (outcome.calls.length) return "made tool calls";
  let value: unknown;
  try {
    value = JSON.parse(outcome.content);
  } catch (e) {
    return `content is not JSON (${(e as Error).message}): ${JSON.stringify(outcome.content.slice(0, 200))}`;
  }
  return ajv.validate(schema, value) ? null : `${ajv.errorsText()}: ${JSON.stringify(value).slice(0, 200)}`;
}

// Why tool calls are not valid calls of `tools` (`expected`: how many, or "some"), or null.
export function callsProblem(tools: ToolDef[], outcome: Outcome, expected: number | "some", only?: string): string | null {
  if (outcome.finishReason !== "tool_calls") return `finished with ${outcome.finishReason}`;
  if (outcome.content.trim()) return `content beside the calls: ${JSON.stringify(outcome.content.slice(0, 100))}`;
  if (expected === "some" ? outcome.calls.length === 0 : outcome.calls.length !== expected) return `${outcome.calls.length} calls, expected ${expected}`;
  for (const call of outcome.calls) {
    const tool = tools.find((t) => t.name === call.name);
    if (!tool || (only && call.name !== only)) return `a call to ${call.name}`;
    if (!ajv.validate(tool.parameters, call.arguments)) return `${call.name} arguments ${JSON.stringify(call.arguments)}: ${ajv.errorsText()}`;
  }
  return null;
}

// Tools whose arguments cover the parameter kinds: enums, bounded and unbounded numbers, bounded raw strings,
// booleans, arrays, nested objects, optional parameters.
export const TOOLS: ToolDef[] = [
  {
    name: "get_weather",
    description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string", enum: ["Paris", "Oslo", "Lima"] }, days: { type: "integer", minimum: 1, maximum: 7 }, units: { type: "string", maxLength: 6 } }, required: ["city", "days"] },
  },
  {
    name: "create_event",
    parameters: {
      type: "object",
      properties: {
        title: { type: "string", maxLength: 12 },
        when: { type: "string", format: "date" },
        attendees: { type: "array", items: { type: "object", properties: { name: { type: "string" }, optional: { type: "boolean" } }, required: ["name"] }, maxItems: 3 },
        priority: { type: "number", minimum: 0, maximum: 1 },
      },
      required: ["title", "when", "attendees"],
    },
  },
  { name: "ping", parameters: { type: "object", properties: {} } },
];
