// A servable mixture-of-experts model made of fixtures, for tests that need the whole stack on the MoE path:
//
//   weights      test/fixtures/models/qwen35-moe-tiny (random, vocab 512, with its MTP layer), the embedding and
//                lm_head grown to 1024 rows: rows 512-1023 are rows 0-511 halved (exact in bf16, so no two rows tie)
//   tokenizer    test/fixtures/tokenizers/fixture-1024 and its chat template (fixture-model.ts), specials at 1016-1023
//
//   const loaded = await loadMoeFixtureModel({ backend: "vulkan", draft: "mtp" });
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type LoadedModel, type LoadModelOptions } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { readSafetensors, type Tensor, writeSafetensors } from "./padded-model.ts";

const FIXTURES = join(import.meta.dir, "../fixtures");
const WEIGHTS = join(FIXTURES, "models/qwen35-moe-tiny");
const DENSE = join(FIXTURES, "models/qwen35-dense-tiny"); /* the 1024-id fixture: its special ids and generation config */
const TOKENIZER = join(FIXTURES, "tokenizers/fixture-1024");
export const MOE_FIXTURE_MODEL_ID = "fixture-moe-tiny";
const TOKENS = 1024;

// bf16 rows [rows][cols] to TOKENS rows: row r ≥ rows is row r − rows halved.
function grown(t: Tensor): Tensor {
  const [rows, cols] = t.shape as [number, number];
  const src = new Uint16Array(t.data.buffer, t.data.byteOffset, rows * cols);
  const out = new Uint16Array(TOKENS * cols);
  out.set(src);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let r = rows; r < TOKENS; r++)
    for (let c = 0; c < cols; c++) {
      u32[0] = src[(r - rows) * cols + c]! << 16;
      f32[0] = f32[0]! / 2;
      out[r * cols + c] = u32[0]! >>> 16;
    }
  return { dtype: t.dtype, shape: [TOKENS, cols], data: new Uint8Array(out.buffer) };
}

let assembled: string | undefined;

// The model directory (made once per process, removed at exit).
export function moeFixtureModelDir(): string {
  if (assembled) return assembled;
  const root = mkdtempSync(join(tmpdir(), "splash-moe-model-"));
  process.on("exit", () => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, MOE_FIXTURE_MODEL_ID);
  mkdirSync(dir);
  type Config = Record<string, unknown> & { text_config: Record<string, unknown> };
  const config = JSON.parse(readFileSync(join(WEIGHTS, "config.json"), "utf8")) as Config;
  const dense = JSON.parse(readFileSync(join(DENSE, "config.json"), "utf8")) as Config;
  if (config.text_config.vocab_size !== 512 || dense.text_config.vocab_size !== TOKENS) throw new Error("unexpected fixture vocabularies");
  for (const k of ["image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"]) config[k] = dense[k];
  for (const k of ["vocab_size", "bos_token_id", "eos_token_id", "pad_token_id"]) config.text_config[k] = dense.text_config[k];
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 2));
  const tensors = readSafetensors(join(WEIGHTS, "model.safetensors"));
  for (const name of ["lm_head.weight", "model.language_model.embed_tokens.weight"]) tensors.set(name, grown(tensors.get(name)!));
  writeSafetensors(join(dir, "model.safetensors"), tensors);
  copyFileSync(join(DENSE, "generation_config.json"), join(dir, "generation_config.json"));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]) copyFileSync(join(TOKENIZER, f), join(dir, f));
  assembled = dir;
  return dir;
}

export function loadMoeFixtureModel(options: LoadModelOptions = {}): Promise<LoadedModel> {
  return loadModel(resolveModel(moeFixtureModelDir()), { threads: 2, kvBudget: 32 << 20, ...options });
}
