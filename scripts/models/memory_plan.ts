// Computes the `memory` section of every hub model's spec (models/*/spec.json) from the tensor shapes its expected
// config implies, and writes it into the spec. Nothing in that section is typed by hand.
//   bun scripts/models/memory_plan.ts           rewrite the specs
//   bun scripts/models/memory_plan.ts --check   exit 1 if a committed plan differs from the computation
// What it counts over is libsplash's tensor inventory (src/native/inventory.ts: every tensor and its bytes in each
// weight type, checked against the fixture checkpoints by test/unit/native/inventory.test.ts); which type each takes,
// and the KV and GDN state sizes, are src/models/memory.ts's. A table of the results is printed.
import { readdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { expectedConfig } from "../../src/models/config.ts";
import { computeMemoryPlan } from "../../src/models/memory.ts";
import { isHubSpec, parseSpec } from "../../src/models/spec.ts";
import { formatBytes } from "../../src/format.ts";

const modelsDir = join(import.meta.dir, "..", "..", "models");
const check = process.argv.includes("--check");

// JSON with short arrays and small flat objects on one line, so the specs stay readable after a rewrite.
function isFlat(v: unknown): boolean {
  return v === null || typeof v !== "object" || (Array.isArray(v) && v.every((x) => x === null || typeof x !== "object"));
}

function oneLine(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(oneLine).join(", ")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${oneLine(v)}`);
    return entries.length ? `{ ${entries.join(", ")} }` : "{}";
  }
  return JSON.stringify(value);
}

function formatJson(value: unknown, indent = ""): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  const flat = Array.isArray(value) ? value.every(isFlat) : Object.values(value).every(isFlat);
  const line = oneLine(value);
  if (flat && indent.length + line.length <= 120) return line;
  const inner = indent + "  ";
  if (Array.isArray(value)) return `[\n${value.map((v) => inner + formatJson(v, inner)).join(",\n")}\n${indent}]`;
  return `{\n${Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${formatJson(v, inner)}`).join(",\n")}\n${indent}}`;
}

let stale = 0;
for (const id of readdirSync(modelsDir).sort()) {
  const path = join(modelsDir, id, "spec.json");
  if (!existsSync(path)) continue;
  const raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  const spec = parseSpec({ ...raw, memory: undefined }, path); // the plan is recomputed: a stale or older one must not stop it
  if (!isHubSpec(spec)) continue;
  const plan = computeMemoryPlan(spec, expectedConfig(spec));
  const p = plan.parameters;
  console.log(`${spec.id}: ${(p.text / 1e9).toFixed(2)}B text + ${(p.mtp / 1e9).toFixed(2)}B MTP + ${(p.vision / 1e9).toFixed(2)}B vision parameters${p.dflash ? `, DFlash ${(p.dflash / 1e9).toFixed(2)}B` : ""}${p.dflash2 ? `, DFlash2 ${(p.dflash2 / 1e9).toFixed(2)}B` : ""}`);
  for (const level of ["bf16", "q8", "q4", "mlx-4bit", "mlx-8bit"] as const) {
    const f = plan.fixed[level];
    const cell = (v: number | null) => (v === null ? "-" : formatBytes(v));
    console.log(`  ${level.padEnd(9)} weights ${cell(f.none).padStart(10)}   +MTP ${cell(f.mtp).padStart(10)}   +DFlash ${cell(f.dflash).padStart(10)}   +DFlash2 ${cell(f.dflash2).padStart(10)}`);
  }
  const kv = (["f32", "f16", "int8"] as const).map((t) => `${t} ${formatBytes(plan.kvBytesPerToken[t])} (+${formatBytes(plan.mtpKvBytesPerToken[t])} MTP)`);
  console.log(`  KV per token ${kv.join(", ")}; GDN state ${formatBytes(plan.stateBytesPerSequence)}/sequence`);
  if (JSON.stringify(raw.memory) === JSON.stringify(plan)) continue;
  stale++;
  if (!check) writeFileSync(path, formatJson({ ...raw, memory: plan }) + "\n");
}
if (check && stale > 0) {
  console.error(`${stale} spec(s) have a stale memory plan: run bun scripts/models/memory_plan.ts`);
  process.exit(1);
}
