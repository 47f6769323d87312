// Puts the cooperative-matrix GEMM tiles that vulkan_prefill_lab measured (its --out file, e.g. $OUT/gemm-<model>.json
// from `SPLASH_PREFILL_STAGES="ops gemm" bash scripts/bench/gpu-prefill-h200.sh`) into models/<model>/vulkan.json:
// the file's "gemmCoopmat" entries replace the model's entries of the weight types the file measured (a shape the lab
// measured without an entry keeps the default tile, so an older entry for it goes).
//
//   bun scripts/bench/gemm-tuning.ts FILE MODEL_ID TYPES     (TYPES: the lab's --types, e.g. q4,bf16)
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Tuning } from "../../kernels/generate.ts";

const [file, model, types] = process.argv.slice(2);
if (!file || !model || !types) throw new Error("usage: bun scripts/bench/gemm-tuning.ts FILE MODEL_ID TYPES");
const measured = Tuning.parse(JSON.parse(readFileSync(file, "utf8")));
const path = join(import.meta.dir, "../../models", model, "vulkan.json");
const tuning = Tuning.parse(JSON.parse(readFileSync(path, "utf8")));
const replaced = new Set(types.split(","));
const raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>; // keeps the file's own key order and fields
raw.gemmCoopmat = [...tuning.gemmCoopmat.filter((g) => !replaced.has(g.type)), ...measured.gemmCoopmat];
Tuning.parse(raw);
writeFileSync(path, `${JSON.stringify(raw, null, 2)}\n`);
console.log(`${path}: ${measured.gemmCoopmat.length} measured gemmCoopmat entries (${types}) from ${file}`);
