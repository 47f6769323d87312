import { describe, expect, test } from "bun:test";
import type { ArgsDef } from "citty";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkArgs, kebab, parseOption, sizeOption, intOption, UsageError } from "../../../src/cli/_command.ts";
import { renderUsage, wantsColor } from "../../../src/cli/usage.ts";
import { repoRoot, splash, splashOnTerminal } from "../../helpers/cli.ts";
import { everyCommand } from "../../helpers/commands.ts";

const args: ArgsDef = {
  model: { type: "positional", required: false },
  port: { type: "string" },
  json: { type: "boolean" },
  draft: { type: "enum", options: ["auto", "none"] },
  apiKey: { type: "string" },
};

describe("strict argument check", () => {
  test("accepts declared flags, kebab-case names, --no- booleans and inline values", () => {
    expect(() => checkArgs("x", args, ["m", "--port", "9000", "--json", "--api-key=k", "--no-json"])).not.toThrow();
  });
  test("refuses an unknown flag and lists what is accepted", () => {
    expect(() => checkArgs("x", args, ["--prot", "9000"])).toThrow(/unknown option --prot \(accepted: .*--port/);
  });
  test("refuses a string flag without a value", () => {
    expect(() => checkArgs("x", args, ["--port"])).toThrow(/option --port needs a value/);
    expect(() => checkArgs("x", args, ["--port", "--json"])).toThrow(/needs a value/);
  });
  test("refuses extra positionals", () => {
    expect(() => checkArgs("x", args, ["a", "b"])).toThrow(/too many arguments/);
  });
  test("stops at -- (arguments after it belong to another program)", () => {
    expect(() => checkArgs("x", args, ["--", "--whatever", "x", "y"])).not.toThrow();
  });
  test("negative numbers are values, not flags", () => {
    expect(() => checkArgs("x", args, ["--port", "-1"])).not.toThrow();
  });
});

describe("option values", () => {
  test("sizes in binary units", () => {
    expect(parseOption("x", "kv-budget", sizeOption, "8G")).toBe(8 * 2 ** 30);
    expect(parseOption("x", "kv-budget", sizeOption, "512MiB")).toBe(512 * 2 ** 20);
    expect(parseOption("x", "kv-budget", sizeOption, "1.5g")).toBe(1.5 * 2 ** 30);
    expect(() => parseOption("x", "kv-budget", sizeOption, "lots")).toThrow(/--kv-budget "lots": expected a size/);
  });
  test("integers with bounds", () => {
    expect(parseOption("x", "port", intOption(1, 65535), "8080")).toBe(8080);
    expect(() => parseOption("x", "port", intOption(1, 65535), "80.5")).toThrow(UsageError);
    expect(() => parseOption("x", "port", intOption(1, 65535), "70000")).toThrow(/≤ 65535/);
  });
});

describe("splash CLI", () => {
  test("--version prints the package version", async () => {
    const r = await splash(["--version"]);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
  test("an unknown command exits 2 with a one-line message and what to do", async () => {
    const r = await splash(["frobnicate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("Unknown command frobnicate");
    expect(r.stderr).toContain("splash --help");
  });
  test("--help of a subcommand's subcommand is its own", async () => {
    const r = await splash(["bench", "decode", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("bench decode [OPTIONS]");
    expect(r.stdout).toContain("--layers");
  });
  test("an unknown flag exits 2 naming the flag", async () => {
    const r = await splash(["doctor", "--bogus"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option --bogus");
    expect(r.stderr).toContain("splash doctor --help");
  });
  test("doctor reports the machine and the library", async () => {
    const r = await splash(["doctor", "--json"]);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.cores).toBeGreaterThan(0);
    expect(report.totalMemory).toBeGreaterThan(0);
    expect(report.library.abi).toBeGreaterThan(0);
  });
});

describe("CLI conventions", () => {
  test("every command's help names its options in kebab-case, with no trailing spaces and no escapes off a terminal", async () => {
    const commands = await everyCommand();
    expect(commands.length).toBeGreaterThan(20);
    for (const [words, cmd] of commands) {
      const text = await renderUsage(cmd, words, false);
      expect(text, words.join(" ")).not.toMatch(/--[a-z]+[A-Z]/);
      expect(text, words.join(" ")).not.toMatch(/[ \t]$/m);
      expect(text).not.toContain("\x1b");
      const args = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
      for (const [name, def] of Object.entries(args)) {
        if (def.type === "positional") continue;
        const flag = def.type === "boolean" && def.default === true ? `--no-${kebab(name)}` : `--${kebab(name)}`;
        expect(text, `${words.join(" ")} ${flag}`).toContain(flag);
      }
    }
    const serve = await splash(["serve", "--help"]);
    expect(serve.stdout).toContain("--api-key <api-key>");
    expect(serve.stdout).toContain("--kv-budget <kv-budget>");
    expect(serve.stdout).toContain("--allow-image-urls");
    expect(serve.stdout).not.toContain("\x1b");
  });

  test("an unknown option lists the accepted ones as they are typed", async () => {
    const r = await splash(["run", "--maxtokens", "3", "hi"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--max-tokens");
    expect(r.stderr).not.toContain("--maxTokens");
  });

  test("colour only on a terminal, and never with NO_COLOR", async () => {
    expect(wantsColor({ isTTY: false })).toBe(false);
    const saved = process.env.NO_COLOR;
    try {
      delete process.env.NO_COLOR;
      expect(wantsColor({ isTTY: true })).toBe(true);
      process.env.NO_COLOR = "1";
      expect(wantsColor({ isTTY: true })).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.NO_COLOR;
      else process.env.NO_COLOR = saved;
    }
    const tty = await splashOnTerminal(["serve", "--help"], { env: { NO_COLOR: undefined } });
    expect(tty.output).toContain("\x1b[36m--api-key");
    const plain = await splashOnTerminal(["serve", "--help"], { env: { NO_COLOR: "1" } });
    expect(plain.output).toContain("--api-key <api-key>");
    expect(plain.output).not.toContain("\x1b");
  });

  test("log lines on a terminal are plain text, not red", async () => {
    const r = await splashOnTerminal(["run", "--max-tokens", "2", "--no-think", "hi"], { env: { NO_COLOR: undefined } });
    expect(r.code).toBe(0);
    expect(r.output).toContain("loading splash-tiny from ");
    expect(r.output).toContain("loaded splash-tiny in ");
    expect(r.output).not.toContain("\x1b[31m");
    const failed = await splashOnTerminal(["tokenize", "/no/such/model"]);
    expect(failed.output).toContain("splash error: /no/such/model is not a directory");
    expect(failed.output).not.toContain("\x1b");
  }, 60_000);

  test("no output line ends in a space", async () => {
    for (const args of [["models"], ["doctor"], ["--help"], ["bench", "--help"]]) {
      const r = await splash(args);
      expect(r.code, args.join(" ")).toBe(0);
      expect(`${r.stdout}${r.stderr}`, args.join(" ")).not.toMatch(/[ \t]$/m);
    }
  });

  test("splash version prints what --version prints", async () => {
    const [a, b] = await Promise.all([splash(["version"]), splash(["--version"])]);
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect(a.stdout).toBe(b.stdout);
  });

  test("tokenize without MODEL uses the embedded model", async () => {
    const [bare, named] = await Promise.all([splash(["tokenize"], { stdin: "hello world" }), splash(["tokenize", "splash-tiny"], { stdin: "hello world" })]);
    expect(bare.code).toBe(0);
    expect(JSON.parse(bare.stdout).length).toBeGreaterThan(0);
    expect(bare.stdout).toBe(named.stdout);
  });

  test("models --json reports the directory each model loads from: an import before the files it came from", async () => {
    const cache = mkdtempSync(join(tmpdir(), "splash-cache-"));
    const loadsFrom = async () => {
      const r = await splash(["models", "--json"], { env: { SPLASH_CACHE_DIR: cache } });
      expect(r.code).toBe(0);
      return Object.fromEntries((JSON.parse(r.stdout) as { id: string; loadsFrom: string | null }[]).map((m) => [m.id, m.loadsFrom]));
    };
    const before = await loadsFrom();
    expect(before["splash-tiny"]).toBe(join(repoRoot, "models", "splash-tiny"));
    expect(before["qwen3.8-27b"]).toBeNull();
    expect((await splash(["import", "--quant", "q8"], { env: { SPLASH_CACHE_DIR: cache } })).code).toBe(0);
    expect((await loadsFrom())["splash-tiny"]).toBe(join(cache, "packed", "splash-tiny", "q8"));
    const served = await splash(["run", "--max-tokens", "1", "--no-think", "hi"], { env: { SPLASH_CACHE_DIR: cache } });
    expect(served.stderr).toContain(`loading splash-tiny from ${join(cache, "packed", "splash-tiny", "q8")}`);
  }, 60_000);

  test("doctor names the backend serve would use, and why not a GPU", async () => {
    const auto = await splash(["doctor", "--json"], { env: { SPLASH_BACKEND: "" } });
    const report = JSON.parse(auto.stdout) as { backend: { asked: string; runsOn: string | null; why: string } };
    expect(report.backend.asked).toBe("auto");
    expect(report.backend.runsOn).toMatch(/^(cpu|vulkan: .+|metal: .+)$/);
    if (report.backend.runsOn === "cpu") expect(report.backend.why).toMatch(/vulkan|metal/);
    const cpu = await splash(["doctor"], { env: { SPLASH_BACKEND: "cpu" } });
    expect(cpu.stdout).toMatch(/^backend {4}cpu \(SPLASH_BACKEND=cpu\)$/m);
    if (process.platform !== "darwin") {
      const metal = await splash(["doctor"], { env: { SPLASH_BACKEND: "metal" } });
      expect(metal.stdout).toMatch(/^backend {4}none: this libsplash was built without the Metal backend .*\(SPLASH_BACKEND=metal\)$/m);
    }
  });
});
