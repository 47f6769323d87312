// A random-weight checkpoint of the qwen3_5 family in the official layout, for benchmarks that need real shapes
// without real weights (`splash bench decode`, `bench serve random:SIZE`, `bench peers`): config.json as given, and
// model.safetensors in bf16 holding exactly the tensors libsplash's loaders read for that config (native/inventory.ts),
// so the tensor list is written nowhere else. Values are uniform in ranges that keep activations O(1)
// (scripts/fixtures/fixture_lib.py): projections scaled by 1/sqrt(fan_in), zero-centred norms, GDN decays from slow
// to fast. The same config and seed give the same bytes.
import { closeSync, existsSync, mkdirSync, openSync, renameSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { log } from "../log.ts";
import type { JsonObject } from "../models/config.ts";
import { inventory } from "../native/inventory.ts";

// (lo, hi) of the uniform draw for a tensor, by its name.
function range(name: string, shape: readonly number[]): [number, number] {
  const u = (std: number): [number, number] => [-std * Math.sqrt(3), std * Math.sqrt(3)];
  if (name.endsWith("linear_attn.norm.weight")) return [0.6, 1.4];
  if (name.endsWith("A_log")) return [Math.log(0.05), Math.log(5)];
  if (name.endsWith("dt_bias")) return [-2, 0.5];
  if (name.endsWith("conv1d.weight")) return u(0.5);
  if (name.startsWith("model.visual") && /norm\d?\.weight$/.test(name)) return [0.9, 1.1];
  if (/norm\.weight$|layernorm\.weight$/.test(name)) return u(0.2);
  if (name.endsWith(".bias")) return u(0.1);
  if (name.endsWith("embed_tokens.weight") || name.endsWith("pos_embed.weight")) return u(1);
  if (name.endsWith("in_proj_a.weight") || name.endsWith("in_proj_b.weight")) return u(1.5 / Math.sqrt(shape.at(-1)!));
  const fanIn = shape.length === 5 ? shape.slice(1).reduce((a, b) => a * b, 1) : shape.at(-1)!;
  return u(1 / Math.sqrt(fanIn));
}

// Writes config.json and model.safetensors into `dir`, the weights streamed to a temporary file and renamed (a killed
// run leaves no half-written checkpoint); a model.safetensors of the expected size is kept as it is.
export function writeRandomCheckpoint(dir: string, config: JsonObject, options: { seed: number; producer: string }): void {
  const file = join(dir, "model.safetensors");
  const { tensors } = inventory(config);
  const header: Record<string, unknown> = { __metadata__: { format: "pt", producer: options.producer } };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.bytes.bf16;
    header[t.name] = { dtype: "BF16", shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((json.length + 8) % 8)) % 8); // data starts 8-byte aligned
  const total = 8 + json.length + offset;
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 2));
  if (existsSync(file) && statSync(file).size === total) return;
  log.info(`writing a ${(total / 2 ** 30).toFixed(2)} GiB random-weight checkpoint to ${dir} (once)`);
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    const head = new Uint8Array(8 + json.length);
    new DataView(head.buffer).setBigUint64(0, BigInt(json.length), true);
    head.set(new TextEncoder().encode(json), 8);
    writeSync(fd, head);
    const chunk = new Uint16Array(8 << 20);
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    let state = options.seed >>> 0 || 1;
    for (const t of tensors) {
      const [lo, hi] = range(t.name, t.shape);
      for (let left = t.bytes.bf16 / 2; left > 0; ) {
        const n = Math.min(left, chunk.length);
        for (let i = 0; i < n; i++) {
          state ^= state << 13;
          state ^= state >>> 17;
          state ^= state << 5;
          f32[0] = lo + ((state >>> 0) / 4294967296) * (hi - lo);
          chunk[i] = (u32[0]! + 0x8000) >>> 16; // round to nearest
        }
        writeSync(fd, chunk.subarray(0, n));
        left -= n;
      }
    }
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}
