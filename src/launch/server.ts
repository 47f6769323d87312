// The server a launcher hands to a tool: reused when one is already running for the model, otherwise started in
// the background (detached, in its own process group, output to a log in the state directory) and waited for.
// It keeps running after the tool exits, for the next launch; `splash stop` ends it.
//
// Liveness of a recorded server = its pid is alive AND GET /health answers AND lists the model. A pid that is alive
// without /health answering is a server still loading, or busy (a long prefill can hold its event loop): it is
// waited for when its command line is the `serve --port N` that was started (or, where the command line cannot be
// read, while it is younger than READY_TIMEOUT_MS); otherwise the pid belongs to someone else now.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { z } from "zod";
import { CliError } from "../cli/_command.ts";
import { log } from "../log.ts";
import pkg from "../../package.json" with { type: "json" };
import { checkListen, ListenError } from "../server/server.ts";
import { DEFAULT_DRAIN_MS, END_GRACE_MS } from "../server/shutdown.ts";
import { LockTimeout, withLock } from "./lock.ts";
import { commandLine, freePort, lastLine, pidAlive, sleep, waitExit } from "./process.ts";
import { Progress } from "./progress.ts";
import { lockPath, logPath, readState, removeState, serversDir, serverUrl, writeState, type ServerState } from "./state.ts";

// Loading a large checkpoint from a slow disk and quantizing it at load takes minutes; past this it is stuck.
export const READY_TIMEOUT_MS = 15 * 60_000;
// A stopped server first lets its running requests finish (it drains on SIGTERM); only one stuck past that is killed.
const STOP_TIMEOUT_MS = DEFAULT_DRAIN_MS + END_GRACE_MS + 3000;
const BUSY_WAIT_MS = 5 * 60_000;

const Health = z.object({ status: z.literal("ok"), models: z.array(z.string()) });

async function health(state: ServerState): Promise<z.infer<typeof Health> | undefined> {
  try {
    const res = await fetch(`${serverUrl(state)}/health`, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return undefined;
    const parsed = Health.safeParse(await res.json());
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export type Liveness = "live" | "starting" | "stale";

// Whether the pid still runs the server that was started: `… serve … --port N`.
function isServeProcess(state: ServerState): boolean | undefined {
  const args = commandLine(state.pid);
  if (!args) return undefined;
  const port = args.indexOf("--port");
  return args.includes("serve") && port >= 0 && args[port + 1] === String(state.port);
}

export async function liveness(state: ServerState): Promise<Liveness> {
  if (!pidAlive(state.pid)) return "stale";
  const h = await health(state);
  if (h) return h.models.includes(state.model) ? "live" : "stale";
  const ours = isServeProcess(state);
  if (ours !== undefined) return ours ? "starting" : "stale";
  return Date.now() - Date.parse(state.startedAt) < READY_TIMEOUT_MS ? "starting" : "stale";
}

// What the tools are configured with: the limits the server really applies (the context may be smaller than the
// model's when memory is short), read from its model list.
export type ServedModel = { id: string; contextLength: number; maxOutputTokens: number };

const ModelEntry = z.object({ id: z.string(), context_length: z.number().int().positive(), max_output_tokens: z.number().int().positive() });

export async function servedModel(state: ServerState): Promise<ServedModel> {
  const res = await fetch(`${serverUrl(state)}/v1/models/${encodeURIComponent(state.model)}`, {
    headers: { authorization: `Bearer ${state.apiKey}` },
    signal: AbortSignal.timeout(5000),
  });
  const entry = ModelEntry.safeParse(res.ok ? await res.json() : undefined);
  if (!entry.success) throw new CliError(`the server at ${serverUrl(state)} did not describe ${state.model} (HTTP ${res.status})`, `see its log: ${state.log}`);
  return { id: entry.data.id, contextLength: entry.data.context_length, maxOutputTokens: entry.data.max_output_tokens };
}

// How to run `splash serve` from this very executable: the compiled binary runs itself (its entry is an embedded
// /$bunfs/ path; import.meta.dir there is the build machine's); under `bun run` it is Bun plus the entry script.
export function serveCommand(modelArg: string | undefined, port: number, apiKey: string): string[] {
  const compiled = Bun.main.startsWith("/$bunfs/") || /^[A-Z]:[\\/]~BUN[\\/]/i.test(Bun.main);
  const self = compiled ? [process.execPath] : [process.execPath, join(import.meta.dir, "..", "main.ts")];
  return [...self, "serve", ...(modelArg === undefined ? [] : [modelArg]), "--host", "127.0.0.1", "--port", String(port), `--api-key=${apiKey}`];
}

// What starting a server needs, known only after the MODEL argument is resolved (which may download it): the key,
// the id it will serve, and its command line for a port and API key (serveCommand, or a test's scripted server).
export type StartSpec = { key: string; model: string; command: (port: number, apiKey: string) => string[] };

function spawnServer(spec: StartSpec, port: number, apiKey: string): ServerState {
  const log = logPath(spec.key);
  mkdirSync(dirname(log), { recursive: true });
  const fd = openSync(log, "w", 0o600);
  const [cmd, ...args] = spec.command(port, apiKey);
  // detached: its own session and process group, so the terminal's Ctrl-C for the tool does not reach it.
  const child = spawn(cmd!, args, { detached: true, stdio: ["ignore", fd, fd], cwd: serversDir(), env: process.env });
  closeSync(fd);
  child.unref();
  if (child.pid === undefined) throw new CliError(`could not start ${cmd} serve`, `see ${log}`);
  return { key: spec.key, model: spec.model, pid: child.pid, port, apiKey, version: pkg.version, startedAt: new Date().toISOString(), log };
}

function failure(state: ServerState, what: string): CliError {
  const line = lastLine(state.log);
  return new CliError(`${what}${line ? `: ${line}` : ""}`, `full log: ${state.log}`);
}

// Polls until /health lists the model; fails when the process exits or the time runs out (READY_TIMEOUT_MS from
// its start, and at least BUSY_WAIT_MS from now for a server that was started long ago and is busy).
async function waitReady(state: ServerState, progress: Progress, label: string): Promise<void> {
  const end = Math.max(Date.parse(state.startedAt) + READY_TIMEOUT_MS, Date.now() + BUSY_WAIT_MS);
  for (;;) {
    if (!pidAlive(state.pid)) throw failure(state, `the ${state.model} server exited while starting`);
    const h = await health(state);
    if (h?.models.includes(state.model)) return;
    if (h) throw failure(state, `port ${state.port} answers, but not for ${state.model}`);
    if (Date.now() > end) throw failure(state, `the ${state.model} server (pid ${state.pid}) did not answer in time`);
    const line = lastLine(state.log);
    progress.update(`${label} (${progress.seconds()} s)${line ? ` · ${line}` : ""}`);
    await sleep(250);
  }
}

// Sends SIGTERM, then SIGKILL if it has not exited in time. Returns how it ended.
export async function terminate(pid: number, timeoutMs = STOP_TIMEOUT_MS): Promise<"stopped" | "killed" | "gone"> {
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return "gone";
  }
  if (await waitExit(pid, timeoutMs)) return "stopped";
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    return "stopped";
  }
  await waitExit(pid, 2000);
  return "killed";
}

// Starts a server for the spec and waits for it; while it loads, Ctrl-C stops it again instead of leaving a
// half-started server behind.
async function start(spec: StartSpec, lock: string, port: number | undefined): Promise<ServerState> {
  // Hex: a base64url key may begin with "-", which argument parsers take for an option (one in 32 launches failed so).
  if (port !== undefined) await checkListen("127.0.0.1", port).catch((e: unknown) => Promise.reject(e instanceof ListenError ? new CliError(e.message, e.hint) : e));
  const state = spawnServer(spec, port ?? (await freePort()), randomBytes(24).toString("hex"));
  writeState(state);
  const label = `starting the ${spec.model} server`;
  const progress = new Progress(`${label} (log: ${state.log})`);
  const interrupted = () => {
    progress.done(`interrupted: stopping the ${spec.model} server`, false);
    void terminate(state.pid, 2000).finally(() => {
      removeState(spec.key);
      rmSync(lock, { force: true });
      process.exit(130);
    });
  };
  process.once("SIGINT", interrupted);
  try {
    await waitReady(state, progress, label);
    progress.done(`${spec.model} is ready at ${serverUrl(state)} (${progress.seconds()} s)`);
    return state;
  } catch (e) {
    progress.done(`the ${spec.model} server did not start`, false);
    await terminate(state.pid, 2000);
    removeState(spec.key);
    throw e;
  } finally {
    process.off("SIGINT", interrupted);
  }
}

function reuse(state: ServerState, port: number | undefined): ServerState {
  if (port !== undefined && port !== state.port) {
    log.warn(`the running ${state.model} server listens on port ${state.port}, not ${port}: run \`splash stop ${state.key}\` first to start it on --port ${port}`);
  }
  if (state.version !== pkg.version) {
    log.warn(`the running ${state.model} server is Splash ${state.version}, this is ${pkg.version}: run \`splash stop ${state.key}\` to restart it on the next launch`);
  }
  log.info(`using the ${state.model} server at ${serverUrl(state)} (pid ${state.pid})`);
  return state;
}

// The running server for `key`, started if needed (on `port`, else a free one). `prepare` resolves the model and is
// called only to start one.
export async function ensureServer(key: string, prepare: () => Promise<StartSpec>, port?: number): Promise<ServerState> {
  const known = readState(key);
  if (known && (await liveness(known)) === "live") return reuse(known, port);
  const lock = lockPath(key);
  try {
    return await withLock(
      lock,
      async () => {
        const current = readState(key);
        if (current) {
          const status = await liveness(current);
          if (status === "live") return reuse(current, port);
          if (status === "starting") {
            // Loading (started by a launch that is gone: it held the lock while waiting) or busy: wait for it rather
            // than start a second.
            const label = `waiting for the ${current.model} server (pid ${current.pid}), which is loading or busy`;
            const progress = new Progress(label);
            await waitReady(current, progress, label).catch((e: unknown) => {
              progress.done(`the ${current.model} server did not start`, false);
              throw e;
            });
            progress.done(`${current.model} is ready at ${serverUrl(current)}`);
            return current;
          }
          if (pidAlive(current.pid)) log.warn(`pid ${current.pid} is not answering as the ${current.model} server any more; forgetting it (end it yourself if it is stuck)`);
          removeState(key);
        }
        return start(await prepare(), lock, port);
      },
      { timeoutMs: READY_TIMEOUT_MS + 60_000, onWait: (pid) => log.info(`another launch (pid ${pid ?? "?"}) is starting the server; waiting for it`) },
    );
  } catch (e) {
    if (e instanceof LockTimeout) throw new CliError(`another launch (pid ${e.owner ?? "?"}) has held ${lock} for too long`, "if that process is stuck, end it and launch again");
    throw e;
  }
}

// Ends a recorded server (SIGTERM, then SIGKILL) and forgets it. A pid that no longer answers as that server is not
// signalled: after a restart of the machine it may be someone else's process.
export async function stopServer(state: ServerState): Promise<string> {
  const status = await liveness(state);
  removeState(state.key);
  if (status === "stale") {
    return pidAlive(state.pid)
      ? `forgot the ${state.model} server: pid ${state.pid} no longer answers as it, so it was left alone`
      : `the ${state.model} server (pid ${state.pid}) had already exited`;
  }
  const how = await terminate(state.pid);
  return `stopped the ${state.model} server (pid ${state.pid}${how === "killed" ? `, killed after ${STOP_TIMEOUT_MS / 1000} s` : ""})`;
}
