// The server a launcher reuses or starts: state files, liveness, the start lock, start failures, stop. The server
// here is test/fixtures/launch/scripted-serve.ts (the real HTTP server with a scripted model), started the way a
// launcher starts `splash serve`.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliError } from "../../../src/cli/_command.ts";
import { withLock } from "../../../src/launch/lock.ts";
import { pidAlive } from "../../../src/launch/process.ts";
import { ensureServer, liveness, servedModel, serveCommand, stopServer, terminate, type StartSpec } from "../../../src/launch/server.ts";
import { allStates, lockPath, readState, removeState, serverUrl, slug, statePath, writeState, type ServerState } from "../../../src/launch/state.ts";

const SCRIPTED = join(import.meta.dir, "..", "..", "fixtures", "launch", "scripted-serve.ts");
const started: number[] = [];

function scripted(key: string, extra: string[] = []): StartSpec & { starts: number } {
  const spec = {
    key,
    model: "scripted-tiny",
    starts: 0,
    command: (port: number, apiKey: string) => {
      spec.starts++;
      return [process.execPath, SCRIPTED, "--port", String(port), "--api-key", apiKey, ...extra];
    },
  };
  return spec;
}

// A pid that certainly belonged to a process that has exited.
async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

function state(o: Partial<ServerState>): ServerState {
  return { key: "scripted-tiny", model: "scripted-tiny", pid: process.pid, port: 9, apiKey: "k", version: "0.1.0", startedAt: new Date().toISOString(), log: "/dev/null", ...o };
}

beforeEach(() => {
  process.env.SPLASH_STATE_DIR = mkdtempSync(join(tmpdir(), "splash-launch-"));
});

afterAll(async () => {
  await Promise.all(started.map((pid) => terminate(pid, 2000)));
});

async function ensure(spec: StartSpec): Promise<ServerState> {
  const s = await ensureServer(spec.key, async () => spec);
  started.push(s.pid);
  return s;
}

describe("state files", () => {
  test("one file per model key, readable names for ids, hashed for paths", () => {
    expect(slug("splash-tiny")).toBe("splash-tiny");
    expect(slug("/home/me/ckpt/Qwen3.5-Tiny")).toMatch(/^home-me-ckpt-qwen3\.5-tiny-[0-9a-f]{8}$/);
    expect(slug("/a/b")).not.toBe(slug("/a-b"));
  });

  test("written and read back; a damaged file is removed", () => {
    const s = state({});
    writeState(s);
    expect(readState("scripted-tiny")).toEqual(s);
    expect(allStates()).toEqual([s]);
    writeFileSync(statePath("scripted-tiny"), "{ not json");
    expect(readState("scripted-tiny")).toBeUndefined();
    expect(existsSync(statePath("scripted-tiny"))).toBe(false);
  });
});

describe("liveness", () => {
  test("a dead pid is stale", async () => {
    expect(await liveness(state({ pid: await deadPid() }))).toBe("stale");
  });

  test("a live pid that does not answer: waited for when it is the serve process started (loading or busy)", async () => {
    const busy = Bun.spawn(["bash", "-c", "sleep 30; exit 0", "serve", "--port", "9"]);
    try {
      const old = new Date(Date.now() - 60 * 60_000).toISOString();
      expect(await liveness(state({ pid: busy.pid, port: 9, startedAt: old }))).toBe("starting");
      // The same pid on another port is not the recorded server.
      expect(await liveness(state({ pid: busy.pid, port: 10 }))).toBe("stale");
      // Nor is a process that is not a serve at all (this test runner).
      expect(await liveness(state({ pid: process.pid, port: 9 }))).toBe("stale");
      const s = state({ pid: busy.pid, port: 9, startedAt: old });
      writeState(s);
      expect(await stopServer(s)).toMatch(/^stopped the scripted-tiny server/);
      expect(pidAlive(busy.pid)).toBe(false);
    } finally {
      busy.kill();
    }
  });
});

describe("ensureServer", () => {
  test("starts a server in the background, then reuses it", async () => {
    const spec = scripted("scripted-tiny");
    const first = await ensure(spec);
    expect(spec.starts).toBe(1);
    expect(readState("scripted-tiny")).toEqual(first);
    expect(await liveness(first)).toBe("live");
    expect(await servedModel(first)).toEqual({ id: "scripted-tiny", contextLength: 65536, maxOutputTokens: 8192 });
    // The API key it was started with is required.
    expect((await fetch(`${serverUrl(first)}/v1/models`)).status).toBe(401);
    // … and never begins with "-", which the server's argument parser would take for an option
    expect(first.apiKey).toMatch(/^[0-9a-f]{48}$/);
    expect(serveCommand(undefined, 1, "-k").at(-1)).toBe("--api-key=-k");
    const again = await ensure(spec);
    expect(again.pid).toBe(first.pid);
    expect(spec.starts).toBe(1);
  });

  test("a stale state file (dead pid) is cleaned up and a new server started", async () => {
    writeState(state({ pid: await deadPid(), port: 1 }));
    const spec = scripted("scripted-tiny");
    const s = await ensure(spec);
    expect(spec.starts).toBe(1);
    expect(s.port).not.toBe(1);
    expect(await liveness(s)).toBe("live");
  });

  test("two launches at once start one server", async () => {
    const spec = scripted("scripted-tiny", ["--load-ms", "500"]);
    const [a, b] = await Promise.all([ensure(spec), ensure(spec)]);
    expect(spec.starts).toBe(1);
    expect(a.pid).toBe(b.pid);
  });

  test("two processes at once start one server", async () => {
    const script = `
      import { ensureServer } from ${JSON.stringify(join(import.meta.dir, "../../../src/launch/server.ts"))};
      const s = await ensureServer("scripted-tiny", async () => ({ key: "scripted-tiny", model: "scripted-tiny",
        command: (port, key) => [process.execPath, ${JSON.stringify(SCRIPTED)}, "--port", String(port), "--api-key", key, "--load-ms", "300"] }));
      console.log(s.pid);`;
    const run = () => Bun.spawn([process.execPath, "-e", script], { env: { ...process.env, SPLASH_LOG: "quiet" }, stdout: "pipe" });
    const procs = [run(), run()];
    const pids = await Promise.all(procs.map(async (p) => Number((await new Response(p.stdout).text()).trim())));
    started.push(...pids);
    expect(pids[0]).toBeGreaterThan(0);
    expect(pids[1]).toBe(pids[0]!);
  });

  test("a lock left by a dead process is taken over", async () => {
    mkdirSync(join(process.env.SPLASH_STATE_DIR!, "servers"), { recursive: true });
    writeFileSync(lockPath("scripted-tiny"), String(await deadPid()));
    const s = await ensure(scripted("scripted-tiny"));
    expect(await liveness(s)).toBe("live");
    expect(existsSync(lockPath("scripted-tiny"))).toBe(false);
  });

  test("a live lock holder makes the next launch wait", async () => {
    let waited = false;
    const order: string[] = [];
    const holder = withLock(lockPath("x"), async () => {
      await Bun.sleep(300);
      order.push("first");
    }, { timeoutMs: 5000 });
    await Bun.sleep(20);
    await withLock(lockPath("x"), async () => void order.push("second"), { timeoutMs: 5000, onWait: () => (waited = true) });
    await holder;
    expect(waited).toBe(true);
    expect(order).toEqual(["first", "second"]);
  });

  test("a server that exits while loading: the log's last line and its path, no state left", async () => {
    const spec = scripted("scripted-tiny", ["--fail"]);
    const e = await ensureServer(spec.key, async () => spec).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(CliError);
    expect((e as CliError).message).toMatch(/exited while starting: error: the weights are damaged/);
    expect((e as CliError).hint).toMatch(/full log: .*scripted-tiny\.log/);
    expect(readState("scripted-tiny")).toBeUndefined();
  });
});

describe("stop", () => {
  test("SIGTERM ends a server and its state file goes", async () => {
    const s = await ensure(scripted("scripted-tiny"));
    expect(await stopServer(s)).toMatch(/^stopped the scripted-tiny server/);
    expect(pidAlive(s.pid)).toBe(false);
    expect(readState("scripted-tiny")).toBeUndefined();
  });

  test("a server that ignores SIGTERM is killed after the timeout", async () => {
    const s = await ensure(scripted("scripted-tiny", ["--ignore-term"]));
    expect(await terminate(s.pid, 500)).toBe("killed");
    expect(pidAlive(s.pid)).toBe(false);
    removeState(s.key);
  });

  test("a state file whose process is gone is only removed", async () => {
    const s = state({ pid: await deadPid() });
    writeState(s);
    expect(await stopServer(s)).toMatch(/had already exited/);
    expect(readState(s.key)).toBeUndefined();
  });
});
