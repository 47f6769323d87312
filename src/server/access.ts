// Which requests may reach the server at all, before any key is looked at: the name they were sent to (Host) and,
// for requests a web page makes, the page's origin (Origin).
//
// - DNS rebinding: a page on attacker.example re-points its name to 127.0.0.1 and then talks to a local server as
//   its own origin. The browser still sends `Host: attacker.example`, so only names this server answers to are
//   let in: the address it is bound to, localhost, 127.0.0.1 and [::1]; bound beyond loopback, also any IP address
//   (a page cannot rebind a literal address: NAT and port forwards reach it under others) and this machine's host
//   name; and what `--allow-host` adds.
// - Cross-site requests: any page may POST `text/plain` to localhost without a preflight, and a server without a key
//   would run it. Browsers name the page in `Origin`: a request from the server's own page (same host and port) or
//   from an origin `--allow-origin` lists is served, any other is refused. Requests without Origin are not from a
//   page (SDKs, curl, agents) and pass. CORS preflights of listed origins are answered; the answers to listed
//   origins carry the CORS headers.
import { isIP } from "node:net";
import { hostname } from "node:os";
import { ApiError } from "../api/errors.ts";

export type AccessOptions = {
  host?: string; // the address the server is bound to (absent: loopback, e.g. tests through app.handle)
  allowHosts?: readonly string[]; // extra Host names; ".example.com" also allows its subdomains; "*" any
  allowOrigins?: readonly string[]; // browser origins allowed besides the server's own page; "*" any
};

const LOOPBACK_NAMES = ["localhost", "127.0.0.1", "::1"];
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|\[::1\]|localhost)$/i;

// An address only this machine can reach.
export const isLoopback = (host: string) => LOOPBACK.test(host);
const WILDCARD_BINDS = new Set(["0.0.0.0", "::", ""]);

// The name of a Host header without its port, lowercased, IPv6 without brackets ("[::1]:8080" → "::1").
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  const name = h.startsWith("[") ? h.slice(1, h.indexOf("]") < 0 ? undefined : h.indexOf("]")) : h.replace(/:\d*$/, "");
  return name.replace(/\.$/, "");
}

// A name given on the command line (a bind address or --allow-host): no port, IPv6 with or without brackets.
function plainName(name: string): string {
  return name.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
}

// An origin as browsers serialize it: scheme://host[:port], lowercase, no trailing slash ("null" stays "null").
function normalizeOrigin(origin: string): string {
  return origin.trim().toLowerCase().replace(/\/+$/, "");
}

export class AccessPolicy {
  private readonly exact = new Set<string>();
  private readonly suffixes: string[] = [];
  private readonly anyHost: boolean;
  private readonly anyIp: boolean;
  private readonly origins: Set<string>;
  private readonly anyOrigin: boolean;

  constructor(options: AccessOptions = {}) {
    for (const name of LOOPBACK_NAMES) this.exact.add(name);
    const bound = options.host === undefined ? undefined : plainName(options.host);
    if (bound !== undefined && !WILDCARD_BINDS.has(bound)) this.exact.add(bound);
    this.anyIp = bound !== undefined && !isLoopback(bound);
    if (this.anyIp) {
      const machine = hostname().toLowerCase();
      this.exact.add(machine);
      this.exact.add(machine.split(".")[0]!);
    }
    const extra = options.allowHosts ?? [];
    this.anyHost = extra.includes("*");
    for (const h of extra) {
      if (h.startsWith(".")) this.suffixes.push(h.toLowerCase());
      else this.exact.add(plainName(h));
    }
    const origins = options.allowOrigins ?? [];
    this.anyOrigin = origins.includes("*");
    this.origins = new Set(origins.map(normalizeOrigin));
  }

  private hostAllowed(name: string): boolean {
    if (this.anyHost || this.exact.has(name)) return true;
    if (this.anyIp && isIP(name) !== 0) return true;
    return this.suffixes.some((s) => name === s.slice(1) || name.endsWith(s));
  }

  // Origins other than the server's own page that may use it (and get CORS headers).
  private listed(origin: string): boolean {
    return this.anyOrigin || this.origins.has(normalizeOrigin(origin));
  }

  // The server's own page: an origin whose host and port are the ones the request was sent to.
  private static sameOrigin(origin: string, host: string): boolean {
    const o = normalizeOrigin(origin);
    const h = host.trim().toLowerCase();
    return o === `http://${h}` || o === `https://${h}`;
  }

  // Throws a 403 for a request this server must not answer.
  check(request: Request): void {
    const host = request.headers.get("host");
    if (host !== null && !this.hostAllowed(hostName(host))) {
      throw new ApiError(403, `this server does not answer to the host name '${hostName(host)}' (only to its own address and localhost; start it with --allow-host ${hostName(host)} to allow it)`, { code: "host_not_allowed" });
    }
    const origin = request.headers.get("origin");
    if (origin === null) return;
    if ((host !== null && AccessPolicy.sameOrigin(origin, host)) || this.listed(origin)) return;
    throw new ApiError(403, `requests from web pages at ${origin} are not allowed (start the server with --allow-origin ${origin} to allow them)`, { code: "origin_not_allowed" });
  }

  // The answer to a CORS preflight (OPTIONS with Access-Control-Request-Method) from a listed origin; undefined for
  // any other request. Called after check(), which refused the rest.
  preflight(request: Request): Response | undefined {
    const origin = request.headers.get("origin");
    if (request.method !== "OPTIONS" || origin === null || !request.headers.has("access-control-request-method")) return undefined;
    const headers: Record<string, string> = {
      ...this.corsHeaders(request),
      "access-control-allow-methods": "GET, POST, HEAD, OPTIONS",
      "access-control-max-age": "600",
    };
    const asked = request.headers.get("access-control-request-headers");
    if (asked) headers["access-control-allow-headers"] = asked;
    return new Response(null, { status: 204, headers });
  }

  // Headers that let a listed origin's page read the answer (none for the server's own page, which needs none).
  corsHeaders(request: Request): Record<string, string> {
    const origin = request.headers.get("origin");
    if (origin === null || !this.listed(origin)) return {};
    return { "access-control-allow-origin": origin, "access-control-expose-headers": "retry-after", vary: "Origin" };
  }
}
