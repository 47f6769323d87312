/// <reference lib="dom" />
// The engine panel: the served model, its memory plan and live figures, from GET /status.
import { formatBytes } from "../format.ts";
import type { FinishedGeneration } from "../server/recent-generations.ts";
import type { ModelStatus, ServerStatus } from "../server/status.ts";
import { compact, drawChart } from "./chart.ts";

const $ = (id: string) => document.getElementById(id)!;

function facts(dl: HTMLElement, rows: [string, string][]): void {
  dl.replaceChildren(
    ...rows.flatMap(([k, v]) => {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      return [dt, dd];
    }),
  );
}

const percent = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(part === whole || part === 0 ? 0 : 1)}%` : "–");
const ms = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(v >= 10_000 ? 0 : 1)} s` : `${Math.round(v)} ms`);

// What does not change while the server runs.
export function showModel(m: ModelStatus): void {
  const r = m.runtime;
  facts($("model-facts"), [
    ["model", m.id],
    ["backend", r.backend],
    ["weights", `${r.weights}, ${formatBytes(r.weightBytes)}`],
    ["context", `${m.contextLength.toLocaleString("en-US")} tokens`],
    ["max output", `${m.maxOutputTokens.toLocaleString("en-US")} tokens`],
    ["images", m.vision ? "yes" : "no"],
    ["drafter", m.engine.speculation?.drafter ?? "none"],
  ]);
  const p = r.memory;
  facts($("memory-plan"), [
    ["state memory", formatBytes(p.stateBytes)],
    ["budget", `${formatBytes(p.budget)} (${p.budgetSource})`],
    ["weights + scratch", formatBytes(p.fixedBytes)],
    ["KV pages", `${p.nPages} × ${p.pageTokens} tokens (${formatBytes(p.nPages * p.pageBytes)})`],
    ["state slots", `${p.nSlots} × ${formatBytes(p.slotBytes)}`],
    ["sequences at once", String(p.maxSeqs)],
  ]);
}

export function showFigures(status: ServerStatus, m: ModelStatus): void {
  const e = m.engine;
  $("running").textContent = String(e.running);
  $("queued").textContent = String(e.queued);

  const held = e.sequenceStateBytes ?? e.stateBytesInUse;
  const cached = e.stateBytesInUse - held;
  const width = (part: number) => `${e.stateBytesBudget > 0 ? (100 * part) / e.stateBytesBudget : 0}%`;
  $("memory-held").style.width = width(held);
  $("memory-cached").style.width = width(cached);
  $("memory-text").textContent =
    `${formatBytes(e.stateBytesInUse)} of ${formatBytes(e.stateBytesBudget)} in use (${percent(e.stateBytesInUse, e.stateBytesBudget)}): ` +
    `${formatBytes(held)} by running sequences, ${formatBytes(cached)} kept by the prefix cache`;

  const t = m.throughput;
  $("gen-rate").textContent = compact(t.generated.at(-1) ?? 0);
  $("prompt-rate").textContent = compact(t.prompt.at(-1) ?? 0);
  // The x axis spans what there is, from one minute up to the whole history.
  const span = Math.min(t.capacity, Math.max(Math.round(60 / t.intervalSeconds), t.generated.length));
  drawChart(
    $("chart"),
    [
      { values: t.prompt, className: "prompt" },
      { values: t.generated, className: "gen" },
    ],
    span,
  );
  $("chart-span").textContent = `tokens/s, last ${Math.round((span * t.intervalSeconds) / 60)} min`;

  const tk = m.tokens;
  $("cache-hits").textContent = tk.promptTokens ? `${percent(tk.cachedPromptTokens, tk.promptTokens)} of ${tk.promptTokens.toLocaleString("en-US")} prompt tokens` : "–";
  const s = e.speculation;
  $("speculation").textContent = !s
    ? "none"
    : s.cycles === 0
      ? `${s.drafter}: no cycles yet`
      : `${s.drafter}: ${percent(s.accepted, s.drafted)} of drafts accepted, ${((s.accepted + s.cycles) / s.cycles).toFixed(2)} tokens a cycle`;
  const ok = status.requests.filter((r) => r.status < 400).reduce((n, r) => n + r.count, 0);
  const failed = status.requests.filter((r) => r.status >= 400).reduce((n, r) => n + r.count, 0);
  $("request-counts").textContent = `${ok} ok, ${failed} failed`;

  $("recent").replaceChildren(...status.recent.slice(0, 12).map(recentRow));
}

function recentRow(g: FinishedGeneration): HTMLTableRowElement {
  const tr = document.createElement("tr");
  const cells = [
    new Date(g.at).toLocaleTimeString("en-GB"),
    g.surface,
    g.outcome,
    g.cachedPromptTokens ? `${g.promptTokens} (${g.cachedPromptTokens})` : String(g.promptTokens),
    String(g.completionTokens),
    g.ttftMs === null ? "–" : ms(g.ttftMs),
    ms(g.durationMs),
  ];
  for (const [i, text] of cells.entries()) {
    const td = document.createElement("td");
    td.textContent = text;
    if (i === 2 && g.outcome === "error") {
      td.className = "bad";
      td.title = g.error ?? "";
    }
    tr.append(td);
  }
  return tr;
}
