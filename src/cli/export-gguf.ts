// `splash export-gguf MODEL OUT.gguf [--type f16|bf16|q8_0|q4_0|f32]`: writes the model as one GGUF file in
// llama.cpp's qwen35 / qwen35moe conventions (src/gguf/), so the same weights run in llama.cpp, Ollama or LM Studio.
// MODEL is resolved as everywhere (a supported id such as splash-tiny, or a checkpoint directory). The file
// is streamed: memory stays small whatever the model's size.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";
import { formatBytes } from "../format.ts";
import { EXPORT_TYPES, exportGguf, type ExportType } from "../gguf/export.ts";
import { ExportError } from "../gguf/qwen35.ts";
import { SourceError } from "../gguf/source.ts";
import { log } from "../log.ts";
import { resolveModel } from "../models/resolve.ts";
import { CliError, command, parseOption } from "./_command.ts";

const typeOption = z.enum(EXPORT_TYPES as [ExportType, ...ExportType[]], { error: `expected one of ${EXPORT_TYPES.join(", ")}` });

export default command({
  meta: { name: "export-gguf", description: "Write the model as a GGUF file for llama.cpp (qwen35 / qwen35moe)" },
  args: {
    model: { type: "positional", required: true, description: "Model id, or a checkpoint directory" },
    out: { type: "positional", required: true, description: "Output .gguf file" },
    type: { type: "string", description: "Weight type: f16 (default), bf16, q8_0, q4_0, f32" },
    force: { type: "boolean", description: "Overwrite OUT if it exists" },
  },
  async run({ args }) {
    const type = args.type === undefined ? "f16" : parseOption("export-gguf", "type", typeOption, args.type);
    const out = resolve(args.out);
    if (existsSync(out) && !args.force) throw new CliError(`${args.out} exists`, "pass --force to overwrite it");
    const model = resolveModel(args.model);
    let last = 0;
    const t0 = performance.now();
    try {
      const r = exportGguf(model.dir, out, type, {
        name: model.id,
        progress: (done, total) => {
          const now = performance.now();
          if (now - last < 2000 && done < total) return;
          last = now;
          log.info(`${((100 * done) / total).toFixed(0)}% of ${formatBytes(total)}`);
        },
      });
      console.log(`${r.path}: ${r.arch}, ${r.tensors} tensors, ${type}, ${formatBytes(r.bytes)} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } catch (e) {
      if (e instanceof ExportError || e instanceof SourceError) throw new CliError(e.message, "export-gguf writes Qwen3.5-family checkpoints that llama.cpp's qwen35 / qwen35moe can express");
      throw e;
    }
  },
});
