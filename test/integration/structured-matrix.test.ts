// Constrained output in combination, over HTTP with the official SDKs, as users run it: `splash serve` with the
// embedded model, once per drafter (--draft none, mtp, dflash, dflash2; one server each, reused by every case). Every
// constrained mode — json_schema, json_object, a forced tool call (any tool, and a named one), strict tools, tools
// beside a JSON response format — and plain auto tools, on the three surfaces where each exists, streaming and not,
// all of a mode's cases at once (batched). Every answer is checked with ajv against the schema it was given: the
// JSON text, or each call's arguments against its tool's parameters, and the finish reason matches what came out.
//
// Streaming cases sample greedily and non-streaming ones with the model's defaults (seeded): greedy output is the
// same with a drafter as without one, so the greedy answers of the mtp, dflash and dflash2 servers must equal the none
// server's. json_object is greedy both ways: an object is unbounded, and the embedded model sampled at its defaults
// starts a tool definition about one time in three and repeats itself inside a string until max_tokens. Modes a surface does not have are left out: Anthropic has no json_object, and its tool `strict` is
// accepted and ignored (Claude Code sends it on every tool). Plain auto tools have no grammar: their calls must name
// offered tools and carry objects, but what the model puts in them is its own.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { validator } from "../fixtures/grammar/harness.ts";
import { scrapeMetrics } from "../helpers/server.ts";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";

const ajv = validator();
const MAX_TOKENS = 400;

// What a function writes, as JSON: bounded strings so a sampled answer ends (also beside a pattern and a format); a
// format, an enum, integer bounds.
const ANSWER = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 24 },
    language: { enum: ["python", "typescript", "c"] },
    lines: { type: "integer", minimum: 1, maximum: 500 },
    tested: { type: "boolean" },
    written: { type: "string", format: "date" },
    slug: { type: "string", pattern: "^[a-z]+(-[a-z]+)*$", maxLength: 12 },
    author: { type: "string", format: "email", maxLength: 24 },
  },
  required: ["name", "language", "lines", "slug"],
  additionalProperties: false,
};
const TOOLS = [
  { name: "get_weather", description: "Current weather for a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 32 }, unit: { enum: ["celsius", "fahrenheit"] } }, required: ["city"] } },
  { name: "read_file", description: "Read a file of the project", parameters: { type: "object", properties: { path: { type: "string", maxLength: 32 }, limit: { type: "integer", minimum: 1, maximum: 1000 } }, required: ["path"] } },
];
const PROMPT = { json: "Describe the Python function add(a, b) as JSON.", tools: "What is the weather in Paris?" };

type Surface = "chat" | "responses" | "messages";
type Mode = {
  name: string;
  surfaces: Surface[];
  prompt: string;
  format?: "json_schema" | "json_object";
  tools?: { strict: boolean };
  choice?: "auto" | "any" | { name: string };
  grammar: boolean; // false: plain auto tools, the model's own arguments
  greedy?: boolean; // not streaming too
};
const ALL: Surface[] = ["chat", "responses", "messages"];
const MODES: Mode[] = [
  { name: "json_schema", surfaces: ALL, prompt: PROMPT.json, format: "json_schema", grammar: true },
  { name: "json_object", surfaces: ["chat", "responses"], prompt: PROMPT.json, format: "json_object", grammar: true, greedy: true },
  { name: "forced tool (any)", surfaces: ALL, prompt: PROMPT.tools, tools: { strict: false }, choice: "any", grammar: true },
  { name: "forced tool (named)", surfaces: ALL, prompt: PROMPT.tools, tools: { strict: false }, choice: { name: "read_file" }, grammar: true },
  { name: "strict tools", surfaces: ["chat", "responses"], prompt: PROMPT.tools, tools: { strict: true }, choice: "auto", grammar: true },
  { name: "auto tools with a JSON format", surfaces: ALL, prompt: PROMPT.tools, format: "json_schema", tools: { strict: false }, choice: "auto", grammar: true },
  { name: "auto tools", surfaces: ALL, prompt: PROMPT.tools, tools: { strict: false }, choice: "auto", grammar: false },
];

// An answer on any surface: its text, its calls, and why it ended.
type Turn = { text: string; calls: { name: string; args: unknown }[]; finish: "stop" | "tool_calls" | "length" | string };
type Case = { mode: Mode; surface: Surface; stream: boolean; greedy: boolean; seed: number };

const parseArgs = (json: string): unknown => {
  try {
    return JSON.parse(json);
  } catch {
    return json; // not an object: the check below reports it
  }
};

class Client {
  private readonly openai: OpenAI;
  private readonly anthropic: Anthropic;

  constructor(
    url: string,
    private readonly model: string,
  ) {
    this.openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    this.anthropic = new Anthropic({ baseURL: url, apiKey: "unused", maxRetries: 0 });
  }

  ask(c: Case): Promise<Turn> {
    return { chat: () => this.chat(c), responses: () => this.responses(c), messages: () => this.messages(c) }[c.surface]();
  }

  // `seed` is Splash's on every surface (the SDKs send what they are given).
  private sampling(c: Case) {
    return { seed: c.seed, ...(c.greedy ? { temperature: 0 } : {}) };
  }

  private async chat(c: Case): Promise<Turn> {
    const { mode } = c;
    const body = {
      model: this.model,
      messages: [{ role: "user" as const, content: mode.prompt }],
      max_tokens: MAX_TOKENS,
      ...this.sampling(c),
      ...(mode.format === "json_schema" ? { response_format: { type: "json_schema" as const, json_schema: { name: "answer", schema: ANSWER, strict: true } } } : {}),
      ...(mode.format === "json_object" ? { response_format: { type: "json_object" as const } } : {}),
      ...(mode.tools ? { tools: TOOLS.map((t) => ({ type: "function" as const, function: { ...t, strict: mode.tools!.strict } })) } : {}),
      ...(mode.choice ? { tool_choice: mode.choice === "any" ? ("required" as const) : mode.choice === "auto" ? ("auto" as const) : { type: "function" as const, function: { name: mode.choice.name } } } : {}),
    };
    const completion = c.stream ? await this.openai.chat.completions.stream(body).finalChatCompletion() : await this.openai.chat.completions.create(body);
    const choice = completion.choices[0]!;
    const calls = (choice.message.tool_calls ?? []).map((t) => (t as { function: { name: string; arguments: string } }).function);
    return { text: choice.message.content ?? "", calls: calls.map((f) => ({ name: f.name, args: parseArgs(f.arguments) })), finish: choice.finish_reason };
  }

  private async responses(c: Case): Promise<Turn> {
    const { mode } = c;
    const body = {
      model: this.model,
      input: mode.prompt,
      max_output_tokens: MAX_TOKENS,
      ...this.sampling(c),
      ...(mode.format === "json_schema" ? { text: { format: { type: "json_schema" as const, name: "answer", schema: ANSWER, strict: true } } } : {}),
      ...(mode.format === "json_object" ? { text: { format: { type: "json_object" as const } } } : {}),
      ...(mode.tools ? { tools: TOOLS.map((t) => ({ type: "function" as const, ...t, strict: mode.tools!.strict })) } : {}),
      ...(mode.choice ? { tool_choice: mode.choice === "any" ? ("required" as const) : mode.choice === "auto" ? ("auto" as const) : { type: "function" as const, name: mode.choice.name } } : {}),
    };
    const response = c.stream ? await this.openai.responses.stream(body).finalResponse() : await this.openai.responses.create(body);
    const calls = response.output.flatMap((o) => (o.type === "function_call" ? [{ name: o.name, args: parseArgs(o.arguments) }] : []));
    const finish = response.status === "completed" ? (calls.length ? "tool_calls" : "stop") : response.status === "incomplete" ? "length" : String(response.status);
    return { text: response.output_text, calls, finish };
  }

  private async messages(c: Case): Promise<Turn> {
    const { mode } = c;
    const body = {
      model: this.model,
      max_tokens: MAX_TOKENS,
      messages: [{ role: "user" as const, content: mode.prompt }],
      ...this.sampling(c),
      ...(mode.format === "json_schema" ? { output_config: { format: { type: "json_schema" as const, schema: ANSWER } } } : {}),
      ...(mode.tools ? { tools: TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters as Anthropic.Tool.InputSchema })) } : {}),
      ...(mode.choice ? { tool_choice: mode.choice === "any" ? { type: "any" as const } : mode.choice === "auto" ? { type: "auto" as const } : { type: "tool" as const, name: mode.choice.name } } : {}),
    };
    const message = c.stream ? await this.anthropic.messages.stream(body).finalMessage() : await this.anthropic.messages.create(body);
    const text = message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
    const calls = message.content.flatMap((b) => (b.type === "tool_use" ? [{ name: b.name, args: b.input }] : []));
    const finish = { end_turn: "stop", tool_use: "tool_calls", max_tokens: "length" }[message.stop_reason as string] ?? String(message.stop_reason);
    return { text, calls, finish };
  }
}

// Why a turn is not a valid answer in its mode, or null.
function problem(mode: Mode, turn: Turn): string | null {
  const json = (): string | null => {
    let value: unknown;
    try {
      value = JSON.parse(turn.text);
    } catch {
      return `text is not JSON: ${JSON.stringify(turn.text.slice(0, 200))}`;
    }
    const schema = mode.format === "json_object" ? { type: "object" } : ANSWER;
    return ajv.validate(schema, value) ? null : `${ajv.errorsText()}: ${JSON.stringify(value).slice(0, 200)}`;
  };
  const calls = (): string | null => {
    if (turn.calls.length === 0) return "no tool calls";
    for (const call of turn.calls) {
      const tool = TOOLS.find((t) => t.name === call.name);
      if (!tool) return `a call to ${call.name}, which was not offered`;
      if (typeof mode.choice === "object" && call.name !== mode.choice.name) return `a call to ${call.name}, not the named ${mode.choice.name}`;
      if (typeof call.args !== "object" || call.args === null || Array.isArray(call.args)) return `${call.name} arguments are not an object: ${JSON.stringify(call.args)}`;
      if (mode.grammar && !ajv.validate(tool.parameters, call.args)) return `${call.name} arguments ${JSON.stringify(call.args)}: ${ajv.errorsText()}`;
    }
    return null;
  };
  const forced = mode.choice === "any" || typeof mode.choice === "object";
  if (turn.finish !== (turn.calls.length ? "tool_calls" : "stop")) return `finished with ${turn.finish} after ${turn.calls.length} calls and ${JSON.stringify(turn.text.slice(0, 100))}`;
  if (forced || (turn.calls.length && mode.format)) {
    if (turn.text.trim()) return `text beside the calls: ${JSON.stringify(turn.text.slice(0, 100))}`;
    return calls();
  }
  if (turn.calls.length) return calls();
  return mode.format ? json() : null;
}

const cases = (mode: Mode): Case[] => mode.surfaces.flatMap((surface, i) => [false, true].map((stream) => ({ mode, surface, stream, greedy: stream || mode.greedy === true, seed: 100 * i + (stream ? 1 : 0) })));
const label = (c: Case) => `${c.surface} ${c.stream ? "streaming" : "not streaming"} (${c.greedy ? "greedy" : "sampled"})`;

// The greedy answers of the server without a drafter, which the drafting servers must reproduce.
const greedy = new Map<string, Turn>();

for (const draft of ["none", "mtp", "dflash", "dflash2"] as const) {
  describe(`splash serve --draft ${draft}`, () => {
    let server: ServeProcess;
    let client: Client;
    beforeAll(async () => {
      server = await splashServe(["--draft", draft]);
      client = new Client(server.url, server.model);
    }, 60_000);
    afterAll(async () => {
      await server?.stop();
    });

    for (const mode of MODES) {
      test(`${mode.name}: ${mode.surfaces.join(", ")}, streaming and not, at once`, async () => {
        const results = await Promise.all(cases(mode).map(async (c) => ({ c, turn: await client.ask(c) })));
        const problems: string[] = [];
        for (const { c, turn } of results) {
          const p = problem(mode, turn);
          if (p) problems.push(`${label(c)}: ${p}`);
          if (!c.greedy) continue;
          const key = `${mode.name}: ${label(c)}`;
          if (draft === "none") greedy.set(key, turn);
          else if (greedy.has(key)) expect({ key, turn }).toEqual({ key, turn: greedy.get(key)! });
        }
        expect(problems).toEqual([]);
      }, 30_000);
    }

    test("the drafter ran (or none did), and the server logged no error", async () => {
      const metrics = await scrapeMetrics(server.url);
      const cycles = metrics.get(`splash_spec_cycles_total{model="${server.model}",drafter="${draft}"}`);
      if (draft === "none") expect(cycles).toBeUndefined();
      else expect(cycles).toBeGreaterThan(0);
      expect(server.log().split("\n").filter((line) => /error|fatal/i.test(line))).toEqual([]);
    });
  });
}
