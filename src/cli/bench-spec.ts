// `splash bench spec`: what speculative decoding buys on the embedded model. Coding prompts of the kind the
// model was trained on, written for this benchmark (none is in its training data), answered greedily through the
// engine with no drafter, with the MTP layer, with the DFlash drafter and with the DFlash2 drafter, at 1 and at 4
// concurrent streams.
//
// Reports, per drafter: mean acceptance length (tokens per verify cycle, the target's own included), the drafts
// verified per cycle (the adaptive length), the acceptance rate per draft position (cycles that kept draft j of those
// that verified it) — also with every cycle at the drafter's longest block, the drafter's own acceptance curve —
// and the decode speedup over no drafter: generated tokens per second of wall time, and per
// second of this process's CPU time (the steadier figure when other work shares the machine). Each group of prompts
// runs under every drafter back to back, so a change in the machine's load hits all alike; figures are medians over
// rounds. Every drafter's output must equal the output without one (greedy
// speculation is lossless): the run fails otherwise. Runs on the backend asked for (--backend; the spec's
// measuredSpeedup keeps one entry per backend, which --draft auto reads there). Ends with one JSON line.
import { join } from "node:path";
import { endOfTurnTokens, renderPrompt } from "../chat/generate.ts";
import type { Conversation } from "../chat/ir.ts";
import { ChatTemplate } from "../chat/template.ts";
import { createEngine, type SplashEngine } from "../engine/engine.ts";
import { nativeStepModel } from "../engine/native-runner.ts";
import type { Sampling, SpeculationCounts } from "../engine/types.ts";
import { DRAFT_METHODS, type DraftMethod, type Drafter } from "../models/spec.ts";
import { log } from "../log.ts";
import { Model, NATIVE_QUANT, type DrafterOptions } from "../native/model.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { command, intOption, parseOption } from "./_command.ts";
import { loadFlags, parseLoadFlags, parseQuant, quantFlag } from "./_load-flags.ts";
import { z } from "zod";

const MODEL_DIR = join(import.meta.dir, "..", "..", "models", "splash-tiny");

const ASKS = [
  "Write a Python function that returns the n-th Fibonacci number.",
  "Write a Python function that checks whether a string is a palindrome, ignoring case.",
  "Write a Python function that flattens a nested list of lists.",
  "Write a Python function that counts how often each word occurs in a text.",
  "Write a Python function that merges two sorted lists into one sorted list.",
  "Write a Python function that returns the largest prime factor of an integer.",
  "Write a Python function that removes duplicate items from a list while keeping their order.",
  "Write a Python function that converts a temperature from Celsius to Fahrenheit.",
  "Write a Python function that returns the transpose of a matrix given as a list of rows.",
  "Write a Python function that parses a query string into a dictionary.",
  'def chunk(items, size):\n    """Split a list into consecutive chunks of the given size."""',
  'def is_valid_identifier(name):\n    """Return True if name is a valid Python identifier that is not a keyword."""',
  'def moving_average(values, window):\n    """Return the moving averages of a sequence over a sliding window."""',
  'def read_json_lines(path):\n    """Read a file with one JSON object per line and return the list of objects."""',
  'def camel_to_snake(name):\n    """Convert a camelCase name to snake_case."""',
  'def gcd(a, b):\n    """Return the greatest common divisor of two integers."""',
];

const GREEDY: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const DRAFTERS = DRAFT_METHODS;
const SPECULATING = DRAFTERS.filter((d): d is Drafter => d !== "none");

type Answer = { tokens: number[]; spec?: SpeculationCounts };
type Timing = { wallMs: number; cpuMs: number };

function drafterOptions(d: DraftMethod): DrafterOptions | undefined {
  if (d === "none") return undefined;
  return d === "mtp" ? { kind: d } : { kind: d, dir: join(MODEL_DIR, d) };
}
const perDrafter = <T>(f: () => T): Record<DraftMethod, T> => Object.fromEntries(DRAFTERS.map((d) => [d, f()])) as Record<DraftMethod, T>;

async function answer(engine: SplashEngine, prompt: Int32Array, maxTokens: number, stop: number[]): Promise<Answer> {
  const out: Answer = { tokens: [] };
  for await (const ev of engine.generate({ prompt, maxTokens, sampling: GREEDY, stopTokens: stop, signal: new AbortController().signal })) {
    if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
    else if (ev.type === "done" && ev.speculation) out.spec = ev.speculation;
  }
  return out;
}

// A group of prompts answered at once (one per stream), timed.
async function group(engine: SplashEngine, prompts: Int32Array[], maxTokens: number, stop: number[]): Promise<{ answers: Answer[] } & Timing> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const answers = await Promise.all(prompts.map((p) => answer(engine, p, maxTokens, stop)));
  const cpu = process.cpuUsage(cpu0);
  return { answers, wallMs: performance.now() - t0, cpuMs: (cpu.user + cpu.system) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export default command({
  meta: { name: "spec", description: "Speculative decoding on the embedded model: acceptance and decode speedup of MTP, DFlash and DFlash2 at 1 and 4 streams" },
  args: {
    rounds: { type: "string", description: "Rounds per drafter and stream count (default 3)" },
    maxTokens: { type: "string", description: "Tokens per answer at most (default 160)" },
    quant: quantFlag("bf16, what serve loads the embedded model at"),
    backend: loadFlags.backend,
    threads: loadFlags.threads,
  },
  async run({ args }) {
    const name = "bench spec";
    const rounds = args.rounds === undefined ? 3 : parseOption(name, "rounds", intOption(1, 100), args.rounds);
    const maxTokens = args.maxTokens === undefined ? 160 : parseOption(name, "max-tokens", intOption(8, 4096), args.maxTokens);
    const quant = NATIVE_QUANT[parseQuant(name, args.quant) ?? "bf16"];
    const { backend, threads } = parseLoadFlags(name, args);

    const tokenizer = await Tokenizer.load(MODEL_DIR);
    const template = ChatTemplate.load(MODEL_DIR);
    const conv = (text: string): Conversation => ({
      messages: [{ role: "user", content: [{ type: "text", text }] }],
      tools: [],
      toolChoice: "auto",
      parallelToolCalls: true,
      thinking: { enabled: false },
      responseFormat: { type: "text" },
    });
    const prompts = ASKS.map((a) => renderPrompt({ tokenizer, template }, conv(a)).ids);
    const stop = endOfTurnTokens(tokenizer);
    tokenizer.free();

    const engines = new Map<DraftMethod, { model: Model; engine: SplashEngine }>();
    for (const d of DRAFTERS) {
      const model = await Model.load(MODEL_DIR, { threads, quant, drafter: drafterOptions(d), ...(backend ? { backend } : {}) });
      engines.set(d, { model, engine: createEngine(nativeStepModel(model), { kvBudget: 256 * 2 ** 20, prefixCache: false }) });
    }
    const runsOn = engines.get("none")!.model.info.backend;
    // per stream count and drafter: every round's total time, and the answers of the first round
    const timings: Record<number, Record<DraftMethod, Timing[]>> = {};
    const answers: Record<number, Record<DraftMethod, Answer[]>> = {};
    const fixedRuns = perDrafter<Timing[]>(() => []);
    const fixedAnswers = perDrafter<Answer[]>(() => []);
    try {
      for (const streams of [1, 4]) {
        timings[streams] = perDrafter<Timing[]>(() => []);
        answers[streams] = perDrafter<Answer[]>(() => []);
        for (const d of DRAFTERS) await group(engines.get(d)!.engine, prompts.slice(0, streams), 16, stop); // warm-up
        for (let r = 0; r < rounds; r++) {
          const total = perDrafter<Timing>(() => ({ wallMs: 0, cpuMs: 0 }));
          /* each group of `streams` prompts runs under every drafter back to back, so load changes hit all alike */
          for (let g = 0; g < prompts.length; g += streams) {
            for (const d of DRAFTERS) {
              const res = await group(engines.get(d)!.engine, prompts.slice(g, g + streams), maxTokens, stop);
              total[d].wallMs += res.wallMs;
              total[d].cpuMs += res.cpuMs;
              if (r === 0) answers[streams]![d].push(...res.answers);
            }
          }
          for (const d of DRAFTERS) timings[streams]![d].push(total[d]);
          if (streams === 1) {
            /* the drafters' own acceptance, at their longest block every cycle (a second engine on the same model;
               never two steps at once) */
            for (const d of SPECULATING) {
              const { model } = engines.get(d)!;
              const fixedEngine = createEngine(nativeStepModel(model), { kvBudget: 64 * 2 ** 20, prefixCache: false, draftLength: model.drafter!.maxDraft });
              let wallMs = 0;
              let cpuMs = 0;
              const got: Answer[] = [];
              for (const p of prompts) {
                const res = await group(fixedEngine, [p], maxTokens, stop);
                wallMs += res.wallMs;
                cpuMs += res.cpuMs;
                got.push(...res.answers);
              }
              await fixedEngine.close();
              fixedRuns[d].push({ wallMs, cpuMs });
              if (r === 0) fixedAnswers[d] = got;
            }
          }
          for (const d of SPECULATING) {
            const c = engines.get(d)!.engine.scheduler.policy?.costs();
            if (c) log.info(`  ${d} costs learned (CPU): step ${c.a.toFixed(2)} + ${c.b.toFixed(2)}·rows + ${c.c.toFixed(2)}·[drafting] + ${c.d.toFixed(2)}·drafts ms`);
          }
          log.info(`${streams} stream${streams > 1 ? "s" : ""}, round ${r + 1}: ${DRAFTERS.map((d) => `${d} ${total[d].wallMs.toFixed(0)} ms (${total[d].cpuMs.toFixed(0)} ms CPU)`).join(", ")}`);
        }
      }
    } finally {
      for (const { model, engine } of engines.values()) {
        await engine.close();
        model.free();
      }
    }

    const reference = answers[1]!.none.map((a) => a.tokens);
    const same = (as: Answer[]) => JSON.stringify(as.map((a) => a.tokens)) === JSON.stringify(reference);
    const lossless = [1, 4].every((st) => DRAFTERS.every((d) => same(answers[st]![d]))) && SPECULATING.every((d) => same(fixedAnswers[d]));
    const tokens = reference.reduce((n, t) => n + t.length, 0);
    const rate = (ts: Timing[], key: "wallMs" | "cpuMs") => median(ts.map((t) => (tokens / t[key]) * 1000));
    // acceptance length and the rate of each draft position (cycles that kept draft j of those that verified it)
    const acceptance = (as: Answer[]) => {
      const specs = as.map((a) => a.spec).filter((s): s is SpeculationCounts => s !== undefined);
      const sum = (f: (s: SpeculationCounts) => number) => specs.reduce((n, s) => n + f(s), 0);
      const cycles = sum((s) => s.cycles);
      const positions = (specs[0]?.acceptedAt ?? []).map((_, j) => {
        const verified = sum((s) => s.verifiedAt![j]!);
        return verified ? Number((sum((s) => s.acceptedAt![j]!) / verified).toFixed(3)) : null;
      });
      return {
        length: cycles ? Number(((sum((s) => s.accepted) + cycles) / cycles).toFixed(3)) : 1,
        perCycle: cycles ? Number((sum((s) => s.drafted) / cycles).toFixed(2)) : 0,
        positions,
      };
    };
    const table: Record<string, unknown>[] = [];
    for (const streams of [1, 4]) {
      const by = timings[streams]!;
      for (const d of DRAFTERS) {
        const acc = acceptance(answers[streams]![d]);
        const positions = acc.positions;
        const row = {
          streams,
          drafter: d,
          tokensPerSecond: Number(rate(by[d], "wallMs").toFixed(1)),
          tokensPerCpuSecond: Number(rate(by[d], "cpuMs").toFixed(1)),
          speedup: Number((rate(by[d], "wallMs") / rate(by.none, "wallMs")).toFixed(2)),
          cpuSpeedup: Number((rate(by[d], "cpuMs") / rate(by.none, "cpuMs")).toFixed(2)),
          acceptanceLength: acc.length,
          draftsPerCycle: acc.perCycle,
          acceptedPerPosition: positions,
        };
        table.push(row);
        log.info(`${streams} stream${streams > 1 ? "s" : ""} ${d}: ${row.tokensPerSecond} tokens/s (${row.speedup}× wall, ${row.cpuSpeedup}× CPU time), acceptance length ${row.acceptanceLength} with ${row.draftsPerCycle} drafts a cycle${positions.length ? `, accepted per position ${positions.join(" ")}` : ""}`);
      }
    }
    const fixed = SPECULATING.map((d) => {
      const acc = acceptance(fixedAnswers[d]);
      const row = {
        drafter: d,
        draftsPerCycle: acc.perCycle,
        acceptanceLength: acc.length,
        acceptedPerPosition: acc.positions,
        speedup: Number((rate(fixedRuns[d], "wallMs") / rate(timings[1]!.none, "wallMs")).toFixed(2)),
        cpuSpeedup: Number((rate(fixedRuns[d], "cpuMs") / rate(timings[1]!.none, "cpuMs")).toFixed(2)),
      };
      log.info(`1 stream ${d}, every cycle at ${row.draftsPerCycle} drafts: acceptance length ${row.acceptanceLength}, accepted per position ${acc.positions.join(" ")}; ${row.speedup}× wall, ${row.cpuSpeedup}× CPU time`);
      return row;
    });
    if (!lossless) log.error("a drafter changed the greedy output: speculation is not lossless");
    console.log(JSON.stringify({ bench: "spec", model: "splash-tiny", backend: runsOn, quant, threads, prompts: prompts.length, maxTokens, rounds, generatedTokens: tokens, lossless, results: table, longestBlock: fixed }));
    if (!lossless) process.exitCode = 1;
  },
});
