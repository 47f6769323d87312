// Structured output over real HTTP with the official SDKs, served by the fixture model on the native engine (random
// weights, temperature 1): OpenAI chat `response_format` (json_schema and json_object, streaming and not, the whole
// schema suite at once), Responses `text.format`, Anthropic `output_config.format` and the beta's `output_format`,
// and tool calls forced by tool_choice on all three; the outputs are validated with ajv. Schemas a grammar cannot
// enforce are a 400 in each surface's error shape, naming the field and the keyword.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import type { LoadedModel } from "../../src/models/load.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { validator } from "../fixtures/grammar/harness.ts";
import { FIXTURE_MODEL_ID, loadFixtureModel } from "../helpers/fixture-model.ts";
import { rejection } from "../helpers/server.ts";
import { SCHEMAS, TOOLS } from "../helpers/structured-suite.ts";

let loaded: LoadedModel;
let server: RunningServer;
let openai: OpenAI;
let anthropic: Anthropic;
const model = FIXTURE_MODEL_ID;
const ajv = validator();

beforeAll(async () => {
  loaded = await loadFixtureModel();
  // Temperature 1 over the whole distribution: the model's noise goes through only where the grammar allows it.
  server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat], sampling: { temperature: 1, topP: 1, topK: 0, minP: 0 } });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await server.stop();
  await loaded.close();
});

const messages = [{ role: "user" as const, content: "Answer with JSON." }];

// ajv's verdict on a JSON text: null when it parses and validates.
function problem(schema: Record<string, unknown>, text: string | null | undefined): string | null {
  let value: unknown;
  try {
    value = JSON.parse(text ?? "");
  } catch {
    return `not JSON: ${JSON.stringify(text?.slice(0, 200))}`;
  }
  return ajv.validate(schema, value) ? null : `${ajv.errorsText()}: ${JSON.stringify(value).slice(0, 200)}`;
}

const toolsFor = {
  openai: TOOLS.map((t) => ({ type: "function" as const, function: { name: t.name, parameters: t.parameters } })),
  responses: TOOLS.map((t) => ({ type: "function" as const, name: t.name, parameters: t.parameters, strict: false })),
  anthropic: TOOLS.map((t) => ({ name: t.name, input_schema: t.parameters as Anthropic.Tool.InputSchema })),
};
const toolSchema = (name: string) => TOOLS.find((t) => t.name === name)!.parameters;

describe("OpenAI chat response_format", () => {
  test(`json_schema, ${SCHEMAS.length} schemas streaming and ${SCHEMAS.length} not, all at once: every answer validates`, async () => {
    const one = async (schema: Record<string, unknown>, stream: boolean, seed: number) => {
      const body = { model, messages, seed, reasoning_effort: "none" as const, response_format: { type: "json_schema" as const, json_schema: { name: "answer", schema, strict: true } } };
      const completion = stream ? await openai.chat.completions.stream(body).finalChatCompletion() : await openai.chat.completions.create(body);
      const choice = completion.choices[0]!;
      return choice.finish_reason === "stop" ? problem(schema, choice.message.content) : `finish_reason ${choice.finish_reason}`;
    };
    const results = await Promise.all(SCHEMAS.flatMap(({ name, schema }, i) => [true, false].map(async (stream) => ({ name, stream, problem: await one(schema, stream, i) }))));
    expect(results.filter((r) => r.problem).map((r) => `${r.name} (${r.stream ? "streaming" : "not streaming"}): ${r.problem}`)).toEqual([]);
  }, 60_000);

  test("json_object: an object, streaming and not", async () => {
    for (const stream of [true, false]) {
      const body = { model, messages, seed: 3, reasoning_effort: "none" as const, response_format: { type: "json_object" as const } };
      const completion = stream ? await openai.chat.completions.stream(body).finalChatCompletion() : await openai.chat.completions.create(body);
      expect(problem({ type: "object" }, completion.choices[0]!.message.content)).toBeNull();
    }
  });

  test("tool_choice forcing a function: finish_reason tool_calls, arguments validate", async () => {
    for (const stream of [true, false]) {
      const body = { model, messages, seed: 5, reasoning_effort: "none" as const, tools: toolsFor.openai, tool_choice: { type: "function" as const, function: { name: "get_weather" } }, parallel_tool_calls: false };
      const completion = stream ? await openai.chat.completions.stream(body).finalChatCompletion() : await openai.chat.completions.create(body);
      const choice = completion.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      const calls = choice.message.tool_calls ?? [];
      expect(calls.length).toBe(1);
      const call = calls[0]! as { function: { name: string; arguments: string } };
      expect(call.function.name).toBe("get_weather");
      expect(problem(toolSchema("get_weather"), call.function.arguments)).toBeNull();
    }
  });

  test("an unsupported keyword is a 400 naming the field and the keyword", async () => {
    const e = await rejection(openai.chat.completions.create({ model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } } } } }));
    expect(e).toBeInstanceOf(OpenAI.BadRequestError);
    const err = e as InstanceType<typeof OpenAI.BadRequestError>;
    expect(err.param).toBe("response_format.json_schema.schema");
    expect(err.code).toBe("unsupported_schema");
    expect(err.message).toContain('"multipleOf"');
    expect(err.message).toContain("/properties/n/multipleOf");
  });

  test("a tool schema the grammar cannot enforce, when tool_choice forces a call: 400 naming that tool's parameters", async () => {
    const tools = [...toolsFor.openai, { type: "function" as const, function: { name: "bad", parameters: { type: "object", properties: { x: { not: { type: "null" } } } } } }];
    const e = (await rejection(openai.chat.completions.create({ model, messages, tools, tool_choice: "required" }))) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.param).toBe("tools.3.function.parameters");
    expect(e.message).toContain('"not"');
  });

  test("tool parameters written as text with lengths beside a pattern and a format: arguments validate, streaming and not", async () => {
    const parameters = { type: "object", properties: { slug: { type: "string", pattern: "^[a-z]+(-[a-z]+)*$", maxLength: 6 }, owner: { type: "string", format: "email", maxLength: 10 } }, required: ["slug", "owner"] };
    const tools = [{ type: "function" as const, function: { name: "tag", parameters } }];
    for (const stream of [true, false]) {
      const body = { model, messages, seed: 7, reasoning_effort: "none" as const, tools, tool_choice: { type: "function" as const, function: { name: "tag" } }, parallel_tool_calls: false };
      const completion = stream ? await openai.chat.completions.stream(body).finalChatCompletion() : await openai.chat.completions.create(body);
      const call = completion.choices[0]!.message.tool_calls![0]! as { function: { name: string; arguments: string } };
      expect(problem(parameters, call.function.arguments)).toBeNull();
    }
  });
});

describe("OpenAI Responses text.format", () => {
  const schemas = SCHEMAS.filter((s) => ["nested objects", "oneOf with a discriminator", "format date-time", "recursive $defs"].includes(s.name));

  test("json_schema, streaming and not: output_text validates", async () => {
    const results = await Promise.all(
      schemas.flatMap(({ name, schema }, i) =>
        [true, false].map(async (stream) => {
          // `seed` is Splash's (the SDK's types leave it out; the SDK sends what it is given).
          const body = Object.assign({ model, input: "Answer with JSON.", reasoning: { effort: "none" as const }, text: { format: { type: "json_schema" as const, name: "answer", schema, strict: true } } }, { seed: i });
          const response = stream ? await openai.responses.stream(body).finalResponse() : await openai.responses.create(body);
          return { name, stream, problem: response.status === "completed" ? problem(schema, response.output_text) : `status ${response.status}` };
        }),
      ),
    );
    expect(results.filter((r) => r.problem)).toEqual([]);
  }, 30_000);

  test("tool_choice forcing a function: a function_call item whose arguments validate", async () => {
    const body = { model, input: "Plan it.", reasoning: { effort: "none" as const }, tools: toolsFor.responses, tool_choice: { type: "function" as const, name: "create_event" }, parallel_tool_calls: false };
    const response = await openai.responses.create(Object.assign(body, { seed: 2 }));
    const calls = response.output.filter((o) => o.type === "function_call");
    expect(calls.length).toBe(1);
    expect(calls[0]!.name).toBe("create_event");
    expect(problem(toolSchema("create_event"), calls[0]!.arguments)).toBeNull();
  });

  test("an invalid schema is a 400 naming text.format.schema", async () => {
    const e = (await rejection(openai.responses.create({ model, input: "x", text: { format: { type: "json_schema", name: "x", schema: { type: "object", properties: { a: { $ref: "#/$defs/missing" } } } } } }))) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.param).toBe("text.format.schema");
    expect(e.message).toContain("$ref");
  });
});

describe("Anthropic structured outputs", () => {
  const { schema } = SCHEMAS.find((s) => s.name === "array of objects")!;

  test("output_config.format, streaming and not: the text block validates", async () => {
    for (const stream of [true, false]) {
      const body = { model, max_tokens: 2000, messages, output_config: { format: { type: "json_schema" as const, schema } } };
      const message = stream ? await anthropic.messages.stream(body).finalMessage() : await anthropic.messages.create(body);
      expect(message.stop_reason).toBe("end_turn");
      const text = message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
      expect(problem(schema, text)).toBeNull();
    }
  });

  test("the beta's output_format", async () => {
    const message = await anthropic.beta.messages.create({ model, max_tokens: 2000, messages, output_format: { type: "json_schema", schema }, betas: ["structured-outputs-2025-11-13"] });
    const text = message.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
    expect(problem(schema, text)).toBeNull();
  });

  test("tool_choice any: tool_use blocks whose input validates", async () => {
    const message = await anthropic.messages.stream({ model, max_tokens: 2000, messages, tools: toolsFor.anthropic, tool_choice: { type: "any", disable_parallel_tool_use: true } }).finalMessage();
    expect(message.stop_reason).toBe("tool_use");
    const uses = message.content.filter((b) => b.type === "tool_use");
    expect(uses.length).toBe(1);
    expect(ajv.validate(toolSchema(uses[0]!.name), uses[0]!.input)).toBe(true);
  });

  test("an unsupported keyword is a 400 in Anthropic's error shape naming output_config.format.schema", async () => {
    const e = (await rejection(anthropic.messages.create({ model, max_tokens: 10, messages, output_config: { format: { type: "json_schema", schema: { type: "string", format: "idn-hostname" } } } }))) as InstanceType<typeof Anthropic.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(e.message).toContain("output_config.format.schema");
    expect(e.message).toContain("idn-hostname");
  });
});
