// What the server counts: GET /metrics renders it as Prometheus text with what each model's engine reports, and
// GET /status (status.ts) reads the same counters for the page.
import type { ChatModel, Usage } from "../chat/ir.ts";
import { ACCEPTANCE_BUCKETS } from "../engine/types.ts";
import { RecentGenerations, type FinishedGeneration } from "./recent-generations.ts";

type Labels = Record<string, string>;

const escape = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labelText = (labels: Labels) => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escape(v)}"`);
  return parts.length ? `{${parts.join(",")}}` : "";
};

class Counter {
  private values = new Map<string, { labels: Labels; value: number }>();
  add(labels: Labels, n = 1): void {
    const key = labelText(labels);
    const entry = this.values.get(key) ?? { labels, value: 0 };
    entry.value += n;
    this.values.set(key, entry);
  }
  value(labels: Labels): number {
    return this.values.get(labelText(labels))?.value ?? 0;
  }
  entries(): { labels: Labels; value: number }[] {
    return [...this.values.values()].map((e) => ({ labels: { ...e.labels }, value: e.value }));
  }
  lines(name: string): string[] {
    return [...this.values.values()].map((e) => `${name}${labelText(e.labels)} ${e.value}`);
  }
}

class Histogram {
  private series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(private buckets: number[]) {}
  observe(labels: Labels, value: number): void {
    const key = labelText(labels);
    const s = this.series.get(key) ?? { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
    this.buckets.forEach((b, i) => {
      if (value <= b) s.counts[i]!++;
    });
    s.sum += value;
    s.count++;
    this.series.set(key, s);
  }
  lines(name: string): string[] {
    const out: string[] = [];
    for (const s of this.series.values()) {
      this.buckets.forEach((b, i) => out.push(`${name}_bucket${labelText({ ...s.labels, le: String(b) })} ${s.counts[i]}`));
      out.push(`${name}_bucket${labelText({ ...s.labels, le: "+Inf" })} ${s.count}`);
      out.push(`${name}_sum${labelText(s.labels)} ${s.sum}`);
      out.push(`${name}_count${labelText(s.labels)} ${s.count}`);
    }
    return out;
  }
}

const TTFT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const TPOT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 1];

export class Metrics {
  private requests = new Counter();
  private streamErrors = new Counter();
  private promptTokens = new Counter();
  private cachedTokens = new Counter();
  private completionTokens = new Counter();
  private reasoningTokens = new Counter();
  private ttft = new Histogram(TTFT_BUCKETS);
  private tpot = new Histogram(TPOT_BUCKETS);
  private active = new Map<string, number>();
  readonly recent = new RecentGenerations(50);

  request(surface: string, status: number): void {
    this.requests.add({ surface, status: String(status) });
  }

  streamError(surface: string): void {
    this.streamErrors.add({ surface });
  }

  generationStarted(model: string): void {
    this.active.set(model, (this.active.get(model) ?? 0) + 1);
  }

  generationEnded(g: FinishedGeneration): void {
    this.active.set(g.model, (this.active.get(g.model) ?? 1) - 1);
    this.recent.add(g);
  }

  firstToken(model: string, seconds: number): void {
    this.ttft.observe({ model }, seconds);
  }

  // The mean interval between output tokens of one generation (prefill excluded).
  perToken(model: string, seconds: number): void {
    this.tpot.observe({ model }, seconds);
  }

  usage(model: string, u: Usage): void {
    this.promptTokens.add({ model }, u.promptTokens);
    this.cachedTokens.add({ model }, u.cachedPromptTokens);
    this.completionTokens.add({ model }, u.completionTokens);
    this.reasoningTokens.add({ model }, u.reasoningTokens);
  }

  // Requests by API surface and status, as splash_requests_total counts them.
  requestCounts(): { surface: string; status: number; count: number }[] {
    return this.requests.entries().map((e) => ({ surface: e.labels.surface!, status: Number(e.labels.status), count: e.value }));
  }

  activeGenerations(model: string): number {
    return this.active.get(model) ?? 0;
  }

  // Token counts of a model's finished generations.
  tokens(model: string): Usage {
    const labels = { model };
    return {
      promptTokens: this.promptTokens.value(labels),
      cachedPromptTokens: this.cachedTokens.value(labels),
      completionTokens: this.completionTokens.value(labels),
      reasoningTokens: this.reasoningTokens.value(labels),
    };
  }

  render(models: readonly ChatModel[]): string {
    const out: string[] = [];
    const block = (name: string, type: string, help: string, lines: string[]) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...lines);
    block("splash_requests_total", "counter", "HTTP requests by API surface and status.", this.requests.lines("splash_requests_total"));
    block("splash_stream_errors_total", "counter", "Streams that ended with an error event.", this.streamErrors.lines("splash_stream_errors_total"));
    block("splash_prompt_tokens_total", "counter", "Prompt tokens of finished generations.", this.promptTokens.lines("splash_prompt_tokens_total"));
    block("splash_cached_prompt_tokens_total", "counter", "Prompt tokens served from the prefix cache.", this.cachedTokens.lines("splash_cached_prompt_tokens_total"));
    block("splash_completion_tokens_total", "counter", "Generated tokens.", this.completionTokens.lines("splash_completion_tokens_total"));
    block("splash_reasoning_tokens_total", "counter", "Generated tokens spent on reasoning.", this.reasoningTokens.lines("splash_reasoning_tokens_total"));
    block("splash_time_to_first_token_seconds", "histogram", "Request arrival to first output token.", this.ttft.lines("splash_time_to_first_token_seconds"));
    block("splash_time_per_output_token_seconds", "histogram", "Mean interval between output tokens, per generation.", this.tpot.lines("splash_time_per_output_token_seconds"));
    const perModel = (name: string, type: string, help: string, value: (m: ChatModel) => number) =>
      block(name, type, help, models.map((m) => `${name}${labelText({ model: m.id })} ${value(m)}`));
    perModel("splash_generations_active", "gauge", "Generations this server is streaming or collecting.", (m) => this.activeGenerations(m.id));
    const stats = new Map(models.map((m) => [m.id, m.stats()]));
    perModel("splash_running_sequences", "gauge", "Sequences the engine is running.", (m) => stats.get(m.id)!.running);
    perModel("splash_queue_depth", "gauge", "Requests waiting for admission.", (m) => stats.get(m.id)!.queued);
    perModel("splash_state_memory_bytes", "gauge", "KV pages and recurrent state held by sequences and the prefix cache.", (m) => stats.get(m.id)!.stateBytesInUse);
    perModel("splash_state_memory_budget_bytes", "gauge", "Memory budget for sequence state.", (m) => stats.get(m.id)!.stateBytesBudget);
    const withSequenceBytes = models.filter((m) => stats.get(m.id)!.sequenceStateBytes !== undefined);
    block("splash_sequence_state_bytes", "gauge", "The part of state memory held by running sequences (the rest is evictable cache).", withSequenceBytes.map((m) => `splash_sequence_state_bytes${labelText({ model: m.id })} ${stats.get(m.id)!.sequenceStateBytes}`));
    perModel("splash_prompt_tokens_computed_total", "counter", "Prompt tokens the engine ran through the model (prefix-cache hits left out), since start.", (m) => stats.get(m.id)!.promptTokensComputed);
    perModel("splash_generated_tokens_total", "counter", "Tokens the engine handed to requests as they were made, since start.", (m) => stats.get(m.id)!.generatedTokens);
    perModel("splash_prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the prefix cache, since start.", (m) => stats.get(m.id)!.prefixCacheHitTokens);
    // The prefix cache by tier (memory, and disk where the engine has one).
    const tiers = models.flatMap((m) => {
      const t = stats.get(m.id)!.prefixCacheTiers;
      return t ? [{ model: m.id, t }] : [];
    });
    const byTier = (name: string, value: (tier: { hitTokens: number; bytes: number }) => number) =>
      tiers.flatMap(({ model, t }) => [["memory", t.memory] as const, ...(t.disk ? [["disk", t.disk] as const] : [])].map(([tier, v]) => `${name}${labelText({ model, tier })} ${value(v)}`));
    block("splash_prefix_cache_tier_hit_tokens_total", "counter", "Prompt tokens served from each tier of the prefix cache, since start.", byTier("splash_prefix_cache_tier_hit_tokens_total", (v) => v.hitTokens));
    block("splash_prefix_cache_bytes", "gauge", "Bytes each tier of the prefix cache holds (memory: evictable pages and snapshots; disk: entry files).", byTier("splash_prefix_cache_bytes", (v) => v.bytes));
    const disks = tiers.flatMap(({ model, t }) => (t.disk ? [{ labels: { model }, d: t.disk }] : []));
    const diskLines = (name: string, value: (d: NonNullable<typeof disks[number]>["d"]) => number) => disks.map(({ labels, d }) => `${name}${labelText(labels)} ${value(d)}`);
    block("splash_prefix_cache_disk_budget_bytes", "gauge", "Bytes the prefix cache's disk tier may hold (--disk-cache).", diskLines("splash_prefix_cache_disk_budget_bytes", (d) => d.budget));
    block("splash_prefix_cache_disk_entries", "gauge", "Entry files of the disk tier (pages and state snapshots).", diskLines("splash_prefix_cache_disk_entries", (d) => d.files));
    block(
      "splash_prefix_cache_disk_io_bytes_total",
      "counter",
      "Bytes the disk tier read and wrote, since start.",
      disks.flatMap(({ labels, d }) => [`splash_prefix_cache_disk_io_bytes_total${labelText({ ...labels, direction: "read" })} ${d.readBytes}`, `splash_prefix_cache_disk_io_bytes_total${labelText({ ...labels, direction: "written" })} ${d.writtenBytes}`]),
    );
    block("splash_prefix_cache_disk_refused_total", "counter", "Disk entries refused as damaged (deleted; their prefix was computed instead), since start.", diskLines("splash_prefix_cache_disk_refused_total", (d) => d.refused));
    block("splash_prefix_cache_disk_evicted_total", "counter", "Disk entries this server evicted to stay under the budget, since start.", diskLines("splash_prefix_cache_disk_evicted_total", (d) => d.evicted));
    // Speculative decoding, for models with a drafter: mean acceptance length = (accepted + cycles) / cycles.
    const spec = models.flatMap((m) => {
      const s = stats.get(m.id)!.speculation;
      return s ? [{ labels: { model: m.id, drafter: s.drafter }, s }] : [];
    });
    const specLines = (name: string, value: (s: NonNullable<ReturnType<ChatModel["stats"]>["speculation"]>) => number) => spec.map(({ labels, s }) => `${name}${labelText(labels)} ${value(s)}`);
    block("splash_spec_cycles_total", "counter", "Speculative verify cycles (each emits the accepted drafts plus one token).", specLines("splash_spec_cycles_total", (s) => s.cycles));
    block("splash_spec_draft_tokens_total", "counter", "Draft tokens verified.", specLines("splash_spec_draft_tokens_total", (s) => s.drafted));
    block("splash_spec_accepted_tokens_total", "counter", "Draft tokens accepted.", specLines("splash_spec_accepted_tokens_total", (s) => s.accepted));
    block("splash_spec_acceptance_length", "gauge", "Mean tokens per verify cycle since start, the target's own token included.", specLines("splash_spec_acceptance_length", (s) => (s.cycles ? (s.accepted + s.cycles) / s.cycles : 0)));
    const hist: string[] = [];
    for (const { labels, s } of spec) {
      let cum = 0;
      ACCEPTANCE_BUCKETS.forEach((b, i) => hist.push(`splash_spec_request_acceptance_length_bucket${labelText({ ...labels, le: String(b) })} ${(cum += s.requestAcceptance[i]!)}`));
      const count = cum + s.requestAcceptance[ACCEPTANCE_BUCKETS.length]!;
      hist.push(`splash_spec_request_acceptance_length_bucket${labelText({ ...labels, le: "+Inf" })} ${count}`);
      hist.push(`splash_spec_request_acceptance_length_sum${labelText(labels)} ${s.requestAcceptanceSum}`);
      hist.push(`splash_spec_request_acceptance_length_count${labelText(labels)} ${count}`);
    }
    block("splash_spec_request_acceptance_length", "histogram", "Mean acceptance length of each finished request that speculated.", hist);
    return out.join("\n") + "\n";
  }
}
