// A failing libsplash call becomes a NativeError carrying the status name and the library's own message
// (splash_last_error: file:line, what failed, and the fix where there is one).
import type { NativeLibrary } from "./library.ts";
import type { SampledToken } from "./model.ts";

export const STATUS_NAMES = [
  "SPLASH_OK",
  "SPLASH_ERR_INVALID_ARGUMENT",
  "SPLASH_ERR_IO",
  "SPLASH_ERR_FORMAT",
  "SPLASH_ERR_UNSUPPORTED",
  "SPLASH_ERR_OUT_OF_MEMORY",
  "SPLASH_ERR_CAPACITY",
  "SPLASH_ERR_INTERNAL",
] as const;

export type StatusName = (typeof STATUS_NAMES)[number] | "SPLASH_ERR_UNKNOWN";

export class NativeError extends Error {
  override name = "NativeError";
  constructor(
    readonly call: string,
    readonly status: number,
    readonly statusName: StatusName,
    readonly detail: string,
  ) {
    super(`${call}: ${statusName}: ${detail || "(no message)"}`);
  }
}

// The error of a failed call, from its status and the message of the thread it ran on.
export function nativeError(call: string, status: number, detail: string): NativeError {
  return new NativeError(call, status, STATUS_NAMES[status] ?? "SPLASH_ERR_UNKNOWN", detail);
}

// Throws NativeError unless `status` is SPLASH_OK.
export function check(lib: NativeLibrary, call: string, status: number): void {
  if (status !== 0) throw nativeError(call, status, String(lib.splash_last_error()));
}

// A step in which libsplash refused some sequences alone (splash_seq.error: a sample that could not be taken, for its
// settings, its buffers or a mask that leaves no token) while it ran the rest. `results` is the step's answer with
// an Error in each refused sequence's place, for a caller that goes on with the others (the engine).
export class StepRefusals extends Error {
  override name = "StepRefusals";
  constructor(readonly results: (SampledToken | Error | null)[]) {
    super(results.flatMap((r) => (r instanceof Error ? [r.message] : [])).join("; "));
  }
}
