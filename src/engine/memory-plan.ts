// The memory plan of one loaded model: a fixed part (weights, drafter, scratch) and a budget for sequence state,
// split into GDN state slots and KV pages. Sizes come from the model's own size functions (StepModel.pageBytes,
// slotBytes: the ones the native allocator uses), so what is planned is what is allocated.
//
//   memory for models ─┬─ fixed: weights + drafter + scratch
//                      └─ state budget (--kv-budget caps it) ─┬─ nSlots × slotBytes   running sequences + snapshots
//                                                             └─ nPages × pageBytes   KV of full-attention layers
import { formatBytes } from "../format.ts";
import type { Machine } from "../machine.ts";
import type { StepModel } from "./runner.ts";

// Apple silicon lets the GPU wire about three quarters of unified memory by default (36 GB and up); the rest is the
// system's. Once the native library has reported the GPU (Machine.metal), Metal's own figure replaces it.
const MAC_SHARE = 0.75;
// Elsewhere: what can be allocated now without swapping, and never more than this share of the total.
const OTHER_SHARE = 0.9;

// Bytes Splash may use for models (fixed parts and sequence state together) on this machine.
export function memoryForModels(m: Machine): number {
  if (m.os === "darwin") return Math.floor(macGpuMemory(m));
  return Math.floor(Math.min(m.availableMemory, m.totalMemory * OTHER_SHARE));
}

// What a Mac's GPU keeps resident: Metal's recommended working set (MTLDevice.recommendedMaxWorkingSetSize, which
// follows the wired-memory limit), and no more than that limit (sysctl iogpu.wired_limit_mb) when one is set.
function macGpuMemory(m: Machine): number {
  const g = m.metal;
  if (!g?.recommendedWorkingSet) return m.totalMemory * MAC_SHARE;
  return g.wiredLimit ? Math.min(g.recommendedWorkingSet, g.wiredLimit) : g.recommendedWorkingSet;
}

function macRule(m: Machine): string {
  const g = m.metal;
  if (!g?.recommendedWorkingSet) return `${MAC_SHARE * 100}% of ${formatBytes(m.totalMemory)} unified memory`;
  const wired = g.wiredLimit ? `, wired limit ${formatBytes(g.wiredLimit)}` : "";
  return `the GPU's recommended working set of ${formatBytes(m.totalMemory)} unified memory (Metal${wired})`;
}

// The default state budget of a model whose fixed part is `fixedBytes`: the rest of the memory for models.
export function defaultKvBudget(m: Machine, fixedBytes: number): number {
  return Math.max(0, memoryForModels(m) - fixedBytes);
}

// How memoryForModels is derived on this machine.
export function memoryRule(m: Machine): string {
  return m.os === "darwin" ? macRule(m) : `available memory, at most ${OTHER_SHARE * 100}% of ${formatBytes(m.totalMemory)}`;
}

// How the default is derived, for `splash doctor` and the startup log.
export function describeDefaultBudget(m: Machine): string {
  return `${formatBytes(memoryForModels(m))} for models (${memoryRule(m)}); a model's KV budget is that minus its weights and scratch`;
}

export type MemoryPlanOptions = {
  kvBudget?: number; // bytes; undefined = the machine's default
  pageTokens: number;
  maxSeqs: number; // running sequences at most
};

export type MemoryPlan = {
  budget: number; // the state budget asked for (option or default)
  budgetSource: "--kv-budget" | "default";
  fixedBytes: number;
  pageTokens: number;
  pageBytes: number;
  nPages: number;
  slotBytes: number;
  nSlots: number;
  maxSeqs: number; // at most nSlots
  stateBytes: number; // nPages × pageBytes + nSlots × slotBytes ≤ budget
};

export class KvBudgetTooSmall extends Error {
  override name = "KvBudgetTooSmall";
}

// Slots: one per running sequence plus as many again for prefix-cache snapshots, but at most half the budget (the
// KV of long contexts needs the rest). Pages: what remains, but never more than maxSeqs full contexts can use.
export function planMemory(model: Pick<StepModel, "fixedBytes" | "pageBytes" | "slotBytes" | "contextTokens">, options: MemoryPlanOptions, m: Machine): MemoryPlan {
  const budget = options.kvBudget ?? defaultKvBudget(m, model.fixedBytes);
  const pageBytes = model.pageBytes(options.pageTokens);
  const slotBytes = model.slotBytes;
  const nSlots = Math.min(2 * options.maxSeqs, Math.floor(budget / 2 / slotBytes));
  if (nSlots < 1 || budget - slotBytes < pageBytes) {
    throw new KvBudgetTooSmall(
      `a KV budget of ${formatBytes(budget)} cannot hold one sequence (a state slot is ${formatBytes(slotBytes)}, a page of ${options.pageTokens} tokens ${formatBytes(pageBytes)})`,
    );
  }
  const pagesPerContext = Math.ceil(model.contextTokens / options.pageTokens);
  const nPages = Math.min(Math.floor((budget - nSlots * slotBytes) / pageBytes), options.maxSeqs * pagesPerContext);
  return {
    budget,
    budgetSource: options.kvBudget === undefined ? "default" : "--kv-budget",
    fixedBytes: model.fixedBytes,
    pageTokens: options.pageTokens,
    pageBytes,
    nPages,
    slotBytes,
    nSlots,
    maxSeqs: Math.min(options.maxSeqs, nSlots),
    stateBytes: nPages * pageBytes + nSlots * slotBytes,
  };
}

export function describeMemoryPlan(p: MemoryPlan): string {
  return (
    `KV budget ${formatBytes(p.budget)} (${p.budgetSource}) beside ${formatBytes(p.fixedBytes)} of weights and scratch: ` +
    `${p.nPages} pages × ${p.pageTokens} tokens (${formatBytes(p.nPages * p.pageBytes)}, ${p.nPages * p.pageTokens} tokens of KV) + ` +
    `${p.nSlots} state slots (${formatBytes(p.nSlots * p.slotBytes)}), up to ${p.maxSeqs} sequences at once`
  );
}
