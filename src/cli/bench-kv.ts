// `splash bench kv [MODEL]`: how far each compact KV cache type moves the model's predictions from the f32 cache's
// over one long sequence (src/bench/kv-parity.ts): argmax agreement, the greedy token's log-probability change and
// the mean KL at each prefix length asked for, and whether the type holds the bound `--kv-type auto` relies on.
// The sequence is the mixed agent conversation of `bench tokenize` when the model has a tokenizer, else seeded
// random token ids. Ends with one JSON line.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { KV_PARITY_BOUND, kvParity, withinBound } from "../bench/kv-parity.ts";
import { randomTokens } from "../engine/serve-bench.ts";
import { KV_TYPES, type KvType } from "../models/kv-type.ts";
import { resolveModel } from "../models/resolve.ts";
import { Model } from "../native/model.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { command, intOption, parseOption } from "./_command.ts";
import { loadFlags, parseLoadFlags } from "./_load-flags.ts";
import { mixedPrompt } from "./bench-tokenize.ts";

const { backend, threads } = loadFlags;
const listOption = z.string().regex(/^\d+(,\d+)*$/, { error: "expected comma-separated token counts, e.g. 4096,16384" });

export default command({
  meta: { name: "kv", description: "KV cache types against f32 over a long sequence: argmax agreement and log-prob change" },
  args: {
    model: { type: "positional", required: false, description: "A model id or checkpoint directory (default: the embedded model)" },
    at: { type: "string", default: "4096,16384", description: "Prefix lengths to report, comma-separated; the longest is the sequence" },
    chunk: { type: "string", default: "512", description: "Tokens per prefill step" },
    seed: { type: "string", default: "1", description: "Seed of the random tokens (models without a tokenizer)" },
    backend,
    threads,
  },
  async run({ args }) {
    const at = parseOption("bench kv", "at", listOption, args.at).split(",").map(Number);
    const chunk = parseOption("bench kv", "chunk", intOption(1, 4096), args.chunk);
    const seed = parseOption("bench kv", "seed", intOption(0, 2 ** 31), args.seed);
    const load = parseLoadFlags("bench kv", args);
    const resolved = resolveModel(args.model);
    const length = Math.max(...at);
    const models: Partial<Record<KvType, Model>> = {};
    const loaded: Model[] = [];
    try {
      for (const type of KV_TYPES) {
        const m = await Model.load(resolved.dir, { maxStepTokens: chunk, ...(load.backend ? { backend: load.backend } : {}), ...(load.threads ? { threads: load.threads } : {}) });
        loaded.push(m);
        if (!m.kvTypes.includes(type)) continue; // a type this backend lacks is left out
        m.setKvType(type);
        models[type] = m;
      }
      const ref = models.f32!;
      let source: string;
      let tokens: Int32Array;
      if (existsSync(join(resolved.dir, "tokenizer.json"))) {
        const tok = await Tokenizer.load(resolved.dir);
        tokens = tok.encodeTemplate(mixedPrompt(tok, length)).subarray(0, length);
        tok.free();
        source = "the mixed agent conversation of `bench tokenize`";
      } else {
        tokens = randomTokens(length, seed, ref.info.vocabSize);
        source = `random token ids (seed ${seed})`;
      }
      console.log(`model      ${resolved.id} (${resolved.dir}) on ${ref.info.backend}, ${ref.info.threads} threads`);
      console.log(`sequence   ${tokens.length} tokens: ${source}; bound: argmax agreement ≥ ${KV_PARITY_BOUND.argmaxAgreement * 100}%, |Δ log p(greedy token)| ≤ ${KV_PARITY_BOUND.maxDeltaLogprob}`);
      const t0 = performance.now();
      const rows = kvParity(models, tokens, at, chunk);
      const seconds = (performance.now() - t0) / 1000;
      for (const r of rows) {
        console.log(
          `${r.type.padEnd(5)} ${String(r.positions).padStart(6)} positions: argmax ${(r.argmaxAgreement * 100).toFixed(2)}%, max |Δ log p| ${r.maxDeltaLogprob.toFixed(4)}, mean KL ${r.meanKl.toExponential(2)} nats — ${withinBound(r) ? "within" : "OUTSIDE"} the bound`,
        );
      }
      console.log(`time       ${seconds.toFixed(1)} s`);
      console.log(JSON.stringify({ bench: "kv", model: resolved.id, backend: ref.info.backend, tokens: tokens.length, source, seconds: +seconds.toFixed(1), bound: KV_PARITY_BOUND, rows: rows.map((r) => ({ ...r, withinBound: withinBound(r) })) }));
    } finally {
      for (const m of loaded) m.free();
    }
  },
});
