// Starting a generation for a request, timing it, and learning early whether it failed.
//
// The engine rejects a request (overloaded, prompt too long) when it is submitted, i.e. on the first next() of the
// event stream. A streaming response would rather answer that with a real HTTP status (clients retry 503s with
// Retry-After, and Claude Code compacts on "prompt is too long") than with an error event after a 200. So the first
// event is awaited for a short while before the stream is opened; a generation that is merely slow (a queue wait,
// a long prefill) gets its 200 and pings after that, and any later failure becomes an error event.
//
// A generation the server's shutdown cut short ends with the shutdown's error rather than as a short answer.
import type { ChatEvent, ChatModel, Conversation, GenerationOptions } from "../chat/ir.ts";
import { toApiError } from "../api/errors.ts";
import { surfaceOf, type GenerationContext } from "./context.ts";
import type { Metrics } from "./metrics.ts";
import type { RequestRecord } from "./request-log.ts";
import { shuttingDown } from "./shutdown.ts";

export type Generation = AsyncIterable<ChatEvent>;

export async function startGeneration(
  model: ChatModel,
  conversation: Conversation,
  options: GenerationOptions,
  ctx: GenerationContext & { waitMs: number; conversation?: string }, // conversation: the request field a template refusal names
): Promise<Generation> {
  ctx.record.model = model.id;
  const it = timed(model, conversation, options, ctx.metrics, ctx.record)[Symbol.asyncIterator]();
  const first = it.next();
  first.catch(() => {}); // observed below or by the stream; never an unhandled rejection
  const waited = Promise.withResolvers<undefined>();
  const timer = setTimeout(() => waited.resolve(undefined), ctx.waitMs);
  const early = await Promise.race([first.then(() => undefined, (e: unknown) => ({ error: e })), waited.promise]);
  clearTimeout(timer);
  if (early) throw toApiError(early.error, ctx.shape, ctx.conversation);
  const passOn = (event: ChatEvent): ChatEvent => {
    if (event.type === "done" && event.finishReason === "cancelled" && ctx.shutdown.ended.aborted) throw shuttingDown();
    return event;
  };
  return {
    async *[Symbol.asyncIterator]() {
      try {
        const r = await first;
        if (r.done) return;
        yield passOn(r.value);
        for (let n = await it.next(); !n.done; n = await it.next()) yield passOn(n.value);
      } finally {
        await it.return?.(undefined);
      }
    },
  };
}

// The model's events, with the server's timings, token counts and outcome recorded as they pass (in /metrics, in
// the request's log record and in the list of recent generations the page shows).
async function* timed(model: ChatModel, conversation: Conversation, options: GenerationOptions, metrics: Metrics, record: RequestRecord): AsyncGenerator<ChatEvent> {
  metrics.generationStarted(model.id);
  let error: unknown;
  try {
    for await (const event of model.generate(conversation, options)) {
      if (record.firstTokenAt === undefined && (event.type === "reasoning" || event.type === "content" || event.type === "tool_call_start")) {
        record.firstTokenAt = performance.now();
        metrics.firstToken(model.id, (record.firstTokenAt - record.arrivedAt) / 1000);
      }
      if (event.type === "done") {
        record.usage = event.usage;
        record.finish = event.finishReason;
        metrics.usage(model.id, event.usage);
        if (record.firstTokenAt !== undefined && event.usage.completionTokens > 1) {
          metrics.perToken(model.id, (performance.now() - record.firstTokenAt) / 1000 / (event.usage.completionTokens - 1));
        }
      }
      yield event;
    }
  } catch (e) {
    error = e;
    throw e;
  } finally {
    const usage = record.usage;
    metrics.generationEnded({
      at: Date.now(),
      surface: surfaceOf(record.path).surface,
      model: model.id,
      // neither done nor failed: the reader stopped early (the client went away)
      outcome: record.finish ?? (error === undefined ? "cancelled" : "error"),
      ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
      promptTokens: usage?.promptTokens ?? 0,
      cachedPromptTokens: usage?.cachedPromptTokens ?? 0,
      completionTokens: usage?.completionTokens ?? 0,
      ttftMs: record.firstTokenAt === undefined ? null : record.firstTokenAt - record.arrivedAt,
      durationMs: performance.now() - record.arrivedAt,
    });
  }
}
