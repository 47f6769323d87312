// The binding's copy of the ABI against native/include/splash.h: struct layouts (src/native/layout.ts) against
// offsetof() as the C compiler lays the structs out (native/tests/abi_layout.c, built with the library) and against the
// header's member names; enum codes and limits (src/native/model.ts, inventory.ts, errors.ts, symbols.ts) against the
// header's; the symbol table against the functions the header declares.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { KV_TYPES } from "../../../src/models/kv-type.ts";
import { STATUS_NAMES } from "../../../src/native/errors.ts";
import { flatten, LAYOUTS } from "../../../src/native/layout.ts";
import { ARCH_CODES, BACKEND_CODES, DRAFTER_CODES, MAX_TOP_LOGPROBS, QUANT_CODES } from "../../../src/native/model.ts";
import { MAX_DIMS, PART_CODES, WEIGHT_CODES } from "../../../src/native/inventory.ts";
import { ABI_VERSION, symbols } from "../../../src/native/symbols.ts";

const exe = join(import.meta.dir, "../../../build/tests/abi_layout");

test("every ABI struct field sits where the C compiler puts it", async () => {
  expect(existsSync(exe)).toBe(true);
  const c = JSON.parse(await new Response(Bun.spawn([exe]).stdout).text()) as Record<
    string,
    { size: number; fields: Record<string, number> }
  >;
  for (const layout of LAYOUTS) {
    const native = c[layout.name];
    expect(native, layout.name).toBeDefined();
    const ours = Object.fromEntries(flatten(layout).map((f) => [f.name, f.offset]));
    expect({ size: layout.size, fields: ours }).toEqual({ size: native!.size, fields: native!.fields });
  }
});

// The header itself, read as text: its enum codes and numeric #defines, and the member names of each ABI struct.
const header = readFileSync(join(import.meta.dir, "../../../native/include/splash.h"), "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
const constants = new Map<string, number>(
  [...header.matchAll(/\b(SPLASH_[A-Z0-9_]+)\s*=\s*(\d+)/g), ...header.matchAll(/#define\s+(SPLASH_[A-Z0-9_]+)\s+(\d+)\s*$/gm)].map((m) => [m[1]!, Number(m[2])]),
);
const withPrefix = (prefix: string) => new Map([...constants].filter(([name]) => name.startsWith(prefix)).map(([name, v]) => [name.slice(prefix.length).toLowerCase(), v]));

test("every enum code and limit the binding uses is the header's", () => {
  const asMap = (codes: Record<string, number>) => new Map(Object.entries(codes));
  expect(asMap(QUANT_CODES)).toEqual(withPrefix("SPLASH_QUANT_"));
  expect(asMap(BACKEND_CODES)).toEqual(withPrefix("SPLASH_BACKEND_"));
  expect(asMap(ARCH_CODES)).toEqual(withPrefix("SPLASH_ARCH_"));
  expect(asMap({ none: 0, ...DRAFTER_CODES })).toEqual(withPrefix("SPLASH_DRAFT_"));
  expect(new Map<string, number>(KV_TYPES.map((t, code) => [t, code]))).toEqual(withPrefix("SPLASH_KV_"));
  expect(STATUS_NAMES.map((name) => constants.get(name))).toEqual(STATUS_NAMES.map((_, code) => code));
  expect([...constants.keys()].filter((k) => /^SPLASH_(OK|ERR_)/.test(k))).toEqual([...STATUS_NAMES]);
  expect(asMap(PART_CODES)).toEqual(withPrefix("SPLASH_PART_"));
  expect(asMap(WEIGHT_CODES)).toEqual(withPrefix("SPLASH_WEIGHT_"));
  expect(Object.keys(WEIGHT_CODES).length).toBe(constants.get("SPLASH_N_WEIGHT_TYPES")!);
  expect(MAX_DIMS).toBe(constants.get("SPLASH_MAX_DIMS")!);
  expect(MAX_TOP_LOGPROBS).toBe(constants.get("SPLASH_MAX_TOP_LOGPROBS")!);
  expect(ABI_VERSION).toBe(constants.get("SPLASH_ABI_VERSION")!);
});

// A field the header gains but neither abi_layout.c nor layout.ts names would pass the offset check above unseen.
test("every ABI struct's fields are the header's, by name and in order", () => {
  for (const layout of LAYOUTS) {
    const body = header.match(new RegExp(`typedef struct ${layout.name} \\{([\\s\\S]*?)\\} ${layout.name};`))?.[1];
    expect(body, layout.name).toBeDefined();
    const names = body!
      .split(";")
      .map((decl) => decl.trim())
      .filter(Boolean)
      .flatMap((decl) => decl.replace(/^[\w\s]*?\b(?:const\s+)?\w+\s*\**\s*(?=\w+\s*(?:\[|,|$))/, "").split(","))
      .map((name) => name.replace(/[*\s]|\[.*\]/g, ""));
    expect(names, layout.name).toEqual(Object.keys(layout.fields));
  }
});

// A function the header gains but the table lacks is unreachable from TypeScript; one it drops or reshapes would
// fail only when called.
test("the symbol table binds every function the header declares, with its number of arguments", () => {
  const declared = new Map(
    [...header.matchAll(/SPLASH_API\s+[\w\s*]*?\b(splash_\w+)\s*\(([^)]*)\)/g)].map((m) => [m[1]!, m[2]!.trim() === "void" ? 0 : m[2]!.split(",").length]),
  );
  expect(declared.size).toBeGreaterThan(40);
  expect(new Map<string, number>(Object.entries(symbols).map(([name, s]) => [name, s.args.length]))).toEqual(declared);
});
