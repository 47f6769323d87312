// `splash import MODEL [--quant q4|q8] [--out DIR]`: converts a float checkpoint into Splash's packed format once
// (quantized per the model's recipe, laid out for the kernels), so that every later load is a map. The packed model
// goes into the Splash cache, where `splash serve MODEL` finds it, unless --out names another directory.
import { z } from "zod";
import { formatBytes } from "../format.ts";
import { packedDir } from "../models/packed.ts";
import { importModel } from "../models/packed-import.ts";
import { resolveModel } from "../models/resolve.ts";
import { command, parseOption } from "./_command.ts";

export default command({
  meta: { name: "import", description: "Convert a bf16 checkpoint into Splash's packed format (quantized once, mapped at load)" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or omitted for the embedded model" },
    quant: { type: "string", description: "Weight level: q4 (default) or q8, per tensor kind as the model's recipe says" },
    out: { type: "string", description: "Directory to write (default: the Splash cache, where resolution finds it)" },
    threads: { type: "string", description: "Threads for quantizing (default: every core)" },
  },
  async run({ args }) {
    const quant = parseOption("import", "quant", z.enum(["q4", "q8"], { error: "expected q4 or q8" }), args.quant ?? "q4");
    const threads = parseOption("import", "threads", z.coerce.number().int().min(0).max(1024), args.threads ?? "0");
    const model = resolveModel(args.model, { format: "bf16", source: true });
    const out = args.out ?? packedDir(model.id, quant);
    const started = performance.now();
    const r = await importModel(model, quant, out, threads);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`${r.dir}\n  ${r.tensors} tensors (${r.quantized} quantized to ${quant} or per the recipe), ${formatBytes(r.bytes)}, in ${seconds} s`);
    if (!args.out) console.log(`ready: splash serve ${model.id}`);
  },
});
