// The Hugging Face hub's HTTP API, the part `splash pull` needs:
//   GET  {endpoint}/api/models/{repo}/revision/{revision}?blobs=true   commit sha + every file's size, git blob id
//                                                                      and, for LFS files, lfs.sha256
//   GET  {endpoint}/{repo}/resolve/{commit}/{path}                     the file; LFS files answer 302 to a CDN with
//                                                                      X-Linked-Etag (the sha256) and X-Repo-Commit
// Errors carry the hub's X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound, RevisionNotFound) and become one
// HubError with a message that says what to do. HF_ENDPOINT, HF_TOKEN, the token file and HF_HUB_OFFLINE work as in
// huggingface_hub.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { hfHome } from "./cache.ts";

const DEFAULT_ENDPOINT = "https://huggingface.co";

export type HubErrorKind = "offline" | "unauthorized" | "gated" | "not-found" | "server" | "checksum" | "disk" | "interrupted";

export class HubError extends Error {
  override name = "HubError";
  constructor(
    readonly kind: HubErrorKind,
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

export type HubFile = {
  path: string;
  size: number;
  // The blob name in the cache and the hash that verifies it: lfs.sha256 for LFS files, the git blob sha1 otherwise.
  etag: string;
  hash: "sha256" | "git-sha1";
};

export type RepoListing = { repo: string; revision: string; commit: string; files: HubFile[] };

// A path inside a repository as the hub names files: relative, '/'-separated, no empty, "." or ".." part.
function isRepoPath(path: string): boolean {
  return path.length > 0 && !path.includes("\\") && !path.includes("\0") && path.split("/").every((p) => p !== "" && p !== "." && p !== "..");
}

export function hubEndpoint(): string {
  return (process.env.HF_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, "");
}

// HF_TOKEN (or the legacy HUGGING_FACE_HUB_TOKEN), else the file `hf auth login` writes ($HF_TOKEN_PATH, default
// $HF_HOME/token).
export function hubToken(): string | undefined {
  const env = process.env.HF_TOKEN || process.env.HUGGING_FACE_HUB_TOKEN;
  if (env?.trim()) return env.trim();
  const path = process.env.HF_TOKEN_PATH || join(hfHome(), "token");
  if (!existsSync(path)) return undefined;
  const token = readFileSync(path, "utf8").trim();
  return token || undefined;
}

function encodePath(path: string): string {
  return path.split("/").map(encodeURIComponent).join("/");
}

type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export class HubClient {
  readonly endpoint: string;
  readonly token: string | undefined;
  private readonly fetchImpl: FetchLike;

  constructor(opts: { endpoint?: string; token?: string | null; fetch?: FetchLike } = {}) {
    this.endpoint = (opts.endpoint ?? hubEndpoint()).replace(/\/+$/, "");
    this.token = opts.token === null ? undefined : (opts.token ?? hubToken());
    this.fetchImpl = opts.fetch ?? ((input, init) => fetch(input, init));
  }

  fileUrl(repo: string, commit: string, path: string): string {
    return `${this.endpoint}/${repo}/resolve/${commit}/${encodePath(path)}`;
  }

  // One request, following redirects by hand so the token is sent to hub hosts only, never to a CDN.
  async request(url: string, init: { method?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Response> {
    if (/^(1|true|yes|on)$/i.test(process.env.HF_HUB_OFFLINE ?? "")) {
      throw new HubError("offline", "HF_HUB_OFFLINE is set, so the hub is not contacted", "unset HF_HUB_OFFLINE to download; models already downloaded work offline");
    }
    const hubHost = new URL(this.endpoint).host;
    let current = url;
    for (let hop = 0; hop < 10; hop++) {
      const headers: Record<string, string> = { "user-agent": "splash", ...init.headers };
      if (this.token && new URL(current).host === hubHost) headers.authorization = `Bearer ${this.token}`;
      let res: Response;
      try {
        res = await this.fetchImpl(current, { method: init.method ?? "GET", headers, redirect: "manual", signal: init.signal });
      } catch (e) {
        if (init.signal?.aborted) throw e;
        const cause = (e as { code?: string }).code ?? (e as Error).message;
        throw new HubError("offline", `cannot reach the hub at ${this.endpoint} (${cause})`, "check the network connection (and HF_ENDPOINT if you use a mirror); models already downloaded work offline");
      }
      const location = res.headers.get("location");
      if (res.status >= 300 && res.status < 400 && location) {
        await res.body?.cancel();
        current = new URL(location, current).toString();
        continue;
      }
      return res;
    }
    throw new HubError("server", `too many redirects for ${url}`);
  }

  // Turns a failed response into a HubError naming the repository (and file) and what to do.
  async failure(res: Response, repo: string, what: string): Promise<HubError> {
    const code = res.headers.get("x-error-code");
    const message = res.headers.get("x-error-message") ?? "";
    await res.body?.cancel();
    const page = `${this.endpoint}/${repo}`;
    const login = "set HF_TOKEN to a token from https://huggingface.co/settings/tokens (or run `hf auth login`)";
    if (code === "GatedRepo") {
      return this.token
        ? new HubError("gated", `${repo} is gated and your token has no access to it yet (${res.status})`, `accept the conditions at ${page} with the account of your token, then run the command again`)
        : new HubError("gated", `${repo} is gated: the hub wants a token (${res.status})`, `accept the conditions at ${page}, then ${login}`);
    }
    if (res.status === 401 && message.includes("Invalid credentials")) {
      return new HubError("unauthorized", `the hub refused the token (401 invalid credentials)`, "check HF_TOKEN or ~/.cache/huggingface/token; create a new token at https://huggingface.co/settings/tokens");
    }
    if (code === "RepoNotFound" || (res.status === 401 && !code)) {
      return new HubError("not-found", `repository ${repo} not found on ${this.endpoint} (${res.status})`, this.token ? "check the repository name" : `check the repository name; if it is private, ${login}`);
    }
    if (code === "RevisionNotFound") return new HubError("not-found", `${repo} has no revision ${what} (${res.status})`, `see ${page}/tree/main`);
    if (code === "EntryNotFound" || res.status === 404) return new HubError("not-found", `${repo} has no file ${what} (${res.status})`, `see ${page}/tree/main`);
    if (res.status === 403) return new HubError("unauthorized", `access to ${repo} is forbidden (403${message ? `: ${message}` : ""})`, login);
    return new HubError("server", `the hub answered ${res.status} for ${repo} ${what}${message ? `: ${message}` : ""}`, "try again later");
  }

  // The commit a revision points to and the files there, with sizes and hashes.
  async listFiles(repo: string, revision = "main", signal?: AbortSignal): Promise<RepoListing> {
    const url = `${this.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
    const res = await this.request(url, { signal });
    if (!res.ok) throw await this.failure(res, repo, revision);
    const info = (await res.json()) as { sha?: string; siblings?: { rfilename: string; size?: number; blobId?: string; lfs?: { sha256: string; size: number } }[] };
    if (!info.sha || !Array.isArray(info.siblings)) throw new HubError("server", `${this.endpoint} answered the model API for ${repo} without sha and siblings: is HF_ENDPOINT a hub?`);
    // The names below become paths in the cache (snapshots/<commit>/<path>, blobs/<etag>): whatever the server
    // says, none may lead out of it.
    const refuse = (what: string) => new HubError("server", `${this.endpoint} listed ${repo} with ${what}, which cannot be a path in the cache: refusing the listing`);
    if (!/^[0-9a-f]{40}$/.test(info.sha)) throw refuse(`the commit ${JSON.stringify(info.sha)}`);
    const files: HubFile[] = info.siblings.map((s) => {
      if (typeof s.rfilename !== "string" || !isRepoPath(s.rfilename)) throw refuse(`a file named ${JSON.stringify(s.rfilename)}`);
      if (!s.lfs && (s.blobId === undefined || s.size === undefined)) throw new HubError("server", `the hub listed ${repo}/${s.rfilename} without size and blob id`);
      const file: HubFile = s.lfs ? { path: s.rfilename, size: s.lfs.size, etag: s.lfs.sha256, hash: "sha256" } : { path: s.rfilename, size: s.size!, etag: s.blobId!, hash: "git-sha1" };
      if (!(s.lfs ? /^[0-9a-f]{64}$/ : /^[0-9a-f]{40}$/).test(file.etag)) throw refuse(`${s.rfilename} under the hash ${JSON.stringify(file.etag)}`);
      return file;
    });
    return { repo, revision, commit: info.sha, files };
  }
}
