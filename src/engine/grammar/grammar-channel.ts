// The shared memory between the engine thread and one grammar worker (grammar-worker.ts, grammar-pool.ts): a call
// (op and two arguments), its result or error text, and the next-token mask the worker writes.
//
//   engine thread: write OP, A, B; DONE = 0; REQUEST = 1, notify REQUEST; wait until DONE = 1
//   worker:        wait until REQUEST = 1; run; write RESULT (and the error text); REQUEST = 0; DONE = 1, notify DONE
export const CHANNEL = { REQUEST: 0, OP: 1, A: 2, B: 3, RESULT: 4, DONE: 5, ERROR_LENGTH: 6 } as const;
export const OP = { ACCEPT: 1, ROLLBACK: 2, MASK: 3, RELEASE: 4 } as const;

const CONTROL_BYTES = 32;
const ERROR_BYTES = 1024;

export function channelBytes(vocabSize: number): number {
  return CONTROL_BYTES + ERROR_BYTES + Math.ceil(vocabSize / 32) * 4;
}

export function channelViews(buffer: SharedArrayBuffer, vocabSize: number): { ctrl: Int32Array; error: Uint8Array; mask: Uint32Array } {
  return {
    ctrl: new Int32Array(buffer, 0, CONTROL_BYTES / 4),
    error: new Uint8Array(buffer, CONTROL_BYTES, ERROR_BYTES),
    mask: new Uint32Array(buffer, CONTROL_BYTES + ERROR_BYTES, Math.ceil(vocabSize / 32)),
  };
}
