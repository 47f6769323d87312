/// <reference lib="dom" />
// How the page talks to the server that served it: same origin, with the server's API key when it requires one
// (asked once, kept in this tab's session storage).

const KEY_ITEM = "splash.apiKey";

export function authHeaders(): Record<string, string> {
  const key = sessionStorage.getItem(KEY_ITEM);
  return key ? { authorization: `Bearer ${key}` } : {};
}

// The message of an error response in OpenAI's shape ({error: {message}}), or its status line.
export async function failure(res: Response): Promise<Error> {
  let message = `${res.status} ${res.statusText}`;
  try {
    const body = (await res.json()) as { error?: { message?: string } };
    if (body.error?.message) message = body.error.message;
  } catch {
    // not JSON: keep the status line
  }
  return new Error(message);
}

// Resolves once the server would take this tab's requests: at once when it requires no key (`keyRequired`, from
// GET /status), else when GET /v1/models accepts the stored key or, after a 401, one asked for in the dialog.
// True when a key is in use.
export async function ensureAccess(dialog: HTMLDialogElement, keyRequired: boolean): Promise<boolean> {
  if (!keyRequired) return false;
  let problem: string | undefined;
  for (;;) {
    const key = sessionStorage.getItem(KEY_ITEM) ?? (await askKey(dialog, problem));
    const res = await fetch("/v1/models", { headers: { authorization: `Bearer ${key}` } });
    if (res.ok) {
      sessionStorage.setItem(KEY_ITEM, key);
      return true;
    }
    if (res.status !== 401) throw await failure(res);
    sessionStorage.removeItem(KEY_ITEM);
    problem = (await failure(res)).message;
  }
}

function askKey(dialog: HTMLDialogElement, problem: string | undefined): Promise<string> {
  const input = dialog.querySelector<HTMLInputElement>("#key-input")!;
  const error = dialog.querySelector<HTMLElement>("#key-error")!;
  error.hidden = problem === undefined;
  error.textContent = problem ?? "";
  input.value = "";
  return new Promise((resolve) => {
    const form = dialog.querySelector("form")!;
    const submit = (e: Event) => {
      const key = input.value.trim();
      if (!key) {
        e.preventDefault(); // keep the dialog open
        return;
      }
      form.removeEventListener("submit", submit);
      resolve(key);
    };
    form.addEventListener("submit", submit);
    dialog.oncancel = (e) => e.preventDefault(); // Escape does not close it: nothing works without a key
    dialog.showModal();
    input.focus();
  });
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM);
}

// The data fields of a server-sent event stream, as they arrive (comments, such as keep-alive pings, skipped).
export async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
        if (data.length) yield data.join("\n");
      }
    }
  } finally {
    reader.releaseLock();
  }
}
