// Which supported models this machine can run, per weight level: a level fits when its fixed part (weights plus
// the default drafter) and one sequence of FIT_CONTEXT tokens (KV pages + GDN state) fit in the memory Splash may
// use for models. What is left goes to sequence state; `tokensOfKv` says how much context that is.
import { formatBytes } from "../format.ts";
import type { Machine } from "../machine.ts";
import { memoryForModels } from "../engine/memory-plan.ts";
import { hubSpecs } from "./registry.ts";
import type { Format, HubModelSpec, Quant } from "./spec.ts";

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
  const perToken = plan.kvBytesPerToken + (draft === "mtp" && f.mtp !== null ? plan.mtpKvBytesPerToken : 0);
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
