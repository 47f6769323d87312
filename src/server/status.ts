// GET /status: what the built-in page shows about the server, as JSON. Each model's runtime (backend, weights,
// memory plan) and live engine figures, the server's counters (the ones GET /metrics renders), tokens per second
// over the last minutes, and the last generations.
import type { ModelRuntime, Usage } from "../chat/ir.ts";
import type { EngineStats } from "../engine/types.ts";
import type { Metrics } from "./metrics.ts";
import type { ModelRegistry } from "./models.ts";
import type { FinishedGeneration } from "./recent-generations.ts";
import type { Throughput, ThroughputSeries } from "./throughput.ts";

export type ModelStatus = {
  id: string;
  contextLength: number;
  maxOutputTokens: number;
  vision: boolean;
  runtime: ModelRuntime;
  engine: EngineStats;
  generations: number; // streaming or collecting now
  tokens: Usage; // of finished generations: prefix-cache hit rate = cachedPromptTokens / promptTokens
  throughput: ThroughputSeries;
};

export type ServerStatus = {
  uptimeSeconds: number;
  keyRequired: boolean; // on /v1/* (the page then asks for it)
  models: ModelStatus[];
  requests: { surface: string; status: number; count: number }[];
  recent: FinishedGeneration[]; // newest first
};

export type StatusSources = { models: ModelRegistry; metrics: Metrics; throughput: Throughput; startedAt: number; keyRequired: boolean };

export function serverStatus({ models, metrics, throughput, startedAt, keyRequired }: StatusSources): ServerStatus {
  return {
    uptimeSeconds: (performance.now() - startedAt) / 1000,
    keyRequired,
    models: models.all.map((m) => ({
      id: m.id,
      contextLength: m.contextLength,
      maxOutputTokens: m.maxOutputTokens,
      vision: m.vision,
      runtime: m.runtime,
      engine: m.stats(),
      generations: metrics.activeGenerations(m.id),
      tokens: metrics.tokens(m.id),
      throughput: throughput.series(m.id),
    })),
    requests: metrics.requestCounts(),
    recent: metrics.recent.list(),
  };
}
