// Export of a Qwen3.5-family checkpoint directory to one GGUF file that llama.cpp loads (arch qwen35 / qwen35moe).
// Streamed: tensors are read row by row from the memory-mapped safetensors and written as they are encoded, so the
// memory held is a few MiB whatever the model's size.
import { basename } from "node:path";
import { readCheckpointConfig } from "../models/config.ts";
import { meta, tensorBytes, writeGguf, type MetaValue, type WriteProgress } from "./format.ts";
import { archName, FILE_TYPE, modelMetadata, qwen35Tensors, shapesOf, type ExportType } from "./qwen35.ts";
import { Checkpoint } from "./source.ts";
import { vocabMetadata } from "./vocab.ts";

export type { ExportType } from "./qwen35.ts";
export const EXPORT_TYPES: readonly ExportType[] = ["f32", "f16", "bf16", "q8_0", "q4_0"];

export type ExportResult = { path: string; bytes: number; arch: string; tensors: number; type: ExportType };

export function exportGguf(dir: string, path: string, type: ExportType, options: { name?: string; progress?: WriteProgress } = {}): ExportResult {
  const cfg = readCheckpointConfig(dir);
  const shapes = shapesOf(cfg);
  const ck = new Checkpoint(dir);
  const arch = archName(shapes);
  const metadata = new Map<string, MetaValue>([
    ["general.architecture", meta.str(arch)],
    ["general.type", meta.str("model")],
    ["general.name", meta.str(options.name ?? basename(dir))],
    ["general.file_type", meta.u32(FILE_TYPE[type])],
    ["general.quantization_version", meta.u32(2)],
    ...modelMetadata(shapes),
    ...vocabMetadata(dir, cfg, shapes.vocab),
  ]);
  const tensors = qwen35Tensors(ck, shapes, type);
  const bytes = writeGguf(path, metadata, tensors, options.progress);
  return { path, bytes, arch, tensors: tensors.length, type };
}

// Bytes of weights llama.cpp reads for one decoded token from the file `exportGguf(dir, …, type)` writes: every
// tensor but the embedding, of which one row (the roofline's numerator; MoE would count top-k experts only).
export function ggufDecodeBytes(dir: string, type: ExportType): number {
  const shapes = shapesOf(readCheckpointConfig(dir));
  if (shapes.moe) throw new Error("ggufDecodeBytes: MoE models read top-k experts per token; not counted here");
  let bytes = 0;
  for (const t of qwen35Tensors(new Checkpoint(dir), shapes, type)) bytes += t.name === "token_embd.weight" ? tensorBytes(t) / shapes.vocab : tensorBytes(t);
  return bytes;
}
