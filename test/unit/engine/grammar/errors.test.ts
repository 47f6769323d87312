// Schemas and tool choices the grammar cannot enforce are refused with the keyword and its JSON-pointer path (the
// API answers 400); annotations are accepted. planGrammar is pure: no WebAssembly involved.
import { describe, expect, test } from "bun:test";
import type { ToolDef } from "../../../../src/chat/ir.ts";
import { ConstraintError, planGrammar, type ConstraintRequest } from "../../../../src/engine/grammar/index.ts";

const json = (schema: unknown): ConstraintRequest => ({ responseFormat: { type: "json_schema", schema: schema as Record<string, unknown> }, tools: [], toolChoice: "auto", parallelToolCalls: false });

function refusal(req: ConstraintRequest): ConstraintError {
  try {
    planGrammar(req);
  } catch (e) {
    if (e instanceof ConstraintError) return e;
    throw e;
  }
  throw new Error("expected a ConstraintError");
}

describe("unsupported keywords name the keyword and path", () => {
  const cases: [string, unknown, string, string][] = [
    ["not", { type: "object", properties: { a: { not: { type: "string" } } } }, "not", "/properties/a/not"],
    ["if/then", { if: { type: "string" }, then: { minLength: 1 } }, "if", "/if"],
    ["multipleOf", { type: "array", items: { type: "integer", multipleOf: 3 } }, "multipleOf", "/items/multipleOf"],
    ["uniqueItems", { type: "array", uniqueItems: true }, "uniqueItems", "/uniqueItems"],
    ["patternProperties", { type: "object", patternProperties: { "^x": {} } }, "patternProperties", "/patternProperties"],
    ["minProperties", { type: "object", minProperties: 1 }, "minProperties", "/minProperties"],
    ["contains", { type: "array", contains: { type: "integer" } }, "contains", "/contains"],
    ["nullable (OpenAPI)", { type: "string", nullable: true }, "nullable", "/nullable"],
    ["unknown keyword", { type: "string", maxLenght: 3 }, "maxLenght", "/maxLenght"],
    ["in $defs reached by $ref", { $defs: { a: { type: "string", dependentRequired: {} } }, $ref: "#/$defs/a" }, "dependentRequired", "/$defs/a/dependentRequired"],
    ["unsupported format", { type: "string", format: "idn-hostname" }, "format", "/format"],
    ["format on a number", { type: "integer", format: "percent" }, "format", "/format"],
    ["lookahead in a pattern", { type: "string", pattern: "^(?=a)\\w+$" }, "pattern", "/pattern"],
    ["backreference", { type: "string", pattern: "(a)\\1" }, "pattern", "/pattern"],
    ["invalid regex", { type: "string", pattern: "[a-" }, "pattern", "/pattern"],
    ["anchor in the middle", { type: "string", pattern: "a^b" }, "pattern", "/pattern"],
    ["a large repetition of a group", { type: "string", pattern: "^(ab){0,500}$" }, "pattern", "/pattern"],
    ["a large repetition before the end", { type: "string", pattern: "^[a-z]{1,100}\\.txt$" }, "pattern", "/pattern"],
    ["a large fixed repetition before a counted one", { type: "string", pattern: "^[A-Z]{40}[a-z]*$" }, "pattern", "/pattern"],
    ["a large repetition of a group, inside items", { type: "array", items: { type: "string", pattern: "^x(y|z){33}$" } }, "pattern", "/items/pattern"],
    ["counts in a union the output cannot be followed through", { type: "object", properties: { a: { anyOf: [{ type: "string", maxLength: 3 }, { type: "string", pattern: "^a+$" }] } } }, "anyOf", "/properties/a/anyOf"],
    ["counts in a union with an enum that starts alike", { oneOf: [{ type: "array", maxItems: 2 }, { const: [1, 2, 3] }] }, "oneOf", "/oneOf"],
    // Its DFA must remember the last 21 characters: 2^21 states.
    ["maxLength with a pattern whose automaton is too large", { type: "string", pattern: "^[ab]*a[ab]{20}$", maxLength: 64 }, "maxLength", ""],
    ["remote $ref", { $ref: "https://example.com/schema.json" }, "$ref", "/$ref"],
    ["dangling $ref", { $ref: "#/$defs/missing" }, "$ref", "/$ref"],
    ["draft 7 tuple items", { type: "array", items: [{ type: "string" }] }, "items", "/items"],
    ["oneOf that may overlap", { oneOf: [{ type: "integer" }, { type: "number" }] }, "oneOf", "/oneOf"],
    ["allOf with conflicting patterns", { allOf: [{ type: "string", pattern: "a" }, { pattern: "b" }] }, "allOf", ""],
  ];
  for (const [name, schema, keyword, path] of cases) {
    test(name, () => {
      const e = refusal(json(schema));
      expect(e.keyword).toBe(keyword);
      expect(e.schemaPath).toBe(path);
      expect(e.param).toBe("responseFormat.schema");
      expect(e.message).toContain("response format schema");
    });
  }
});

describe("invalid and unsatisfiable schemas", () => {
  const cases: [string, unknown, RegExp][] = [
    ["false schema", false, /accepts no value/],
    ["not an object", 42, /must be an object or a boolean/],
    ["unknown type", { type: "str" }, /unknown type "str"/],
    ["minimum above maximum", { type: "integer", minimum: 5, maximum: 4 }, /no integer lies between/],
    ["empty number range", { type: "number", exclusiveMinimum: 1, exclusiveMaximum: 1 }, /no number lies between/],
    ["minLength above maxLength", { type: "string", minLength: 5, maxLength: 2 }, /minLength is greater than maxLength/],
    ["minItems above maxItems", { type: "array", minItems: 3, maxItems: 1 }, /minItems is greater than maxItems/],
    ["enum with no valid value", { type: "string", enum: [1, 2] }, /no value of "enum"/],
    ["required but forbidden", { type: "object", properties: {}, required: ["x"], additionalProperties: false }, /required property "x"/],
    ["allOf of different types", { allOf: [{ type: "string" }, { type: "integer" }] }, /no type in common/],
    ["negative minLength", { type: "string", minLength: -1 }, /non-negative integer/],
    ["non-ASCII-only pattern range", { type: "string", pattern: "^[\\u4e00-\\u9fff]+$" }, /cannot write/],
    ["a pattern no string of the lengths matches", { type: "string", pattern: "^[A-Z]{2}[0-9]{0,3}$", minLength: 6 }, /no string matching "pattern" has a length within/],
    ["a large repetition whose bounds miss the lengths", { type: "string", pattern: "^[a-z]{100,10000}$", maxLength: 50 }, /no string matching "pattern" has a length within/],
    ["a pattern with lengths no match has", { type: "string", pattern: "^(ab)+$", minLength: 5, maxLength: 5 }, /no string matching "pattern" has a length within/],
    ["a format with lengths no match has", { type: "string", format: "email", maxLength: 4 }, /no string matching "format" has a length within/],
    ["a format no length allows", { type: "string", format: "uuid", maxLength: 30 }, /no string matching "format" has a length within/],
  ];
  for (const [name, schema, message] of cases) {
    test(name, () => expect(refusal(json(schema)).message).toMatch(message));
  }
});

describe("accepted", () => {
  test("annotations and vocabulary keywords", () => {
    const plan = planGrammar(json({ $schema: "https://json-schema.org/draft/2020-12/schema", $id: "urn:x", $comment: "c", title: "t", description: "d", default: {}, examples: [{}], type: "object", properties: { a: { type: "string", deprecated: true, readOnly: true, writeOnly: false } } }));
    expect(plan?.kind).toBe("json");
  });
  test("text response without tools needs no grammar", () => {
    expect(planGrammar({ responseFormat: { type: "text" }, tools: [], toolChoice: "auto", parallelToolCalls: true })).toBeNull();
  });
  test("the grammar text is the cache key: equal schemas give equal text", () => {
    const a = planGrammar(json({ type: "object", properties: { a: { type: "integer" } }, title: "one" }))!;
    const b = planGrammar(json({ title: "two", type: "object", properties: { a: { type: "integer" } } }))!;
    expect(a.ebnf).toBe(b.ebnf);
  });
});

describe("tool choice", () => {
  const tool = (name: string, parameters: Record<string, unknown> = { type: "object", properties: {} }): ToolDef => ({ name, parameters });
  const req = (tools: ToolDef[], toolChoice: ConstraintRequest["toolChoice"]): ConstraintRequest => ({ responseFormat: { type: "text" }, tools, toolChoice, parallelToolCalls: false });
  test("a forced call without tools", () => expect(refusal(req([], "required")).param).toBe("toolChoice"));
  test("naming an unknown tool", () => expect(refusal(req([tool("a")], { name: "b" })).message).toContain('"b"'));
  test("a tool name that cannot be written", () => expect(refusal(req([tool("bad name")], "required")).param).toBe("tools[0].name"));
  test("duplicate tool names", () => expect(refusal(req([tool("a"), tool("a")], "required")).message).toContain("two tools"));
  test("parameters that are not an object", () => expect(refusal(req([tool("a", { type: "string" })], "required")).param).toBe("tools[0].parameters"));
  test("an unsupported keyword in a tool's parameters", () => {
    const e = refusal(req([tool("ok"), tool("b", { type: "object", properties: { x: { type: "string", format: "idn-hostname" } } })], "required"));
    expect([e.param, e.keyword, e.schemaPath]).toEqual(["tools[1].parameters", "format", "/properties/x/format"]);
  });
  test("counts in a raw parameter with several string options", () => {
    const e = refusal(req([tool("a", { type: "object", properties: { q: { anyOf: [{ type: "string", maxLength: 3 }, { enum: ["long value"] }] } } })], "required"));
    expect([e.param, e.keyword, e.schemaPath]).toEqual(["tools[0].parameters", "anyOf", "/properties/q/anyOf"]);
  });
});
