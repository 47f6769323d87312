// `splash run [MODEL] PROMPT`: one answer, streamed to stdout. Reasoning goes to stderr (dimmed on a terminal that
// takes colour), so `splash run … > answer.txt` keeps only the answer. PROMPT "-" reads the prompt from stdin. No tools
// are offered, so tool-call markup the model writes is answer text.
import type { Conversation, GenerationOptions } from "../chat/ir.ts";
import { DEFAULT_SAMPLING } from "../api/options.ts";
import { ensureModelFiles } from "../models/resolve.ts";
import { loadModel } from "../models/load.ts";
import { DRAFT_CHOICES } from "../models/drafter.ts";
import { z } from "zod";
import { CliError, command, floatOption, intOption, parseOption, UsageError } from "./_command.ts";
import { loadFlags, parseLoadFlags } from "./_load-flags.ts";
import { wantsColor } from "./usage.ts";

const DIM = "\x1b[2m";
const RESET = "\x1b[0m";

export default command({
  meta: { name: "run", description: "Answer one prompt and stream it to stdout" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id or a checkpoint directory (optional)" },
    prompt: { type: "positional", required: false, description: "The prompt, or - to read it from stdin" },
    maxTokens: { type: "string", description: "Most tokens to generate (default: the model's output limit)" },
    temperature: { type: "string", description: "Sampling temperature; 0 = greedy (default: the model's recommendation)" },
    seed: { type: "string", description: "Sampling seed, for reproducible answers" },
    draft: { type: "enum", options: [...DRAFT_CHOICES], default: "auto", description: "Speculative drafter (auto: the model's measured best)" },
    ...loadFlags,
    think: { type: "boolean", default: true, description: "Let the model reason before answering", negativeDescription: "Answer without reasoning first" },
  },
  async run({ args }) {
    // [MODEL] PROMPT: with one positional it is the prompt.
    const [modelArg, promptArg] = args.prompt === undefined ? [undefined, args.model] : [args.model, args.prompt];
    if (promptArg === undefined) throw new UsageError("missing PROMPT", "run");
    const prompt = promptArg === "-" ? await Bun.stdin.text() : promptArg;
    if (prompt.trim() === "") throw new UsageError("the prompt is empty", "run");
    const maxTokens = args.maxTokens === undefined ? undefined : parseOption("run", "max-tokens", intOption(1), args.maxTokens);
    const temperature = args.temperature === undefined ? undefined : parseOption("run", "temperature", floatOption(0, 2), args.temperature);
    const seed = args.seed === undefined ? undefined : parseOption("run", "seed", intOption(0, 2 ** 32 - 1), args.seed);
    const draft = parseOption("run", "draft", z.enum(DRAFT_CHOICES), args.draft);
    const load = parseLoadFlags("run", args);

    const resolved = await ensureModelFiles(modelArg, { interactive: process.stdin.isTTY === true && promptArg !== "-" });
    const loaded = await loadModel(resolved, { draft, ...load });
    const abort = new AbortController();
    const onInterrupt = () => abort.abort();
    process.once("SIGINT", onInterrupt);
    try {
      const conversation: Conversation = {
        messages: [{ role: "user", content: [{ type: "text", text: prompt }] }],
        tools: [],
        toolChoice: "auto",
        parallelToolCalls: true,
        thinking: { enabled: args.think },
        responseFormat: { type: "text" },
      };
      const sampling = { ...DEFAULT_SAMPLING, ...loaded.sampling, ...(temperature !== undefined ? { temperature } : {}), ...(seed !== undefined ? { seed } : {}) };
      const options: GenerationOptions = { maxTokens: maxTokens ?? loaded.chat.maxOutputTokens, stop: [], sampling, signal: abort.signal };
      await stream(loaded.chat.generate(conversation, options));
    } finally {
      process.off("SIGINT", onInterrupt);
      await loaded.close();
    }
  },
});

// Writes the events: answer to stdout, reasoning to stderr, and a progress line while a long prompt is processed.
async function stream(events: AsyncIterable<import("../chat/ir.ts").ChatEvent>): Promise<void> {
  const tty = process.stderr.isTTY === true;
  const dim = wantsColor(process.stderr);
  let progress: ReturnType<typeof setTimeout> | undefined;
  let progressShown = false;
  const clearProgress = () => {
    if (progress) clearTimeout(progress);
    progress = undefined;
    if (progressShown && tty) process.stderr.write("\r\x1b[K");
    progressShown = false;
  };
  let inReasoning = false;
  let wroteContent = false;
  for await (const ev of events) {
    switch (ev.type) {
      case "start": {
        const uncached = ev.promptTokens - ev.cachedPromptTokens;
        const started = performance.now();
        // Only prompts that take a while get a line; it updates each second until the first token.
        const tick = () => {
          const s = ((performance.now() - started) / 1000).toFixed(0);
          process.stderr.write(tty ? `\r\x1b[Kprocessing a ${uncached}-token prompt… ${s} s` : `processing a ${uncached}-token prompt… ${s} s\n`);
          progressShown = true;
          progress = setTimeout(tick, 1000);
        };
        progress = setTimeout(tick, 1500);
        break;
      }
      case "reasoning":
        clearProgress();
        if (!inReasoning && dim) process.stderr.write(DIM);
        inReasoning = true;
        process.stderr.write(ev.text);
        break;
      case "content":
        clearProgress();
        if (inReasoning) {
          process.stderr.write(dim ? `${RESET}\n` : "\n");
          inReasoning = false;
        }
        process.stdout.write(ev.text);
        wroteContent = true;
        break;
      case "done":
        clearProgress();
        if (inReasoning && dim) process.stderr.write(RESET);
        if (wroteContent) process.stdout.write("\n");
        if (ev.finishReason === "length") process.stderr.write("(stopped at the output limit; raise --max-tokens for more)\n");
        if (ev.finishReason === "cancelled") throw new CliError("interrupted");
        break;
      default:
        break;
    }
  }
}
