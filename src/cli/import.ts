// `splash import MODEL [--quant q4|q8] [--out DIR]`: converts a float checkpoint into Splash's packed format once
// (quantized per the model's recipe, laid out for the kernels), so that every later load is a map. The packed model
// goes into the Splash cache, where `splash serve MODEL` finds it, unless --out names another directory.
import { formatBytes } from "../format.ts";
import { packedDir } from "../models/packed.ts";
import { importModel } from "../models/packed-import.ts";
import { resolveModel } from "../models/resolve.ts";
import { command } from "./_command.ts";
import { loadFlags, parseQuant, parseThreads, quantFlag } from "./_load-flags.ts";

export default command({
  meta: { name: "import", description: "Convert a bf16 checkpoint into Splash's packed format (quantized once, mapped at load)" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or omitted for the embedded model" },
    quant: quantFlag("q4; each tensor per the model's recipe", ["q8", "q4"]),
    out: { type: "string", description: "Directory to write (default: the Splash cache, where resolution finds it)" },
    threads: loadFlags.threads,
  },
  async run({ args }) {
    const quant = parseQuant("import", args.quant, ["q8", "q4"] as const) ?? "q4";
    const threads = parseThreads("import", args.threads) ?? 0;
    const model = resolveModel(args.model, { format: "bf16", source: true });
    const out = args.out ?? packedDir(model.id, quant);
    const started = performance.now();
    const r = await importModel(model, quant, out, threads);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`${r.dir}\n  ${r.tensors} tensors (${r.quantized} quantized to ${quant} or per the recipe), ${formatBytes(r.bytes)}, in ${seconds} s`);
    if (!args.out) console.log(`ready: splash serve ${model.id}`);
  },
});
