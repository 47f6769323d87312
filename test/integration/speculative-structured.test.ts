// Structured output with speculative decoding: the fixture model (test/helpers/fixture-model.ts) with a DFlash drafter
// (qwen35-dense-tiny-dflash), a DFlash2 one (qwen35-dense-tiny-dflash2: drafts from its selector's candidates) and its
// MTP layer, sampling at temperature 1. Drafted tokens are checked against
// the grammar before verification, the target rejection-samples under the grammar's masks, and the constraint rolls
// back what was rejected: every output must still parse and validate (ajv), alone and batched.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { LoadedModel } from "../../src/models/load.ts";
import { Metrics } from "../../src/server/metrics.ts";
import { loadFixtureModel } from "../helpers/fixture-model.ts";
import { callsProblem, conversation, run, SCHEMAS, schemaProblem, TOOLS } from "../helpers/structured-suite.ts";

const FIXTURES = join(import.meta.dir, "../fixtures/models");
const DRAFTERS = { dflash: join(FIXTURES, "qwen35-dense-tiny-dflash"), dflash2: join(FIXTURES, "qwen35-dense-tiny-dflash2"), mtp: undefined };
const jsonSchema = (schema: Record<string, unknown>) => conversation({ responseFormat: { type: "json_schema", schema } });

for (const draft of ["dflash", "dflash2", "mtp"] as const) {
  describe(`structured output with the ${draft} drafter`, () => {
    let loaded: LoadedModel;
    beforeAll(async () => {
      loaded = await loadFixtureModel({ draft, drafterDir: DRAFTERS[draft] });
    });
    afterAll(() => loaded.close());

    test(`${SCHEMAS.length} schemas, alone and then all at once: every output validates, drafts were verified`, async () => {
      expect(loaded.draft).toBe(draft);
      const problems: string[] = [];
      for (const [i, { name, schema }] of SCHEMAS.entries()) {
        const problem = schemaProblem(schema, await run(loaded.chat, jsonSchema(schema), { seed: i, draft }));
        if (problem) problems.push(`alone ${name}: ${problem}`);
      }
      const batched = await Promise.all(SCHEMAS.map(({ name, schema }, i) => run(loaded.chat, jsonSchema(schema), { seed: 500 + i, draft }).then((o) => ({ name, problem: schemaProblem(schema, o) }))));
      problems.push(...batched.filter((r) => r.problem).map((r) => `batched ${r.name}: ${r.problem}`));
      expect(problems).toEqual([]);
      const spec = loaded.engine.stats().speculation!;
      expect(spec.drafter).toBe(draft);
      expect(spec.cycles).toBeGreaterThan(100);
      expect(spec.accepted).toBeGreaterThan(0); // forced tokens (quotes, braces) are drafted and kept
      // /metrics: cumulative counts and the per-request acceptance-length histogram (every request above speculated)
      const labels = `{model="${loaded.chat.id}",drafter="${draft}"}`;
      const text = new Metrics().render([loaded.chat]);
      expect(text).toContain(`splash_spec_cycles_total${labels} ${spec.cycles}`);
      expect(text).toContain(`splash_spec_accepted_tokens_total${labels} ${spec.accepted}`);
      expect(text).toContain(`splash_spec_acceptance_length${labels} ${(spec.accepted + spec.cycles) / spec.cycles}`);
      // requests that ended before a first cycle (a value complete within a token or two) are not in the histogram
      const requests = Number(text.match(new RegExp(`splash_spec_request_acceptance_length_count\\{[^}]*drafter="${draft}"\\} (\\d+)`))?.[1]);
      expect(requests).toBeGreaterThan(SCHEMAS.length);
      expect(requests).toBeLessThanOrEqual(2 * SCHEMAS.length);
    }, 90_000);

    test("forced tool calls: arguments validate", async () => {
      const outs = await Promise.all(Array.from({ length: 4 }, (_, seed) => run(loaded.chat, conversation({ tools: TOOLS, toolChoice: { name: "create_event" }, parallelToolCalls: false }), { seed, draft })));
      for (const out of outs) expect(callsProblem(TOOLS, out, 1, "create_event")).toBeNull();
    }, 30_000);
  });
}
