// How far a compact KV cache moves a model's predictions from the f32 cache's, over one long sequence: the same
// tokens are prefilled chunk by chunk into an f32 cache and into a cache of each other type, and the logits of every
// position are compared. `splash bench kv` prints the figures; the suite checks the bound on short sequences.
//
// Per KV type and per prefix length (the statistics of positions [0, n) are those of an n-token sequence: causal):
//   argmaxAgreement   positions whose argmax equals the f32 cache's, as a fraction
//   maxDeltaLogprob   max over positions of |log p(t*) − log p_f32(t*)|, t* the f32 cache's argmax: how much the
//                     token greedy decoding picks changes in probability
//   meanKl            mean over positions of KL(p_f32 ‖ p) in nats
import { KV_TYPES, type KvType } from "../models/kv-type.ts";
import type { Model } from "../native/model.ts";

export type KvParityRow = { type: KvType; positions: number; argmaxAgreement: number; maxDeltaLogprob: number; meanKl: number };

// The bound `--kv-type auto` relies on: a type holds for a model when, at every length measured, its argmax agrees
// with the f32 cache's at 99% of positions or more and the greedy token's log-probability moves by at most 0.1.
export const KV_PARITY_BOUND = { argmaxAgreement: 0.99, maxDeltaLogprob: 0.1 } as const;

export function withinBound(r: KvParityRow): boolean {
  return r.argmaxAgreement >= KV_PARITY_BOUND.argmaxAgreement && r.maxDeltaLogprob <= KV_PARITY_BOUND.maxDeltaLogprob;
}

const PAGE_TOKENS = 64;

// log_softmax of one row, in place into out.
function logSoftmax(row: Float32Array, out: Float64Array): void {
  let max = -Infinity;
  for (let j = 0; j < row.length; j++) if (row[j]! > max) max = row[j]!;
  let sum = 0;
  for (let j = 0; j < row.length; j++) sum += Math.exp(row[j]! - max);
  const lse = max + Math.log(sum);
  for (let j = 0; j < row.length; j++) out[j] = row[j]! - lse;
}

// `models` maps each KV type to a loaded model with that type set (f32 is the reference and must be there); every
// model runs the same weights. `at` lists the prefix lengths to report (each ≤ tokens.length). `chunk` tokens go
// through each step (at most the models' maxStepTokens).
export function kvParity(models: Partial<Record<KvType, Model>>, tokens: Int32Array, at: readonly number[], chunk: number): KvParityRow[] {
  const ref = models.f32;
  if (!ref) throw new Error("kvParity: the f32 model is the reference");
  const types = KV_TYPES.filter((t) => t !== "f32" && models[t]);
  const V = ref.info.vocabSize;
  const T = tokens.length;
  const nPages = Math.ceil(T / PAGE_TOKENS);
  const pages = Int32Array.from({ length: nPages }, (_, i) => i);
  const caches = new Map([ref, ...types.map((t) => models[t]!)].map((m) => [m, m.createCache({ pageTokens: PAGE_TOKENS, nPages, nSlots: 1 })]));
  const stats = new Map(types.map((t) => [t, { agree: 0, maxDelta: 0, kl: 0 }]));
  const rows: KvParityRow[] = [];
  const marks = [...at].sort((a, b) => a - b);
  const lpRef = new Float64Array(V);
  const lp = new Float64Array(V);
  try {
    const logits = new Map([...caches.keys()].map((m) => [m, new Float32Array(chunk * V)]));
    for (let t0 = 0; t0 < T; t0 += chunk) {
      const n = Math.min(chunk, T - t0);
      for (const [m, cache] of caches) cache.step([{ slot: 0, nPast: t0, tokens: tokens.subarray(t0, t0 + n), pages, logits: logits.get(m)!.subarray(0, n * V) }]);
      for (let i = 0; i < n; i++) {
        logSoftmax(logits.get(ref)!.subarray(i * V, (i + 1) * V), lpRef);
        let best = 0;
        for (let j = 1; j < V; j++) if (lpRef[j]! > lpRef[best]!) best = j;
        for (const t of types) {
          logSoftmax(logits.get(models[t]!)!.subarray(i * V, (i + 1) * V), lp);
          let arg = 0;
          let kl = 0;
          for (let j = 0; j < V; j++) {
            if (lp[j]! > lp[arg]!) arg = j;
            kl += Math.exp(lpRef[j]!) * (lpRef[j]! - lp[j]!);
          }
          const s = stats.get(t)!;
          s.agree += arg === best ? 1 : 0;
          s.maxDelta = Math.max(s.maxDelta, Math.abs(lp[best]! - lpRef[best]!));
          s.kl += kl;
        }
        const done = t0 + i + 1;
        if (marks.includes(done))
          for (const t of types) {
            const s = stats.get(t)!;
            rows.push({ type: t, positions: done, argmaxAgreement: s.agree / done, maxDeltaLogprob: s.maxDelta, meanKl: s.kl / done });
          }
      }
    }
  } finally {
    for (const c of caches.values()) c.free();
  }
  return rows;
}
