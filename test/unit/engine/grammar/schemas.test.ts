// Every schema of the suite, with random "models" over the real Qwen3 vocabulary (151,936 logits) and over the small
// fixture vocabulary: each output parses and validates (ajv, formats in full mode) and ends because the value is
// complete, or with a stop token the grammar allowed (a number may still grow, so its end is not forced).
import { beforeAll, describe, expect, test } from "bun:test";
import { StructuredOutput } from "../../../../src/engine/grammar/index.ts";
import { model, outputs, qwen3Vocabulary, smallVocabulary, validator, type Model } from "../../../fixtures/grammar/harness.ts";
import { SCHEMAS } from "../../../fixtures/grammar/schemas.ts";

const ajv = validator();
const TIMEOUT = 60_000; // compiles take 0.1–1 s each over the 151K vocabulary on the 2-core machine; more under load
const suites = [
  { name: "Qwen3 vocabulary", vocabulary: qwen3Vocabulary, perModel: 3 },
  { name: "small fixture vocabulary", vocabulary: smallVocabulary, perModel: 10 },
];

for (const suite of suites) {
  describe(`JSON schemas over the ${suite.name}`, () => {
    let so: StructuredOutput;
    let models: Model[];
    beforeAll(async () => {
      const vocab = await suite.vocabulary();
      so = await StructuredOutput.create(vocab);
      models = [model(vocab, "uniform", 11), model(vocab, "skewed", 12)];
    }, TIMEOUT);

    for (const [i, { name, schema }] of SCHEMAS.entries()) {
      test(name, async () => {
        const grammar = await so.prepare({ responseFormat: { type: "json_schema", schema }, tools: [], toolChoice: "auto", parallelToolCalls: false });
        const validate = ajv.compile(schema);
        for (const out of await outputs(grammar!, models, suite.perModel, 1000 + i)) {
          if (!validate(JSON.parse(out.text))) throw new Error(`output ${JSON.stringify(out.text)} fails: ${JSON.stringify(validate.errors)}`);
          expect(["complete", "stop_token"]).toContain(out.stopped);
        }
      }, TIMEOUT);
    }

    test("json_object: any JSON object", async () => {
      const grammar = await so.prepare({ responseFormat: { type: "json_object" }, tools: [], toolChoice: "auto", parallelToolCalls: false });
      for (const out of await outputs(grammar!, models, suite.perModel, 5)) {
        const value = JSON.parse(out.text);
        expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
      }
    }, TIMEOUT);
  });
}
