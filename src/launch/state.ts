// What a launcher knows about a server it started: one small JSON file per model in <state>/servers/, with the
// server's log and the start lock beside it. The file is the only link between launches, so it carries everything
// a later `splash <tool>` or `splash stop` needs: where the server listens, which process it is, and its API key.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { stateDir } from "../paths.ts";

export const ServerState = z.object({
  key: z.string().min(1), // what the MODEL argument named: a model id, or a checkpoint directory's absolute path
  model: z.string().min(1), // the id the server serves it under (GET /health lists it)
  pid: z.number().int().positive(),
  port: z.number().int().min(1).max(65535),
  apiKey: z.string().min(1),
  version: z.string(), // Splash version that started it
  startedAt: z.string(), // ISO time the process was spawned
  log: z.string(),
});
export type ServerState = z.infer<typeof ServerState>;

export function serversDir(): string {
  return join(stateDir(), "servers");
}

// A file name for a key: readable when the key is a plain id, a short hash keeps paths apart.
export function slug(key: string): string {
  const plain = key.toLowerCase().replace(/[^a-z0-9.-]+/g, "-").replace(/^-+|-+$/g, "").slice(-48);
  if (plain === key) return plain;
  return `${plain || "model"}-${createHash("sha256").update(key).digest("hex").slice(0, 8)}`;
}

export const statePath = (key: string) => join(serversDir(), `${slug(key)}.json`);
export const logPath = (key: string) => join(serversDir(), `${slug(key)}.log`);
export const lockPath = (key: string) => join(serversDir(), `${slug(key)}.lock`);

export function serverUrl(state: ServerState): string {
  return `http://127.0.0.1:${state.port}`;
}

// The state of a key's server; a file that cannot be read as one is removed (it cannot describe a server).
export function readState(key: string): ServerState | undefined {
  return readStateFile(statePath(key));
}

function readStateFile(path: string): ServerState | undefined {
  if (!existsSync(path)) return undefined;
  let parsed;
  try {
    parsed = ServerState.safeParse(JSON.parse(readFileSync(path, "utf8")));
  } catch {
    parsed = undefined;
  }
  if (parsed?.success) return parsed.data;
  rmSync(path, { force: true });
  return undefined;
}

// Written whole through a rename, so a reader never sees half a file; readable by this user only (it holds the key).
export function writeState(state: ServerState): void {
  mkdirSync(serversDir(), { recursive: true });
  const path = statePath(state.key);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, path);
}

export function removeState(key: string): void {
  rmSync(statePath(key), { force: true });
}

export function allStates(): ServerState[] {
  if (!existsSync(serversDir())) return [];
  return readdirSync(serversDir())
    .filter((f) => f.endsWith(".json"))
    .map((f) => readStateFile(join(serversDir(), f)))
    .filter((s): s is ServerState => s !== undefined);
}
