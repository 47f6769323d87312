// The load flags (--backend, --threads, --kv-type, --quant): one definition and one meaning in every command.
import { describe, expect, test } from "bun:test";
import type { ArgsDef } from "citty";
import { UsageError } from "../../../src/cli/_command.ts";
import { loadFlags, MAX_THREADS, parseLoadFlags, parseQuant, parseQuants, parseThreads } from "../../../src/cli/_load-flags.ts";
import { QUANTS } from "../../../src/models/spec.ts";
import { splash } from "../../helpers/cli.ts";
import { everyCommand } from "../../helpers/commands.ts";

describe("parsing", () => {
  test("--threads is 1 … MAX_THREADS; left out, undefined (one per core)", () => {
    expect(parseThreads("x", undefined)).toBeUndefined();
    expect(parseThreads("x", "1")).toBe(1);
    expect(parseThreads("x", String(MAX_THREADS))).toBe(MAX_THREADS);
    for (const bad of ["0", "-2", "1.5", "many", String(MAX_THREADS + 1)]) expect(() => parseThreads("x", bad)).toThrow(UsageError);
    expect(() => parseThreads("import", "0")).toThrow(/--threads "0": expected an integer ≥ 1/);
  });

  test("--quant names a level: bf16 (as stored), q8 or q4", () => {
    for (const q of QUANTS) expect(parseQuant("x", q)).toBe(q);
    expect(parseQuant("x", undefined)).toBeUndefined();
    expect(() => parseQuant("x", "none")).toThrow(/--quant "none": expected bf16, q8, q4/);
    expect(() => parseQuant("import", "bf16", ["q8", "q4"])).toThrow(/--quant "bf16": expected q8, q4/);
  });

  test("a benchmark's --quant lists levels, each once, in the order given", () => {
    expect(parseQuants("x", undefined, ["q8", "q4"], ["q8", "q4"])).toEqual(["q8", "q4"]);
    expect(parseQuants("x", "q4", ["q8", "q4"], ["q8", "q4"])).toEqual(["q4"]);
    expect(parseQuants("x", "q4, q8", ["q8", "q4"], ["q8", "q4"])).toEqual(["q4", "q8"]);
    expect(() => parseQuants("x", "q4,q5", ["q8", "q4"], ["q8"])).toThrow(/--quant "q5": expected q8, q4/);
    expect(() => parseQuants("x", "q4,q4", ["q8", "q4"], ["q8"])).toThrow(/named twice/);
    expect(() => parseQuants("x", "", ["q8", "q4"], ["q8"])).toThrow(UsageError);
  });

  test("the load flags together", () => {
    expect(parseLoadFlags("x", {})).toEqual({ kvType: "auto" });
    expect(parseLoadFlags("x", { backend: "cpu", threads: "3", kvType: "int8" })).toEqual({ backend: "cpu", threads: 3, kvType: "int8" });
    expect(() => parseLoadFlags("x", { backend: "cuda" })).toThrow(/--backend "cuda"/);
  });
});

describe("every command", () => {
  test("declares --backend, --threads and --kv-type as the shared definition, and --quant as a weight level", async () => {
    const seen = new Map<string, string[]>();
    for (const [words, cmd] of await everyCommand()) {
      const args = ((typeof cmd.args === "function" ? await cmd.args() : await cmd.args) ?? {}) as ArgsDef;
      const name = words.join(" ");
      for (const flag of ["backend", "kvType"] as const) if (args[flag]) expect(args[flag], `${name} --${flag}`).toBe(loadFlags[flag]);
      // bench peers adds who the threads serve (both engines) to the shared text
      if (args.threads) expect(args.threads.description, `${name} --threads`).toStartWith(loadFlags.threads.description);
      if (args.threads) expect(args.threads.type).toBe("string");
      if (args.quant) expect(args.quant.description, `${name} --quant`).toMatch(/^Weight levels?( to measure, comma-separated)?: (bf16 \(as stored\), )?q8 or q4 \(default:? [^)]+\)$/);
      for (const flag of ["backend", "threads", "kvType", "quant"]) if (args[flag]) seen.set(flag, [...(seen.get(flag) ?? []), name]);
    }
    // the commands that load a model take them (a command losing one fails here)
    expect(seen.get("threads")).toEqual(expect.arrayContaining(["splash serve", "splash run", "splash logits", "splash import", "splash bench decode", "splash bench peers", "splash bench serve", "splash bench spec", "splash bench kv", "splash bench memory", "splash bench grammar"]));
    expect(seen.get("quant")).toEqual(expect.arrayContaining(["splash serve", "splash logits", "splash import", "splash bench decode", "splash bench peers", "splash bench serve", "splash bench spec"]));
  });

  test("a wrong value exits 2 naming the flag and what it accepts, before anything loads", async () => {
    const cases: [string[], RegExp][] = [
      [["import", "--threads", "0"], /--threads "0": expected an integer ≥ 1/],
      [["import", "--quant", "bf16"], /--quant\b.*\bbf16\b.*q8, q4/], // citty checks an enum flag's value first
      [["logits", "/nonexistent", "--tokens", "1", "--out", "/dev/null", "--quant", "none"], /--quant/],
      [["serve", "--threads", "2000"], /--threads "2000": expected an integer ≤ 1024/],
      [["bench", "decode", "--quant", "q8,bf16"], /--quant "bf16": expected q8, q4/],
      [["bench", "peers", "--threads", "0"], /--threads "0"/],
      [["bench", "serve", "--quant", "none"], /--quant/],
      [["bench", "spec", "--threads", "x"], /--threads "x": expected an integer/],
    ];
    for (const [argv, message] of cases) {
      const r = await splash(argv);
      expect(r.code, argv.join(" ")).toBe(2);
      expect(r.stderr, argv.join(" ")).toMatch(message);
    }
  });
});
