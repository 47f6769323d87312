// The DFlash2 fixture at Qwen3.8-27B-DFlash2's layer shapes (test/fixtures/models/dflash2-27b-layer): its weights
// are ≈0.9 GB, so the repository keeps only the recipe in its golden manifest and this helper regenerates them, bit
// for bit what scripts/fixtures/dflash2_goldens.py ran the reference on (`weight_values` there; the manifest's sha256
// of the tensor bytes proves it), into build/fixtures/ once.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

type Tensor = { name: string; shape: number[]; seed: number; range: [number, number] };
type Part = { tensors: Tensor[]; data_sha256: string };
export type Dflash2LayerManifest = {
  target_config: object;
  config: object;
  weights: { target: Part; drafter: Part };
};

function mix(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

// n bf16 values: element i = lo + (hi − lo) · u_i rounded to float32, then to bf16 (nearest even), with
// u_i = mix(mix(i) ^ mix(seed)) / 2^32 (dflash2_goldens.py weight_values).
export function weightValues(seed: number, n: number, lo: number, hi: number, out: Uint16Array): void {
  const s = mix(seed >>> 0);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < n; i++) {
    f32[0] = lo + (hi - lo) * (mix(mix(i) ^ s) / 4294967296);
    const b = u32[0]!;
    out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
}

// model.safetensors (bf16, tensors in recipe order) for one part; returns the sha256 of the tensor bytes.
function writeSafetensors(path: string, tensors: Tensor[]): string {
  const header: Record<string, unknown> = { __metadata__: { format: "pt", producer: "test/helpers/dflash2-fixture.ts" } };
  let offset = 0;
  for (const t of tensors) {
    const bytes = t.shape.reduce((a, b) => a * b, 1) * 2;
    header[t.name] = { dtype: "BF16", shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((json.length + 8) % 8)) % 8); // data starts 8-byte aligned
  const file = new Uint8Array(8 + json.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(new TextEncoder().encode(json), 8);
  const data = new Uint16Array(file.buffer, 8 + json.length, offset / 2);
  let at = 0;
  for (const t of tensors) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    weightValues(t.seed, n, t.range[0], t.range[1], data.subarray(at, at + n));
    at += n;
  }
  writeFileSync(path + ".tmp", file);
  renameSync(path + ".tmp", path);
  return new Bun.CryptoHasher("sha256").update(file.subarray(8 + json.length)).digest("hex");
}

// The fixture's target and drafter directories, made on first use; throws when the regenerated weights are not the
// ones the goldens were computed on.
export function dflash2LayerFixture(name = "dflash2-27b-layer"): { target: string; drafter: string; manifest: Dflash2LayerManifest } {
  const manifest = JSON.parse(readFileSync(join(ROOT, "test/fixtures/models", name, "golden/manifest.json"), "utf8")) as Dflash2LayerManifest;
  const dir = join(ROOT, "build/fixtures", name);
  const parts = { target: manifest.target_config, drafter: manifest.config };
  for (const [part, config] of Object.entries(parts) as ["target" | "drafter", object][]) {
    const d = join(dir, part);
    const stamp = join(d, "data.sha256");
    const want = manifest.weights[part].data_sha256;
    if (existsSync(stamp) && readFileSync(stamp, "utf8") === want) continue;
    mkdirSync(d, { recursive: true });
    writeFileSync(join(d, "config.json"), JSON.stringify(config, null, 1));
    const got = writeSafetensors(join(d, "model.safetensors"), manifest.weights[part].tensors);
    if (got !== want) throw new Error(`${name}/${part}: regenerated weights hash to ${got}, the goldens' to ${want}`);
    writeFileSync(stamp, got);
  }
  return { target: join(dir, "target"), drafter: join(dir, "drafter"), manifest };
}
