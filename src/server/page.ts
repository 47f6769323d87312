// GET /: the built-in page (src/web/), one HTML document bundled at build time and carried in the binary. A
// Content-Security-Policy lets only the page's own script run and lets it talk only to this server.
import { bundlePage } from "../web/bundle.ts" with { type: "macro" };

const page = bundlePage();

const CSP = [
  "default-src 'none'",
  `script-src 'sha256-${page.scriptHash}'`,
  "style-src 'unsafe-inline'", // markdown tables align cells with style attributes
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export function pageResponse(): Response {
  return new Response(page.html, {
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": CSP,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-cache",
    },
  });
}
