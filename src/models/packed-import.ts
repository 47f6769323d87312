// `splash import`: a float checkpoint (a resolved MODEL: the embedded model, a hub download, a local directory) into
// a packed directory: model.splash quantized per the model's recipe, plus the source's small files.
import { copyFileSync, cpSync, existsSync, lstatSync, mkdirSync, readlinkSync, renameSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import { CliError } from "../cli/_command.ts";
import { checkWeightFiles } from "./files.ts";
import { modelRecipe, PACKED_FILE, packPlan, readPackedHeader, writePacked, type PackedQuant } from "./packed.ts";
import type { ResolvedModel } from "./resolve.ts";
import { readSafetensorsHeader } from "./safetensors.ts";
import { recipeType, TENSOR_KINDS } from "./spec.ts";

// What a loader reads beside the weights (tokenizer, template, sampling defaults); copied when the source has them.
const SMALL_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json", "special_tokens_map.json", "preprocessor_config.json"];

export type ImportResult = { dir: string; bytes: number; tensors: number; quantized: number };

export async function importModel(model: ResolvedModel, quant: PackedQuant, outDir: string, threads = 0): Promise<ImportResult> {
  if (model.kind !== "embedded" && model.format !== "bf16") {
    throw new CliError(`${model.dir} is an MLX ${model.format} checkpoint: it loads as it is`, "import takes a float (bf16) checkpoint; run the MLX one directly");
  }
  const weights = checkWeightFiles(model.dir);
  const tensors = weights.files.flatMap((f) => [...readSafetensorsHeader(join(model.dir, f)).tensors].map(([name, t]) => ({ name, shape: t.shape })));
  const recipe = modelRecipe(model.spec);
  const plan = packPlan(tensors, recipe, quant);
  // Where the weights came from: each weight file with its size and, in a hub-cache snapshot, the hash the hub
  // recorded (the blob's name).
  const files: Record<string, { bytes: number; hash?: string }> = {};
  for (const f of weights.files) {
    const p = join(model.dir, f);
    const link = lstatSync(p).isSymbolicLink() ? basename(readlinkSync(p)) : undefined;
    files[f] = { bytes: lstatSync(p).isSymbolicLink() ? Bun.file(p).size : lstatSync(p).size, ...(link ? { hash: link } : {}) };
  }
  const meta = {
    model: model.id,
    quant,
    source: { dir: model.dir, ...(model.kind === "hub" ? { repo: model.repo, commit: model.commit } : {}), files },
    recipe: Object.fromEntries(TENSOR_KINDS.map((k) => [k, recipeType(recipe, k, quant)])),
    created: new Date().toISOString(),
  };
  // Built in a sibling directory and renamed into place: a cut import leaves nothing that resolves.
  const work = `${outDir}.partial`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  for (const f of SMALL_FILES) if (existsSync(join(model.dir, f))) copyFileSync(join(model.dir, f), join(work, f));
  // The embedded model's DFlash drafters sit in subdirectories the loader finds beside the weights: they come along.
  for (const drafter of [model.spec?.draft.dflash, model.spec?.draft.dflash2])
    if (typeof drafter === "string" && existsSync(join(model.dir, drafter))) cpSync(join(model.dir, drafter), join(work, drafter), { recursive: true });
  await writePacked(model.dir, join(work, PACKED_FILE), plan, meta, threads);
  rmSync(outDir, { recursive: true, force: true });
  renameSync(work, outDir);
  const header = readPackedHeader(join(outDir, PACKED_FILE));
  return { dir: outDir, bytes: header.fileBytes, tensors: header.tensors.length, quantized: header.tensors.filter((t) => t.type === "q8" || t.type === "q4").length };
}
