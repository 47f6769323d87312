// A local stand-in for the Hugging Face hub with the routes and headers huggingface_hub 1.33 and `splash pull` use:
//   GET  /api/models/{repo}/revision/{rev}[?blobs=true]   { id, sha, siblings[{ rfilename, size, blobId, lfs{sha256,size,pointerSize} }] }
//   GET  /api/models/{repo}/tree/{rev}[?recursive=true]   [{ type, oid, size, path, lfs{oid,size,pointerSize} }]
//   HEAD/GET /{repo}/resolve/{rev}/{path}                  non-LFS: 200 with ETag "<git sha1>", X-Repo-Commit;
//                                                          LFS: 302 to the CDN with X-Linked-Etag "<sha256>", X-Linked-Size
//   HEAD/GET /cdn/{sha256}                                  the bytes, with Range (206 + Content-Range)
// The CDN is the same server reached as `localhost` while the hub is `127.0.0.1`, so clients see another host (and
// must not send the token there). Errors carry X-Error-Code / X-Error-Message as the hub's do (401 RepoNotFound for
// unknown repos without a token, GatedRepo 401/403, EntryNotFound, RevisionNotFound). Faults for tests: cut a
// download after N bytes, serve corrupt bytes, throttle.
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expandDotted, layerTypesOf } from "../../src/models/config.ts";
import type { HubModelSpec } from "../../src/models/spec.ts";

export type MockRepo = {
  files: Record<string, Uint8Array>;
  commit?: string;
  gated?: boolean; // tokens in `access` may read it; others get GatedRepo
  private?: boolean;
};

export type MockFaults = {
  cutAfter?: Map<string, number>; // path → bytes served before the connection drops (once per path)
  corrupt?: Set<string>; // paths whose bytes are served with one byte flipped
  bytesPerSecond?: number; // throttle every body
};

export type RequestLog = { method: string; path: string; range: string | null; authorization: string | null; host: string };

const LFS_SUFFIXES = [".safetensors", ".bin", ".gguf"];

function sha256(b: Uint8Array): string {
  return createHash("sha256").update(b).digest("hex");
}

function gitSha1(b: Uint8Array): string {
  return createHash("sha1").update(`blob ${b.length}\0`).update(b).digest("hex");
}

function fakeCommit(seed: string): string {
  return createHash("sha1").update(seed).digest("hex");
}

type Entry = { path: string; data: Uint8Array; lfs: boolean; sha256: string; oid: string };
type Reply = { status: number; headers: Record<string, string>; data?: Uint8Array; cutAt?: number };

function json(value: unknown): Reply {
  return { status: 200, headers: { "content-type": "application/json" }, data: new TextEncoder().encode(JSON.stringify(value)) };
}

export class MockHub {
  readonly log: RequestLog[] = [];
  readonly faults: MockFaults = { cutAfter: new Map(), corrupt: new Set() };
  readonly tokens = new Set<string>(); // valid tokens
  readonly access = new Set<string>(); // tokens that accepted the gated repos' conditions
  private readonly server: Server;
  private port = 0;
  private readonly repos = new Map<string, { repo: MockRepo; commit: string; entries: Map<string, Entry> }>();
  private readonly blobs = new Map<string, Uint8Array>();

  constructor(repos: Record<string, MockRepo>) {
    for (const [id, repo] of Object.entries(repos)) this.setRepo(id, repo);
    this.server = createServer((req, res) => this.respond(req, res));
  }

  // Starts listening; call once before use.
  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get cdnUrl(): string {
    return `http://localhost:${this.port}`;
  }

  setRepo(id: string, repo: MockRepo): void {
    const entries = new Map<string, Entry>();
    for (const [path, data] of Object.entries(repo.files)) {
      const lfs = LFS_SUFFIXES.some((s) => path.endsWith(s));
      const e: Entry = { path, data, lfs, sha256: sha256(data), oid: gitSha1(data) };
      entries.set(path, e);
      if (lfs) this.blobs.set(e.sha256, data);
    }
    this.repos.set(id, { repo, commit: repo.commit ?? fakeCommit(id + Object.keys(repo.files).join()), entries });
  }

  commitOf(id: string): string {
    return this.repos.get(id)!.commit;
  }

  requests(filter: (r: RequestLog) => boolean = () => true): RequestLog[] {
    return this.log.filter(filter);
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private error(status: number, code: string | null, message: string, extra: Record<string, string> = {}): Reply {
    const headers: Record<string, string> = { "x-error-message": message, "content-type": "application/json", ...extra };
    if (code) headers["x-error-code"] = code;
    return { status, headers, data: new TextEncoder().encode(JSON.stringify({ error: message })) };
  }

  // The hub's answers for a repository the caller may not read.
  private authorize(id: string, req: IncomingMessage): Reply | undefined {
    const auth = req.headers.authorization;
    const token = auth?.startsWith("Bearer ") ? auth.slice(7) : undefined;
    if (token !== undefined && !this.tokens.has(token)) return this.error(401, null, "Invalid credentials in Authorization header");
    const r = this.repos.get(id);
    if (!r || r.repo.private) {
      return token ? this.error(404, "RepoNotFound", "Repository not found") : this.error(401, "RepoNotFound", "Repository not found");
    }
    if (r.repo.gated && !(token && this.access.has(token))) {
      const msg = `Access to model ${id} is restricted. You must have access to it and be authenticated to access it. Please log in.`;
      return token ? this.error(403, "GatedRepo", msg) : this.error(401, "GatedRepo", msg);
    }
    return undefined;
  }

  private serveBytes(e: Entry, req: IncomingMessage, headers: Record<string, string>): Reply {
    let data = e.data;
    if (this.faults.corrupt?.has(e.path)) {
      data = data.slice();
      data[Math.floor(data.length / 2)]! ^= 0xff;
    }
    const size = data.length;
    const range = /^bytes=(\d+)-$/.exec(req.headers.range ?? "");
    const start = range ? Number(range[1]) : 0;
    if (range && start >= size && size > 0) return { status: 416, headers: { ...headers, "content-range": `bytes */${size}` } };
    const h: Record<string, string> = { ...headers, "accept-ranges": "bytes", "content-length": String(size - start), "content-type": "application/octet-stream" };
    if (range) h["content-range"] = `bytes ${start}-${size - 1}/${size}`;
    const status = range ? 206 : 200;
    if (req.method === "HEAD") return { status, headers: h };
    const cut = this.faults.cutAfter?.get(e.path);
    if (cut !== undefined) this.faults.cutAfter!.delete(e.path);
    return { status, headers: h, data: data.subarray(start), cutAt: cut === undefined ? undefined : Math.max(0, cut - start) };
  }

  // Writes a reply: at once, throttled in 50 ms slices, or cut (the socket destroyed) after `cutAt` bytes.
  private async respond(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const reply = this.handle(req);
    res.writeHead(reply.status, reply.headers);
    const data = reply.data ?? new Uint8Array(0);
    const rate = this.faults.bytesPerSecond;
    if (reply.cutAt === undefined && rate === undefined) return void res.end(data);
    const limit = Math.min(reply.cutAt ?? data.length, data.length);
    const step = rate ? Math.max(1, Math.floor(rate / 20)) : 64 * 1024;
    for (let pos = 0; pos < limit && !res.destroyed; pos += step) {
      res.write(data.subarray(pos, Math.min(limit, pos + step)));
      if (rate) await Bun.sleep(50);
    }
    if (limit < data.length) {
      await Bun.sleep(50); // let the bytes before the cut reach the client
      res.destroy();
    } else res.end();
  }

  private handle(req: IncomingMessage): Reply {
    const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
    const path = decodeURIComponent(url.pathname);
    const method = req.method ?? "GET";
    this.log.push({ method, path, range: req.headers.range ?? null, authorization: req.headers.authorization ?? null, host: url.host });

    const cdn = /^\/cdn\/([0-9a-f]{64})$/.exec(path);
    if (cdn) {
      if (url.hostname !== "localhost") return this.error(400, null, "the CDN is reached as localhost");
      const data = this.blobs.get(cdn[1]!);
      if (!data) return this.error(404, null, "no such blob");
      const entry = [...this.repos.values()].flatMap((r) => [...r.entries.values()]).find((e) => e.sha256 === cdn[1])!;
      return this.serveBytes(entry, req, { etag: `"${cdn[1]}"` });
    }

    const api = /^\/api\/models\/([^/]+\/[^/]+)\/(revision|tree)\/([^/]+)(?:\/(.*))?$/.exec(path);
    if (api) {
      const [, id, route, rev] = api as unknown as [string, string, string, string];
      const denied = this.authorize(id, req);
      if (denied) return denied;
      const r = this.repos.get(id)!;
      if (rev !== "main" && rev !== r.commit) return this.error(404, "RevisionNotFound", `Invalid rev id: ${rev}`);
      const entries = [...r.entries.values()];
      if (route === "revision") {
        const blobs = url.searchParams.get("blobs") === "true";
        const siblings = entries.map((e) =>
          blobs ? { rfilename: e.path, size: e.data.length, blobId: e.oid, ...(e.lfs ? { lfs: { sha256: e.sha256, size: e.data.length, pointerSize: 134 } } : {}) } : { rfilename: e.path },
        );
        return json({ _id: id, id, modelId: id, sha: r.commit, private: !!r.repo.private, gated: r.repo.gated ? "manual" : false, disabled: false, siblings });
      }
      return json(entries.map((e) => ({ type: "file", oid: e.oid, size: e.data.length, path: e.path, ...(e.lfs ? { lfs: { oid: e.sha256, size: e.data.length, pointerSize: 134 } } : {}) })));
    }

    const resolve = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(path);
    if (resolve) {
      const [, id, rev, file] = resolve as unknown as [string, string, string, string];
      const denied = this.authorize(id, req);
      if (denied) return denied;
      const r = this.repos.get(id)!;
      if (rev !== "main" && rev !== r.commit) return this.error(404, "RevisionNotFound", `Invalid rev id: ${rev}`);
      const e = r.entries.get(file);
      const common = { "x-repo-commit": r.commit };
      if (!e) return this.error(404, "EntryNotFound", `Entry not found`, common);
      if (e.lfs) {
        return {
          status: 302,
          headers: { ...common, location: `${this.cdnUrl}/cdn/${e.sha256}`, "x-linked-etag": `"${e.sha256}"`, "x-linked-size": String(e.data.length), etag: `"${e.oid}"` },
        };
      }
      return this.serveBytes(e, req, { ...common, etag: `"${e.oid}"` });
    }
    return this.error(404, null, "not found");
  }
}

// The files of a fixture checkpoint directory (every file, as bytes), optionally with config.json replaced.
export function fixtureFiles(dir: string, replace: Record<string, unknown> = {}): Record<string, Uint8Array> {
  const files: Record<string, Uint8Array> = {};
  for (const name of readdirSync(dir)) {
    if (name === "golden") continue;
    files[name] = new Uint8Array(readFileSync(join(dir, name)));
  }
  for (const [name, value] of Object.entries(replace)) files[name] = new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value, null, 2));
  return files;
}

// A config.json shaped like the official checkpoint's for a hub spec: nested text_config with every expected value
// (dotted keys expanded), explicit layer_types, and the vision_config. Mock repositories serve it with tiny weights.
export function specConfigJson(spec: HubModelSpec): Record<string, unknown> {
  const text: Record<string, unknown> = { model_type: spec.architecture === "qwen3_5" ? "qwen3_5_text" : "qwen3_5_moe_text", ...expandDotted(spec.config.text) };
  text.layer_types = layerTypesOf(text);
  const arch = spec.architecture === "qwen3_5" ? "Qwen3_5ForConditionalGeneration" : "Qwen3_5MoeForConditionalGeneration";
  return { architectures: [arch], model_type: spec.architecture, text_config: text, vision_config: { ...spec.config.vision }, tie_word_embeddings: false };
}
