// Which supported models this machine can run, per weight level: a level fits when its fixed part (weights plus
// the default drafter) and one sequence of FIT_CONTEXT tokens (KV pages + GDN state) fit in the memory Splash may
// use for models. What is left goes to sequence state; `tokensOfKv` says how much context that is.
import { formatBytes } from "../format.ts";
import type { Machine } from "../machine.ts";
import { memoryForModels } from "../engine/memory-plan.ts";
import { CliError } from "../cli/_command.ts";
import type { KvType } from "./kv-type.ts";
import { hubSpecs } from "./registry.ts";
import { DRAFTER_NAMES, type DraftMethod, type Format, type HubModelSpec, type Quant } from "./spec.ts";

// An agent's first prompt is 15–25K tokens; a model that cannot hold one such conversation is not usable.
const FIT_CONTEXT = 32768;

export type LevelFit = { level: Quant | Format; fixedBytes: number; fits: boolean; tokensOfKv: number };
export type ModelFit = { id: string; displayName: string; levels: LevelFit[] };

function levelFit(spec: HubModelSpec, level: Quant | Format, available: number): LevelFit | undefined {
  const plan = spec.memory;
  if (!plan) return undefined;
  const f = plan.fixed[level];
  const draft = spec.draft.default ?? "none";
  const fixedBytes = (draft === "none" ? null : f[draft]) ?? f.none;
  const kv = spec.cache.kv; // what --kv-type auto gives
  const perToken = plan.kvBytesPerToken[kv] + (draft === "mtp" && f.mtp !== null ? plan.mtpKvBytesPerToken[kv] : 0);
  const left = available - fixedBytes - plan.stateBytesPerSequence;
  const tokensOfKv = Math.max(0, Math.floor(left / perToken));
  return { level, fixedBytes, fits: tokensOfKv >= FIT_CONTEXT, tokensOfKv };
}

export function modelFit(m: Machine, specs: HubModelSpec[] = hubSpecs()): ModelFit[] {
  const available = memoryForModels(m);
  return specs.map((s) => ({
    id: s.id,
    displayName: s.displayName,
    levels: (["q4", "q8", "bf16", "mlx-4bit", "mlx-8bit"] as const).flatMap((l) => levelFit(s, l, available) ?? []),
  }));
}

// `splash doctor`'s lines: a header, then one line per model.
export function describeModelFit(fits: ModelFit[]): string[] {
  const header = `models     weights + default drafter per level; ok = one ${FIT_CONTEXT / 1024}K-token conversation fits beside them`;
  return [
    header,
    ...fits.map((f) => {
      const levels = f.levels
        .filter((l) => !l.level.startsWith("mlx"))
        .map((l) => `${l.level} ${l.fits ? "ok" : "no"} (${formatBytes(l.fixedBytes)}${l.fits ? `, KV for ${Math.floor(l.tokensOfKv / 1024)}K tokens` : ""})`);
      return `  ${f.id.padEnd(16)} ${levels.join(" · ")}`;
    }),
  ];
}

// ---- `splash doctor --plan`: how many sequences of a context fit ----

// Memory beside the weights that the plan does not size from the spec: the activations of a 512-token step
// (≈ 0.2 GiB at Qwen3.8-27B's widths: the residual rows, one layer's projections, 64 rows of 248K logits), the
// drafter's verify buffers (≈ 0.15 GiB: 32 rows of logits, 24 draft distributions, the kept GDN inputs) and the
// Splash process itself (Bun, the tokenizer, the grammar engine: 0.15 GiB resident serving splash-tiny, more with a
// 248K-token vocabulary).
export const RUNTIME_RESERVE = 2 ** 30;
// Pages of the engine's KV cache: a sequence's KV is held in whole pages.
const PAGE_TOKENS = 64;

export type PlanOptions = {
  memory: number; // bytes for models (weights, drafter, runtime and sequence state together)
  context: number; // tokens of each sequence (prompt + output)
  kvType: KvType;
  level: Quant | Format; // weights: a Splash level or an MLX checkpoint
  draft: DraftMethod;
};

export type SequencePlan = PlanOptions & {
  model: string;
  fixed: { weights: number; drafter: number; reserve: number; total: number };
  // Each sequence: its KV (whole pages), the drafter's KV, its GDN state slot and a prefix-cache snapshot of it (the
  // engine keeps as many snapshot slots as running sequences, so a conversation's next turn resumes).
  perSequence: { kv: number; drafterKv: number; state: number; snapshot: number; total: number };
  sequences: number; // that fit at once beside the fixed part
};

// The drafter's KV bytes per token at a KV type, or null when the model has no such drafter at this level.
function drafterKvPerToken(spec: HubModelSpec, draft: PlanOptions["draft"], level: Quant | Format, kvType: KvType): number | null {
  const plan = spec.memory!;
  const f = plan.fixed[level];
  if (draft === "none") return 0;
  if (draft === "mtp") return f.mtp === null ? null : plan.mtpKvBytesPerToken[kvType];
  const kv = draft === "dflash" ? plan.dflashKvBytesPerToken : plan.dflash2KvBytesPerToken;
  return f[draft] === null || kv === null ? null : kv[kvType];
}

const drafterName = (d: DraftMethod) => (d === "none" ? "no drafter" : `${DRAFTER_NAMES[d]} drafter`);

export function planSequences(spec: HubModelSpec, o: PlanOptions): SequencePlan {
  const plan = spec.memory;
  if (!plan) throw new Error(`${spec.id}: the spec has no memory plan`);
  const f = plan.fixed[o.level];
  const withDrafter = o.draft === "none" ? f.none : f[o.draft];
  const drafterKv = drafterKvPerToken(spec, o.draft, o.level, o.kvType);
  if (withDrafter === null || drafterKv === null) throw new CliError(`${spec.displayName} has no ${drafterName(o.draft)} at ${o.level}`, "use --draft none, or other --weights");
  const fixed = { weights: f.none, drafter: withDrafter - f.none, reserve: RUNTIME_RESERVE, total: withDrafter + RUNTIME_RESERVE };
  const tokens = Math.ceil(o.context / PAGE_TOKENS) * PAGE_TOKENS;
  const mtpState = o.draft === "mtp" ? plan.mtpStateBytes : 0;
  const state = plan.stateBytesPerSequence + mtpState;
  const perSequence = { kv: tokens * plan.kvBytesPerToken[o.kvType], drafterKv: tokens * drafterKv, state, snapshot: state, total: 0 };
  perSequence.total = perSequence.kv + perSequence.drafterKv + perSequence.state + perSequence.snapshot;
  const sequences = Math.max(0, Math.floor((o.memory - fixed.total) / perSequence.total));
  return { ...o, model: spec.id, fixed, perSequence, sequences };
}

// `splash doctor --plan`'s lines.
export function describeSequencePlan(p: SequencePlan, memorySource: string, f32Sequences: number): string[] {
  const b = formatBytes;
  const ctx = p.context % 1024 === 0 ? `${p.context / 1024}K` : String(p.context);
  const drafter = drafterName(p.draft);
  const s = p.perSequence;
  return [
    `plan       ${p.model}: ${p.level} weights, ${drafter}, ${p.kvType} KV, ${ctx}-token sequences, in ${b(p.memory)} for models (${memorySource})`,
    `fixed      ${b(p.fixed.total)}: weights ${b(p.fixed.weights)}${p.fixed.drafter ? ` + drafter ${b(p.fixed.drafter)}` : ""} + runtime reserve ${b(p.fixed.reserve)} (activations, drafter buffers, the process)`,
    `sequence   ${b(s.total)} each: KV ${b(s.kv)}${s.drafterKv ? ` + drafter KV ${b(s.drafterKv)}` : ""} + GDN state ${b(s.state)} + its prefix-cache snapshot ${b(s.snapshot)}`,
    `fits       ${p.sequences} sequence${p.sequences === 1 ? "" : "s"} of ${ctx} at once (${b(p.sequences * s.total)} of state)${p.kvType === "f32" ? "" : `; with f32 KV: ${f32Sequences}`}`,
  ];
}
