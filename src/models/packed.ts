// Splash's packed weight files (`model.splash`, native/core/packed.h): `splash import` quantizes a float checkpoint
// once, per the model's recipe, into the row layout the kernels read; loading maps the file. A packed model is a
// directory in the Splash cache, <cache>/packed/<model id>/<quant>/, holding model.splash and the source's small
// files (config, tokenizer, template), so everything that loads a checkpoint directory loads it.
//
// Checks: the fast one (every resolution, here; native repeats it at load) reads the fixed header and the JSON
// table: magic, version, exact file length, header checksum. The full one (`splash verify`) is native's: every
// weight byte against the stored XXH64.
import { dlopen, FFIType } from "bun:ffi";
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import embeddedPath from "../../build/native-lib.ts";
import { CliError } from "../cli/_command.ts";
import { extractLibrary } from "../native/library.ts";
import { cacheDir } from "../paths.ts";
import { recipeType, type ModelSpec, type Quant, type RecipeRule, type TensorKind } from "./spec.ts";

export const PACKED_FILE = "model.splash";
const MAGIC = "SPLSHPK\0";
const VERSION = 1;
const FIXED_HEADER = 64;

export type PackedQuant = Exclude<Quant, "bf16">;

export type PackedTensor = { name: string; kind: string; type: string; dtype: string; shape: number[]; rows: number; cols: number; row_bytes: number; offset: number; bytes: number };
export type PackedHeader = { fileBytes: number; meta: Record<string, unknown>; tensors: PackedTensor[] };

export class PackedFileError extends CliError {
  override name = "PackedFileError";
}

const REDO = "delete it and run `splash import` again";

// The fast check: throws PackedFileError naming the file and what is wrong.
export function readPackedHeader(path: string): PackedHeader {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const fail = (what: string) => new PackedFileError(`${path}: ${what}`, REDO);
    if (size < FIXED_HEADER) throw fail(`${size} bytes, shorter than a packed file's header: truncated`);
    const fixed = Buffer.alloc(FIXED_HEADER);
    readSync(fd, fixed, 0, FIXED_HEADER, 0);
    if (fixed.toString("latin1", 0, 8) !== MAGIC) throw fail("not a Splash packed file (bad magic)");
    const version = fixed.readUInt32LE(8);
    if (version !== VERSION) throw fail(`packed format version ${version}, this build reads ${VERSION}`);
    const headerBytes = Number(fixed.readBigUInt64LE(16));
    const fileBytes = Number(fixed.readBigUInt64LE(32));
    if (fileBytes !== size) throw fail(`${size} bytes but its header says ${fileBytes}: truncated or damaged`);
    if (headerBytes > size - FIXED_HEADER) throw fail(`header length ${headerBytes} does not fit the file`);
    const json = Buffer.alloc(headerBytes);
    readSync(fd, json, 0, headerBytes, FIXED_HEADER);
    if (BigInt.asUintN(64, Bun.hash.xxHash64(json)) !== fixed.readBigUInt64LE(40)) throw fail("the header's checksum does not match: damaged");
    const header = JSON.parse(json.toString("utf8")) as { meta: Record<string, unknown>; tensors: PackedTensor[] };
    return { fileBytes, meta: header.meta, tensors: header.tensors };
  } finally {
    closeSync(fd);
  }
}

// Where `splash import` puts a model's packed directory, and where resolution looks for it.
export function packedDir(modelId: string, quant: PackedQuant): string {
  return join(cacheDir(), "packed", modelId, quant);
}

export type InstalledPacked = { dir: string; quant: PackedQuant; complete: boolean; bytes: number; problem?: string };

export function installedPacked(modelId: string, quant: PackedQuant): InstalledPacked | undefined {
  const dir = packedDir(modelId, quant);
  if (!existsSync(dir)) return undefined;
  for (const f of ["config.json", PACKED_FILE]) if (!existsSync(join(dir, f))) return { dir, quant, complete: false, bytes: 0, problem: `${f} is missing` };
  try {
    return { dir, quant, complete: true, bytes: readPackedHeader(join(dir, PACKED_FILE)).fileBytes };
  } catch (e) {
    if (e instanceof PackedFileError) return { dir, quant, complete: false, bytes: 0, problem: e.message };
    throw e;
  }
}

// The kind of a tensor (spec.ts TENSOR_KINDS) from its name, in every layout a float checkpoint comes in: the
// official multimodal one (libsplash's inventory lists it), text-only "model.layers.N", per-expert "experts.E.*_proj".
export function tensorKind(name: string): TensorKind {
  if (name.startsWith("model.visual.")) return "vision";
  if (/(^|\.)embed_tokens\.weight$/.test(name)) return "embed";
  if (/(^|\.)lm_head\.weight$/.test(name)) return "lm_head";
  if (/^mtp\.fc\.weight$/.test(name)) return "mtp_fc";
  if (/norm\.weight$|norm\.bias$|^mtp\.pre_fc_norm_(embedding|hidden)\.weight$/.test(name)) return "norm";
  if (/\.self_attn\.[qkvo]_proj\.weight$/.test(name)) return "attn_proj";
  if (/\.linear_attn\.(in_proj_qkv|in_proj_z|out_proj)\.weight$/.test(name)) return "gdn_proj";
  if (/\.linear_attn\.in_proj_[ab]\.weight$/.test(name)) return "gdn_gate_proj";
  if (/\.linear_attn\.conv1d\.weight$/.test(name)) return "gdn_conv";
  if (/\.linear_attn\.(A_log|dt_bias)$/.test(name)) return "gdn_param";
  if (/\.mlp\.gate\.weight$/.test(name)) return "moe_router";
  if (/\.mlp\.experts\./.test(name)) return "moe_experts";
  if (/\.mlp\.shared_expert_gate\.weight$/.test(name)) return "shared_expert_gate";
  if (/\.mlp\.shared_expert\./.test(name)) return "shared_expert";
  if (/\.mlp\.(gate|up|down)_proj\.weight$/.test(name)) return "mlp";
  throw new CliError(`tensor ${name}: not a tensor of a Qwen3.5-family checkpoint that import knows`, "import takes the official layout (see shared/reference/qwen35-architecture.md §2.8)");
}

// The recipe of a checkpoint without a spec of its own (a local directory, the embedded model): the hub models'
// rules. Big matrices at the asked level; the head at 8 bits (it decides the argmax); the small matrices feeding
// exponentials, sigmoids and the expert choice, and every vector, as stored.
export const DEFAULT_RECIPE: RecipeRule[] = [
  { kinds: ["attn_proj", "gdn_proj", "mlp", "moe_experts", "shared_expert", "mtp_fc", "embed"], q8: "q8", q4: "q4", why: "the big matrices: nearly all of the bytes read per token" },
  { kinds: ["lm_head"], q8: "q8", q4: "q8", why: "it decides the argmax; 4 bits here cost the most accuracy per byte saved" },
  { kinds: ["gdn_gate_proj", "moe_router", "shared_expert_gate", "norm", "gdn_conv", "gdn_param", "vision", "dflash"], q8: "bf16", q4: "bf16", why: "small matrices feeding exponentials, sigmoids and the expert choice, and vectors: a rounding error of the bytes" },
];

// The recipe a model is packed by and loaded at a level by: its spec's, else the default.
export function modelRecipe(spec: ModelSpec | undefined): readonly RecipeRule[] {
  return spec?.quantization?.recipe ?? DEFAULT_RECIPE;
}

// Per tensor: its kind and, when the recipe quantizes it, the Splash type (q8/q4). Vectors are never quantized.
export function packPlan(tensors: { name: string; shape: number[] }[], recipe: readonly RecipeRule[], quant: PackedQuant): Record<string, { kind: TensorKind; type?: "q8" | "q4" }> {
  const out: Record<string, { kind: TensorKind; type?: "q8" | "q4" }> = {};
  for (const t of tensors) {
    const kind = tensorKind(t.name);
    const type = recipeType(recipe, kind, quant);
    out[t.name] = (type === "q8" || type === "q4") && t.shape.length >= 2 ? { kind, type } : { kind };
  }
  return out;
}

const symbols = {
  splash_last_error: { args: [], returns: FFIType.cstring },
  splash_pack_write: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  splash_pack_verify: { args: [FFIType.ptr], returns: FFIType.i32 },
} as const;

let bound: ReturnType<typeof dlopen<typeof symbols>>["symbols"] | undefined;

// The two functions of native/include/splash_pack.h, bound on their own (the model ABI's version does not cover them).
function packLibrary() {
  bound ??= dlopen(process.env.SPLASH_LIB ?? extractLibrary(embeddedPath), symbols).symbols;
  return bound;
}

const cstr = (s: string) => Buffer.from(`${s}\0`);

export async function writePacked(srcDir: string, outPath: string, plan: Record<string, unknown>, meta: Record<string, unknown>, threads = 0): Promise<void> {
  const l = packLibrary();
  const st = l.splash_pack_write(cstr(srcDir), cstr(outPath), cstr(JSON.stringify(plan)), cstr(JSON.stringify(meta)), threads);
  if (st !== 0) throw new CliError(`import failed: ${String(l.splash_last_error())}`);
}

// The full check; throws PackedFileError with native's message (which names the file) on any damage.
export async function verifyPacked(path: string): Promise<void> {
  const l = packLibrary();
  if (l.splash_pack_verify(cstr(path)) !== 0) throw new PackedFileError(String(l.splash_last_error()).replace(/^[\w.]+:\d+: /, ""), REDO);
}
