// Schemas clients really send: the tool definitions Claude Code, OpenCode and Codex send (captured from their
// requests, test/fixtures/grammar/agent-tools.json), the examples of OpenAI's structured-outputs guide, and the JSON
// Schema Test Suite's draft 2020-12 cases for the supported keywords and formats. Each is either enforced (random
// outputs over the small fixture vocabulary validate with ajv, formats in full mode) or refused with a
// ConstraintError naming a keyword this project documents as unsupported; nothing else is acceptable.
import { beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ToolDef } from "../../../../src/chat/ir.ts";
import { ConstraintError, planGrammar, StructuredOutput, type ConstraintRequest } from "../../../../src/engine/grammar/index.ts";
import { model, outputs, parseCalls, smallVocabulary, validator, type Model } from "../../../fixtures/grammar/harness.ts";

const FIXTURES = join(import.meta.dir, "../../../fixtures/grammar");
const TIMEOUT = 120_000;
const ajv = validator();
let so: StructuredOutput;
let models: Model[];
beforeAll(async () => {
  const vocab = await smallVocabulary();
  so = await StructuredOutput.create(vocab);
  models = [model(vocab, "uniform", 31), model(vocab, "skewed", 32)];
}, TIMEOUT);

const json = (schema: unknown): ConstraintRequest => ({ responseFormat: { type: "json_schema", schema: schema as Record<string, unknown> }, tools: [], toolChoice: "auto", parallelToolCalls: false });

async function enforces(schema: unknown, perModel: number, seed: number): Promise<void> {
  const grammar = (await so.prepare(json(schema)))!;
  const validate = ajv.compile(schema as Record<string, unknown>);
  for (const out of await outputs(grammar, models, perModel, seed)) {
    if (!validate(JSON.parse(out.text))) throw new Error(`output ${JSON.stringify(out.text)} fails: ${JSON.stringify(validate.errors)}`);
  }
}

describe("the tools coding agents send", () => {
  const clients = JSON.parse(readFileSync(join(FIXTURES, "agent-tools.json"), "utf8")) as Record<string, ToolDef[]>;
  for (const [client, tools] of Object.entries(clients)) {
    test(`${client}: ${tools.length} tools, every call forced: arguments validate`, async () => {
      const grammar = (await so.prepare({ responseFormat: { type: "text" }, tools, toolChoice: "required", parallelToolCalls: true }))!;
      const validators = new Map(tools.map((t) => [t.name, ajv.compile(t.parameters)]));
      const called = new Set<string>();
      for (const out of await outputs(grammar, models, 12, 7)) {
        for (const call of parseCalls(out.text, tools)) {
          const validate = validators.get(call.name)!;
          if (!validate(call.arguments)) throw new Error(`${call.name} ${JSON.stringify(call.arguments)}: ${JSON.stringify(validate.errors)}`);
          called.add(call.name);
        }
      }
      expect(called.size).toBeGreaterThan(1);
    }, TIMEOUT);

    test(`${client}: each tool alone, named by tool_choice`, async () => {
      for (const tool of tools) {
        const grammar = (await so.prepare({ responseFormat: { type: "text" }, tools, toolChoice: { name: tool.name }, parallelToolCalls: false }))!;
        const validate = ajv.compile(tool.parameters);
        for (const out of await outputs(grammar, models, 2, 8)) {
          const [call] = parseCalls(out.text, tools);
          expect(call!.name).toBe(tool.name);
          if (!validate(call!.arguments)) throw new Error(`${tool.name} ${JSON.stringify(call!.arguments)}: ${JSON.stringify(validate.errors)}`);
        }
      }
    }, TIMEOUT);
  }
});

// platform.openai.com/docs/guides/structured-outputs: the guide's examples, as written there.
const OPENAI_EXAMPLES: Record<string, unknown> = {
  "chain of thought": {
    type: "object",
    properties: {
      steps: { type: "array", items: { type: "object", properties: { explanation: { type: "string" }, output: { type: "string" } }, required: ["explanation", "output"], additionalProperties: false } },
      final_answer: { type: "string" },
    },
    required: ["steps", "final_answer"],
    additionalProperties: false,
  },
  "structured data extraction": {
    type: "object",
    properties: { title: { type: "string" }, authors: { type: "array", items: { type: "string" } }, abstract: { type: "string" }, keywords: { type: "array", items: { type: "string" } } },
    required: ["title", "authors", "abstract", "keywords"],
    additionalProperties: false,
  },
  "UI generation (recursive)": {
    type: "object",
    properties: {
      type: { type: "string", description: "The type of the UI component", enum: ["div", "button", "header", "section", "field", "form"] },
      label: { type: "string", description: "The label of the UI component, used for buttons or form fields" },
      children: { type: "array", description: "Nested UI components", items: { $ref: "#" } },
      attributes: {
        type: "array",
        description: "Arbitrary attributes for the UI component, suitable for any element",
        items: { type: "object", properties: { name: { type: "string" }, value: { type: "string" } }, required: ["name", "value"], additionalProperties: false },
      },
    },
    required: ["type", "label", "children", "attributes"],
    additionalProperties: false,
  },
  moderation: {
    type: "object",
    properties: {
      is_violating: { type: "boolean" },
      category: { type: ["string", "null"], enum: ["violence", "sexual", "self_harm", null] },
      explanation_if_violating: { type: ["string", "null"] },
    },
    required: ["is_violating", "category", "explanation_if_violating"],
    additionalProperties: false,
  },
  "supported properties: string pattern and format, number range, array size": {
    type: "object",
    properties: {
      name: { type: "string", description: "The name of the user" },
      username: { type: "string", description: "The username of the user. Must start with @", pattern: "^@[a-zA-Z0-9_]+$" },
      email: { type: "string", description: "The email of the user", format: "email" },
      temperature: { type: "number", minimum: -130, maximum: 130 },
      readings: { type: "array", items: { type: "number" }, minItems: 1, maxItems: 5 },
    },
    additionalProperties: false,
    required: ["name", "username", "email", "temperature", "readings"],
  },
  "anyOf of objects": {
    type: "object",
    properties: {
      item: {
        anyOf: [
          { type: "object", description: "The user object to insert into the database", properties: { name: { type: "string" }, age: { type: "number" } }, additionalProperties: false, required: ["name", "age"] },
          { type: "object", description: "The address object to insert into the database", properties: { number: { type: "string" }, street: { type: "string" }, city: { type: "string" } }, additionalProperties: false, required: ["number", "street", "city"] },
        ],
      },
    },
    additionalProperties: false,
    required: ["item"],
  },
  "definitions and a linked list": {
    type: "object",
    properties: { linked_list: { $ref: "#/$defs/linked_list_node" } },
    $defs: {
      linked_list_node: { type: "object", properties: { value: { type: "number" }, next: { anyOf: [{ $ref: "#/$defs/linked_list_node" }, { type: "null" }] } }, additionalProperties: false, required: ["next", "value"] },
    },
    additionalProperties: false,
    required: ["linked_list"],
  },
};

describe("OpenAI structured-outputs examples", () => {
  for (const [i, [name, schema]] of Object.entries(OPENAI_EXAMPLES).entries()) test(name, () => enforces(schema, 4, 100 + i), TIMEOUT);
});

// What a schema of the suite may be refused for: the keywords the grammar documents as unsupported (schema.ts), and
// references it cannot follow.
const REFUSABLE = new Set(["not", "if", "then", "else", "$id", "uniqueItems", "multipleOf", "contains", "minProperties", "maxProperties", "patternProperties", "dependentRequired", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties", "$dynamicRef", "$anchor", "$ref", "items", "propertyNames", "allOf", "oneOf", "pattern", "format"]);

describe("JSON Schema Test Suite (draft 2020-12), supported keywords and formats", () => {
  const dir = join(FIXTURES, "json-schema-test-suite");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".json"))) {
    test(file, async () => {
      const groups = JSON.parse(readFileSync(join(dir, file), "utf8")) as { description: string; schema: unknown }[];
      let enforced = 0;
      for (const [i, { description, schema }] of groups.entries()) {
        try {
          planGrammar(json(schema));
        } catch (e) {
          if (!(e instanceof ConstraintError)) throw e;
          const documented = /accepts no value|no value of|no integer|no number|must not be empty|minItems is more|greater than|cannot be followed through such a union/;
          if (!REFUSABLE.has(e.keyword ?? "") && !documented.test(e.message)) {
            throw new Error(`${description}: refused for ${e.keyword}: ${e.message}`);
          }
          continue;
        }
        await enforces(schema, 2, 200 + i);
        enforced++;
      }
      expect(enforced).toBeGreaterThan(0);
    }, TIMEOUT);
  }
});
