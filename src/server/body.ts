// Request bodies: JSON, read only up to the server's limit. A declared Content-Length over it is refused before a
// byte is read; a body sent without one (chunked) is read until it passes the limit. Either way the client gets a
// 413 in its surface's error shape (the listener's own limit would answer with an empty body).
import { ApiError } from "../api/errors.ts";
import { formatBytes } from "../format.ts";

export const DEFAULT_MAX_BODY_BYTES = 64 * 2 ** 20;

function tooLarge(limit: number, size?: number): ApiError {
  const what = size === undefined ? "the request body is larger" : `the request body (${formatBytes(size)}) is larger`;
  return new ApiError(413, `${what} than this server accepts (${formatBytes(limit)}; the server's --max-body sets it)`, { code: "request_too_large" });
}

// Refuses a request whose declared body is over the limit.
export function checkBodySize(headers: Headers, limit: number): void {
  const declared = Number(headers.get("content-length") ?? 0);
  if (declared > limit) throw tooLarge(limit, declared);
}

// The body as JSON, whatever its content type (clients send JSON as text/plain, form-encoded or with none at all).
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel();
        throw tooLarge(limit);
      }
      chunks.push(value);
    }
  }
  const text = new TextDecoder().decode(Buffer.concat(chunks));
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `the request body is not valid JSON: ${(e as Error).message}`, { code: "invalid_json" });
  }
}

// A route's `parse` hook: its body as JSON within the server's limit.
export const jsonBody =
  (ctx: { maxBodyBytes: number }) =>
  ({ request }: { request: Request }): Promise<unknown> =>
    readJsonBody(request, ctx.maxBodyBytes);
