// χ² goodness of fit of sampled token counts against a distribution, for the sampling tests.

// χ² critical values at α = 0.001 for 1..19 degrees of freedom
const CRITICAL = [10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588, 31.264, 32.909, 34.528, 36.123, 37.697, 39.252, 40.79, 42.312, 43.82];

// χ² of counts against p (bins with an expected count under 5 merged, smallest first); Infinity when a token p rules
// out was counted. critical: the value at α = 0.001 for the bins' degrees of freedom (NaN past the table).
export function chiSquare(counts: Map<number, number>, p: Float32Array | Float64Array, n: number): { chi: number; critical: number; bins: number } {
  for (const [t, c] of counts) if (c > 0 && !(p[t]! > 0)) return { chi: Infinity, critical: 0, bins: 0 };
  const support = [...p.keys()].filter((t) => p[t]! > 0).sort((a, b) => p[a]! - p[b]!);
  const bins: { expected: number; observed: number }[] = [];
  let pending = { expected: 0, observed: 0 };
  for (const t of support) {
    pending = { expected: pending.expected + p[t]! * n, observed: pending.observed + (counts.get(t) ?? 0) };
    if (pending.expected >= 5) bins.push(pending), (pending = { expected: 0, observed: 0 });
  }
  if (pending.expected > 0) bins.length ? ((bins.at(-1)!.expected += pending.expected), (bins.at(-1)!.observed += pending.observed)) : bins.push(pending);
  const chi = bins.reduce((s, b) => s + (b.observed - b.expected) ** 2 / b.expected, 0);
  return { chi, critical: CRITICAL[Math.min(bins.length - 1, CRITICAL.length) - 1] ?? NaN, bins: bins.length };
}
