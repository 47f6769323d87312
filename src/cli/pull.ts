// `splash pull MODEL [--format bf16|mlx-4bit|mlx-8bit] [--drafter]`: downloads a supported model (or any hub
// repository named org/name) into the Hugging Face cache. Ctrl-C stops it and keeps the partial files; running the
// command again resumes them.
import { z } from "zod";
import { pullModel, pullRepository } from "../models/pull-model.ts";
import { findSpec } from "../models/registry.ts";
import { FORMATS, isHubSpec } from "../models/spec.ts";
import { CliError, command, parseOption, UsageError } from "./_command.ts";

export default command({
  meta: { name: "pull", description: "Download a model from the Hugging Face hub into the shared hub cache" },
  args: {
    model: { type: "positional", required: true, description: "A supported model id (see `splash models`) or a hub repository org/name" },
    format: { type: "string", description: `Which files of a supported model: ${FORMATS.join(", ")} (default: the model's default)` },
    drafter: { type: "boolean", description: "Also download the model's separate drafter (DFlash or DFlash2, as its spec names)" },
  },
  async run({ args }) {
    const format = args.format === undefined ? undefined : parseOption("pull", "format", z.enum(FORMATS, { error: `expected one of ${FORMATS.join(", ")}` }), args.format);
    const stop = new AbortController();
    const onSigint = () => stop.abort();
    process.once("SIGINT", onSigint);
    try {
      const spec = findSpec(args.model);
      if (spec && !isHubSpec(spec)) throw new CliError(`${spec.id} is embedded in Splash: there is nothing to download`);
      if (spec && isHubSpec(spec)) {
        await pullModel(spec, format ?? spec.defaultFormat, { drafter: args.drafter, signal: stop.signal });
        console.log(`ready: splash serve ${spec.id}`);
        return;
      }
      if (!/^[\w.-]+\/[\w.-]+$/.test(args.model)) throw new CliError(`no supported model named ${args.model}`, "see `splash models`, or name a hub repository as org/name");
      if (format || args.drafter) throw new UsageError("--format and --drafter apply to supported models only", "pull");
      const r = await pullRepository(args.model, "main", args.model, `splash pull ${args.model}`, { signal: stop.signal });
      console.log(`ready: splash serve ${r.dir}`);
    } finally {
      process.off("SIGINT", onSigint);
    }
  },
});
