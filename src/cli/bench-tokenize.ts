// `splash bench tokenize [MODEL]`: encodes a 32K-token mixed prompt (an agent conversation: code in several
// languages, prose, CJK, emoji, JSON tool results, ChatML turns) the way a chat request is encoded, cold (first
// encode after load: empty BPE cache, cold JIT) and warm (median of repeated encodes), and ends with one JSON line.
// The budget is 30 ms for 32K tokens on a 2-core machine: agents resend the whole conversation every turn.
import { z } from "zod";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, command, intOption, parseOption } from "./_command.ts";
import { resolveTokenizerDir } from "./tokenize.ts";

// A deterministic generator (mulberry32), so every run encodes the same text.
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS =
  "the of and to in is that for it as with was on be by this are from at or an have not which but all were when we there can more if will one about would their what so out up into them do has time only some could new these two may then first any like now my such make over did most after also made many before must through back years where much your way well down should because each just those people how too little state good very great world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three".split(
    " ",
  );
const IDENTS = "user,request,buffer,config,token,index,result,value,handler,stream,session,cache,model,queue,worker,limit".split(",");
const CJK = "我们在北京大学学习人工智能今天天气很好你好世界日本語のテキスト東京は晴れですカタカナとひらがな한국어문장입니다안녕하세요";
const EMOJI = ["😀", "👍🏽", "🚀", "✅", "❌", "🔥", "👨‍👩‍👧", "🇯🇵", "⚠️", "📦"];

// Turns of a made-up agent conversation, about `targetChars` characters in all.
function mixedConversation(targetChars: number): string[] {
  const r = rng(42);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const id = () => `${pick(IDENTS)}${pick(["", "Id", "Count", "_v2", "Map", "List"])}`;
  const sentence = () => {
    const n = 6 + Math.floor(r() * 14);
    const w = Array.from({ length: n }, () => pick(WORDS));
    w[0] = w[0]!.charAt(0).toUpperCase() + w[0]!.slice(1);
    return `${w.join(" ")}${pick([".", ".", ",", "?", "!"])}`;
  };
  const blocks: (() => string)[] = [
    () => Array.from({ length: 3 + Math.floor(r() * 5) }, sentence).join(" "),
    () => `\`\`\`ts\nexport async function ${id()}(${id()}: number, ${id()}?: string): Promise<void> {\n  const ${id()} = await fetch(\`/api/${id()}?limit=\${${Math.floor(r() * 1000)}}\`);\n  if (!${id()}.ok) throw new Error("failed: " + ${id()}.status);\n  for (let i = 0; i < ${id()}.length; i++) ${id()}[i] ??= {};\n}\n\`\`\``,
    () => `\`\`\`python\ndef ${id()}(${id()}, ${id()}=None):\n    """${sentence()}"""\n    return [x ** 2 for x in range(${Math.floor(r() * 100)}) if x % 3 == 0]\n\`\`\``,
    () => `\`\`\`rust\nfn ${id()}(${id()}: &[u32]) -> Result<Vec<u32>, String> {\n    Ok(${id()}.iter().map(|x| x * ${Math.floor(r() * 9)}).collect())\n}\n\`\`\``,
    () => `<tool_response>\n${JSON.stringify({ [id()]: Math.floor(r() * 1e6), [id()]: [r().toFixed(4), id(), null, true], path: `/src/${id()}/${id()}.ts` })}\n</tool_response>`,
    () => Array.from({ length: 20 + Math.floor(r() * 60) }, () => CJK[Math.floor(r() * CJK.length)]).join("") + "。",
    () => `${sentence()} ${pick(EMOJI)} ${pick(EMOJI)} ${Math.floor(r() * 1e9)} ${r().toFixed(6)} 2026-11-${10 + Math.floor(r() * 20)}`,
    () => `    ${id()}\t=\t${id()}   \n\n        // ${sentence()}\n`,
  ];
  const parts: string[] = ["<|im_start|>system\nYou are a coding agent. Use the tools.<|im_end|>\n"];
  let size = parts[0]!.length;
  while (size < targetChars) {
    const role = pick(["user", "assistant", "user"]);
    const body = Array.from({ length: 2 + Math.floor(r() * 6) }, () => pick(blocks)()).join("\n\n");
    const turn = `<|im_start|>${role}\n${body}<|im_end|>\n`;
    parts.push(turn);
    size += turn.length;
  }
  return parts;
}

// Whole turns of the mixed conversation until it has at least `target` tokens (turns end in an added token, so
// their counts add up). Also used by scripts/bench/tokenize-compare.ts to time other tokenizers on the same text.
export function mixedPrompt(tok: Tokenizer, target: number): string {
  const turns = mixedConversation(target * 8);
  let n = 0;
  let k = 0;
  while (n < target && k < turns.length) n += tok.encodeTemplate(turns[k++]!).length;
  if (n < target) throw new CliError(`this tokenizer needs more than ${target * 8} characters for ${target} tokens`);
  return turns.slice(0, k).join("");
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export default command({
  meta: { name: "tokenize", description: "Measure encoding a 32K-token mixed prompt (cold and warm)" },
  args: {
    model: { type: "positional", required: false, description: "Model id, or directory with tokenizer.json (default: the embedded model)" },
    tokens: { type: "string", description: "Prompt size in tokens (default 32768)" },
    runs: { type: "string", description: "Warm runs (default 20)" },
  },
  async run({ args }) {
    const target = parseOption("bench tokenize", "tokens", intOption(1, 1 << 22), args.tokens ?? 32768);
    const runs = parseOption("bench tokenize", "runs", z.coerce.number().int().min(1).max(1000), args.runs ?? 20);
    const dir = resolveTokenizerDir(args.model);

    let t0 = performance.now();
    const tok = await Tokenizer.load(dir);
    const loadMs = performance.now() - t0;

    // Counted with a throwaway tokenizer, so the one being timed starts cold.
    const probe = await Tokenizer.load(dir);
    const text = mixedPrompt(probe, target);
    probe.free();

    // Wall time, and the process's CPU time (less sensitive to other work on a shared machine).
    const timed = () => {
      const c = process.cpuUsage();
      const t = performance.now();
      const ids = tok.encodeTemplate(text);
      const wall = performance.now() - t;
      const cpu = process.cpuUsage(c);
      return { ids, wall, cpu: (cpu.user + cpu.system) / 1000 };
    };
    const cold = timed();
    const ids = cold.ids;
    const coldMs = cold.wall;
    const warm = Array.from({ length: runs }, timed);
    const warmMs = median(warm.map((w) => w.wall));
    const warmCpuMs = median(warm.map((w) => w.cpu));
    const bestMs = Math.min(...warm.map((w) => w.wall));
    tok.free();
    const rate = (ms: number) => Math.round(ids.length / (ms / 1000));
    console.log(`tokenizer  ${dir}`);
    console.log(`prompt     ${ids.length} tokens, ${text.length} characters`);
    console.log(`load       ${loadMs.toFixed(1)} ms`);
    console.log(`cold       ${coldMs.toFixed(2)} ms, ${cold.cpu.toFixed(2)} ms CPU (${rate(coldMs)} tokens/s)`);
    console.log(`warm       ${warmMs.toFixed(2)} ms median of ${runs}, ${warmCpuMs.toFixed(2)} ms CPU, best ${bestMs.toFixed(2)} ms (${rate(warmMs)} tokens/s)`);
    console.log(
      JSON.stringify({
        bench: "tokenize",
        tokenizer: dir,
        tokens: ids.length,
        chars: text.length,
        load_ms: +loadMs.toFixed(1),
        cold_ms: +coldMs.toFixed(2),
        cold_cpu_ms: +cold.cpu.toFixed(2),
        warm_ms: +warmMs.toFixed(2),
        warm_cpu_ms: +warmCpuMs.toFixed(2),
        warm_best_ms: +bestMs.toFixed(2),
        cold_tokens_per_s: rate(coldMs),
        warm_tokens_per_s: rate(warmMs),
      }),
    );
  },
});
