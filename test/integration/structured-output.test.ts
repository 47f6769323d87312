// Structured output end to end on the native engine: the fixture model (random weights, test/helpers/fixture-model.ts)
// samples at temperature 1 under the grammar's allowed-token bitmask, and every output must parse and validate (ajv)
// — the whole schema suite alone and batched (all requests at once in one engine, a mask per sequence), tool calls
// forced by tool_choice, JSON-or-calls, and the answer after free reasoning. A random model writes noise, so each
// valid output is the grammar's doing.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ConstraintError } from "../../src/engine/grammar/index.ts";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadFixtureModel } from "../helpers/fixture-model.ts";
import { callsProblem, conversation, run, SCHEMAS, schemaProblem, TOOLS } from "../helpers/structured-suite.ts";

let loaded: LoadedModel;
beforeAll(async () => {
  loaded = await loadFixtureModel();
});
afterAll(() => loaded.close());

const jsonSchema = (schema: Record<string, unknown>) => conversation({ responseFormat: { type: "json_schema", schema } });

describe("structured output on the fixture model", () => {
  test(`${SCHEMAS.length} schemas, one request at a time: every output validates`, async () => {
    const problems: string[] = [];
    for (const [i, { name, schema }] of SCHEMAS.entries()) {
      const problem = schemaProblem(schema, await run(loaded.chat, jsonSchema(schema), { seed: i }));
      if (problem) problems.push(`${name}: ${problem}`);
    }
    expect(problems).toEqual([]);
  }, 60_000);

  test(`${SCHEMAS.length} schemas × 2, all at once in one engine: every output validates`, async () => {
    const peak = { running: 0 };
    const watch = setInterval(() => (peak.running = Math.max(peak.running, loaded.engine.stats().running)), 1);
    const requests = [...SCHEMAS, ...SCHEMAS].map(({ name, schema }, i) => run(loaded.chat, jsonSchema(schema), { seed: 1000 + i }).then((o) => ({ name, problem: schemaProblem(schema, o) })));
    const results = await Promise.all(requests);
    clearInterval(watch);
    expect(results.filter((r) => r.problem).map((r) => `${r.name}: ${r.problem}`)).toEqual([]);
    expect(peak.running).toBeGreaterThan(4); // they really ran side by side
  }, 60_000);

  test("json_object: any JSON object", async () => {
    for (let seed = 0; seed < 5; seed++) {
      const out = await run(loaded.chat, conversation({ responseFormat: { type: "json_object" } }), { seed });
      expect(schemaProblem({ type: "object" }, out)).toBeNull();
    }
  }, 30_000);

  test("tool_choice required: one call per answer without parallel calls, several with; arguments validate", async () => {
    const outs = await Promise.all(
      [false, true].flatMap((parallel) => Array.from({ length: 4 }, (_, seed) => run(loaded.chat, conversation({ tools: TOOLS, toolChoice: "required", parallelToolCalls: parallel }), { seed }).then((o) => ({ parallel, o })))),
    );
    for (const { parallel, o } of outs) expect(callsProblem(TOOLS, o, parallel ? "some" : 1)).toBeNull();
    expect(outs.some(({ parallel, o }) => parallel && o.calls.length > 1)).toBe(true);
  }, 30_000);

  test("tool_choice naming a tool: only that tool is called", async () => {
    const outs = await Promise.all(Array.from({ length: 4 }, (_, seed) => run(loaded.chat, conversation({ tools: TOOLS, toolChoice: { name: "create_event" }, parallelToolCalls: false }), { seed })));
    for (const out of outs) expect(callsProblem(TOOLS, out, 1, "create_event")).toBeNull();
  }, 30_000);

  test("a JSON response format with tools: the answer is either valid JSON or valid calls", async () => {
    const schema = SCHEMAS.find((s) => s.name === "oneOf with a discriminator")!.schema;
    const outs = await Promise.all(Array.from({ length: 12 }, (_, seed) => run(loaded.chat, conversation({ tools: TOOLS, responseFormat: { type: "json_schema", schema } }), { seed })));
    for (const o of outs) expect(o.calls.length ? callsProblem(TOOLS, o, "some") : schemaProblem(schema, o)).toBeNull();
  }, 30_000);

  test("thinking: the reasoning is free, the answer after </think> validates", async () => {
    const { schema } = SCHEMAS.find((s) => s.name === "object, required fields")!;
    // The seed fixes where the random model happens to write </think> (any token is allowed while reasoning).
    const out = await run(loaded.chat, conversation({ responseFormat: { type: "json_schema", schema } }, true), { seed: 2 });
    expect(out.reasoning.length).toBeGreaterThan(0);
    expect(schemaProblem(schema, out)).toBeNull();
  }, 30_000);

  test("a schema the grammar cannot enforce is refused before generation, naming the keyword and where", async () => {
    const gen = run(loaded.chat, jsonSchema({ type: "object", properties: { a: { type: "array", uniqueItems: true } } }), { seed: 0 });
    const e = await gen.then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(ConstraintError);
    expect(e).toMatchObject({ param: "responseFormat.schema", keyword: "uniqueItems", schemaPath: "/properties/a/uniqueItems" });
    expect(loaded.engine.stats().running).toBe(0);
  });
});
