// A servable model made of fixtures, for integration tests that need the whole stack (tokenizer, chat template,
// native engine) without a trained checkpoint:
//
//   weights      test/fixtures/models/qwen35-dense-tiny (random, vocab 1024; ids 1016-1023 reserved for specials)
//   tokenizer    test/fixtures/tokenizers/fixture-1024 (byte-level BPE with exactly 1024 ids: the ChatML, think and
//                tool-call tokens at the reserved ids; its README says why its merges are JSON fragments)
//   template     the same directory's chat_template.jinja (ChatML turns, Qwen XML tool calls, enable_thinking)
//
//   const dir = fixtureModelDir();                 // a temporary directory with a copy of all of it
//   const loaded = await loadFixtureModel();       // loadModel() on it: loaded.chat is the ChatModel; loaded.close()
//
// The model's answers are noise (near-uniform over the allowed tokens at temperature 1), which is what
// structured-output tests want: every valid output must come from the grammar, none from the model.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type LoadedModel, type LoadModelOptions } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";

const FIXTURES = join(import.meta.dir, "../fixtures");
export const FIXTURE_MODEL_ID = "fixture-dense-tiny";
const WEIGHTS = join(FIXTURES, "models/qwen35-dense-tiny");
const TOKENIZER = join(FIXTURES, "tokenizers/fixture-1024");

let assembled: string | undefined;

// The model directory (made once per process, removed at exit). Its name is the model id a local directory gets.
export function fixtureModelDir(): string {
  if (assembled) return assembled;
  const root = mkdtempSync(join(tmpdir(), "splash-fixture-model-"));
  process.on("exit", () => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, FIXTURE_MODEL_ID);
  mkdirSync(dir);
  for (const f of ["config.json", "generation_config.json", "model.safetensors"]) copyFileSync(join(WEIGHTS, f), join(dir, f));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]) copyFileSync(join(TOKENIZER, f), join(dir, f));
  assembled = dir;
  return dir;
}

// The fixture model loaded as `splash serve` loads a checkpoint directory (2 threads, a small KV budget by default).
export function loadFixtureModel(options: LoadModelOptions = {}): Promise<LoadedModel> {
  return loadModel(resolveModel(fixtureModelDir()), { threads: 2, kvBudget: 64 << 20, ...options });
}
