// The built-in page: GET / serves it (page.ts) and GET /status the figures it polls (status.ts), among them tokens
// per second sampled while the server runs (throughput.ts).
import { Elysia } from "elysia";
import type { ServerContext } from "./context.ts";
import { serverStatus } from "./status.ts";
import { Throughput } from "./throughput.ts";

// The chart's span: one sample every 2 s over the last 5 minutes.
const THROUGHPUT_INTERVAL_MS = 2000;
const THROUGHPUT_SAMPLES = 150;

export function pageRoutes(ctx: ServerContext, keyRequired: boolean) {
  const sources = { models: ctx.models, metrics: ctx.metrics, throughput: new Throughput(THROUGHPUT_INTERVAL_MS, THROUGHPUT_SAMPLES), startedAt: performance.now(), keyRequired };
  const stopSampling = sources.throughput.start(ctx.models.all);
  return (
    new Elysia()
      .onStop(stopSampling)
      // Under `bun run` the page module bundles the page when first loaded: only a server asked for it pays.
      .get("/", async () => (await import("./page.ts")).pageResponse())
      .get("/status", () => serverStatus(sources))
  );
}
