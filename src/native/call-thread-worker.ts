// The model's call thread (call-thread.ts is the other side): opens the library the model was loaded from and makes
// each call it is sent, in order, answering with the status and, on failure, this thread's error message.
import { invoke, type FromThread, type ToThread } from "./call-thread.ts";
import { openLibrary, type NativeLibrary } from "./library.ts";

declare const self: Worker;

let lib: NativeLibrary | undefined;
const post = (m: FromThread) => postMessage(m);

self.onmessage = (e: MessageEvent<ToThread>) => {
  const m = e.data;
  try {
    if (m.type === "open") {
      lib = openLibrary(m.path);
      return;
    }
    if (!lib) throw new Error("a call before the library was opened");
    const status = invoke(lib, m.call);
    post({ type: "done", id: m.id, status, error: status === 0 ? "" : String(lib.splash_last_error()) });
  } catch (err) {
    post({ type: "failed", message: err instanceof Error ? err.message : String(err) });
  }
};
