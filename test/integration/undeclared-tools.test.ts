// Only the tools a request offers become tool calls. The model writes tool-call markup whether or not it was given
// tools (the embedded model calls git_commit, calculate, read_file unprompted); without tools, with `tools: []`,
// with tool_choice "none", or naming a tool that is not among the request's, that markup is answer text on every
// surface, streaming and not: no tool_calls, function_call items or tool_use blocks, and the turn ends as a plain
// answer. The chat layer runs whole (splash-tiny's template and tokenizer, the output parser) over an engine that
// replays a fixed answer. `splash run`, which offers no tools, prints the markup as text.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import OpenAI from "openai";
import { chatModel, endOfTurnTokens } from "../../src/chat/generate.ts";
import { ChatTemplate } from "../../src/chat/template.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { repoRoot, splash } from "../helpers/cli.ts";
import { SCRIPTED_RUNTIME } from "../helpers/scripted-model.ts";
import { ReplayEngine } from "../helpers/replay-engine.ts";

const MODEL_DIR = join(repoRoot, "models/splash-tiny");
const model = "splash-replay";

const call = (name: string, param: string, value: string) => `<tool_call>\n<function=${name}>\n<parameter=${param}>\n${value}\n</parameter>\n</function>\n</tool_call>`;
const GIT_COMMIT = call("git_commit", "message", "fix typo");
const GET_WEATHER = call("get_weather", "city", "Paris");
const WEATHER_SCHEMA = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };

let tok: Tokenizer;
let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;
let answer = ""; // what the model writes after its reasoning, per test

beforeAll(async () => {
  tok = await Tokenizer.load(MODEL_DIR);
  // Reasoning first when the prompt opened it, as the model does.
  const engine = new ReplayEngine(tok, (req) => ({ answer: (tok.decode(req.prompt).endsWith("<think>\n") ? "Let me see.\n</think>\n\n" : "") + answer }));
  const chat = chatModel({ id: model, tokenizer: tok, template: ChatTemplate.load(MODEL_DIR), engine, stopTokens: endOfTurnTokens(tok), contextLength: 4096, maxOutputTokens: 1024, runtime: SCRIPTED_RUNTIME });
  server = createServer({ host: "127.0.0.1", port: 0, models: [chat] });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await server.stop();
  tok.free();
});

// One answer on one surface, as text and calls.
type Turn = { text: string; calls: string[]; finish: string };
type Offer = { tools?: "none" | "empty" | "weather"; toolChoiceNone?: boolean };
const input = "Commit the staged changes.";

async function chat(offer: Offer, stream: boolean): Promise<Turn> {
  const tools = offer.tools === "empty" ? [] : offer.tools === "weather" ? [{ type: "function" as const, function: { name: "get_weather", parameters: WEATHER_SCHEMA } }] : undefined;
  const body = { model, messages: [{ role: "user" as const, content: input }], ...(tools ? { tools } : {}), ...(offer.toolChoiceNone ? { tool_choice: "none" as const } : {}) };
  const c = stream ? await openai.chat.completions.stream(body).finalChatCompletion() : await openai.chat.completions.create(body);
  const choice = c.choices[0]!;
  return { text: choice.message.content ?? "", calls: (choice.message.tool_calls ?? []).map((t) => (t as { function: { name: string } }).function.name), finish: choice.finish_reason };
}

async function responses(offer: Offer, stream: boolean): Promise<Turn> {
  const tools = offer.tools === "empty" ? [] : offer.tools === "weather" ? [{ type: "function" as const, name: "get_weather", parameters: WEATHER_SCHEMA, strict: false }] : undefined;
  const body = { model, input, ...(tools ? { tools } : {}), ...(offer.toolChoiceNone ? { tool_choice: "none" as const } : {}) };
  const r = stream ? await openai.responses.stream(body).finalResponse() : await openai.responses.create(body);
  return { text: r.output_text, calls: r.output.flatMap((o) => (o.type === "function_call" ? [o.name] : [])), finish: r.status ?? "" };
}

async function messages(offer: Offer, stream: boolean): Promise<Turn> {
  const tools = offer.tools === "empty" ? [] : offer.tools === "weather" ? [{ name: "get_weather", input_schema: WEATHER_SCHEMA as Anthropic.Tool.InputSchema }] : undefined;
  const body = { model, max_tokens: 1000, messages: [{ role: "user" as const, content: input }], ...(tools ? { tools } : {}), ...(offer.toolChoiceNone ? { tool_choice: { type: "none" as const } } : {}) };
  const m = stream ? await anthropic.messages.stream(body).finalMessage() : await anthropic.messages.create(body);
  return { text: m.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join(""), calls: m.content.flatMap((b) => (b.type === "tool_use" ? [b.name] : [])), finish: m.stop_reason ?? "" };
}

const SURFACES = { chat, responses, messages };
// How each surface says "a plain answer" and "tool calls".
const PLAIN = { chat: "stop", responses: "completed", messages: "end_turn" };
const CALLED = { chat: "tool_calls", responses: "completed", messages: "tool_use" };

describe("a call to a tool the request did not offer stays text", () => {
  const offers: { name: string; offer: Offer; answer: string }[] = [
    { name: "no tools", offer: {}, answer: GIT_COMMIT },
    { name: "tools: []", offer: { tools: "empty" }, answer: GIT_COMMIT },
    { name: 'tool_choice "none"', offer: { tools: "weather", toolChoiceNone: true }, answer: GET_WEATHER },
  ];
  for (const { name, offer, answer: written } of offers) {
    for (const [surface, ask] of Object.entries(SURFACES) as [keyof typeof SURFACES, typeof chat][]) {
      test(`${name}: ${surface}, streaming and not`, async () => {
        answer = written;
        for (const stream of [false, true]) {
          expect({ stream, turn: await ask(offer, stream) }).toEqual({ stream, turn: { text: written, calls: [], finish: PLAIN[surface] } });
        }
      });
    }
  }

  for (const [surface, ask] of Object.entries(SURFACES) as [keyof typeof SURFACES, typeof chat][]) {
    test(`an undeclared name next to a declared one: only the declared one is a call (${surface}, streaming and not)`, async () => {
      answer = `${GIT_COMMIT}\n${GET_WEATHER}`;
      for (const stream of [false, true]) {
        expect({ stream, turn: await ask({ tools: "weather" }, stream) }).toEqual({ stream, turn: { text: GIT_COMMIT, calls: ["get_weather"], finish: CALLED[surface] } });
      }
    });
  }
});

test("splash run (no tools offered) prints the model's tool-call markup as text", async () => {
  // The embedded model answers this with a call to "calculate", greedily, whatever the drafter.
  const r = await splash(["run", "--temperature", "0", "--max-tokens", "120", "What is 17 times 23? Use the calculator."]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("<tool_call>\n<function=calculate>\n");
  expect(r.stdout).not.toContain("[tool call]");
}, 60_000);
