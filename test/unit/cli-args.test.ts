import { describe, expect, test } from "bun:test";
import type { ArgsDef } from "citty";
import { checkArgs, parseOption, sizeOption, intOption, UsageError } from "../../src/cli/_command.ts";
import { splash } from "../helpers/cli.ts";

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
