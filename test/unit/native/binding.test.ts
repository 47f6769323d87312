import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import embeddedPath from "../../../build/native-lib.ts";
import { extractLibrary, native, NativeLibraryError, openLibrary } from "../../../src/native/library.ts";
import { ABI_VERSION } from "../../../src/native/symbols.ts";

describe("native binding", () => {
  test("loads the library and reports its ABI and version", async () => {
    const lib = native();
    expect(lib.splash_abi_version()).toBe(ABI_VERSION);
    expect(String(lib.splash_version())).toMatch(/^\d+\.\d+\.\d+/);
  });

  test("an ABI mismatch is a clear error naming both versions and the fix", () => {
    expect(() => openLibrary(embeddedPath, ABI_VERSION + 1)).toThrow(NativeLibraryError);
    try {
      openLibrary(embeddedPath, ABI_VERSION + 1);
    } catch (e) {
      const msg = (e as Error).message;
      expect(msg).toContain(`ABI version ${ABI_VERSION}`);
      expect(msg).toContain(`needs ${ABI_VERSION + 1}`);
      expect(msg).toContain("build:native");
    }
  });

  test("a missing or corrupt library file is a clear error", () => {
    const dir = mkdtempSync(join(tmpdir(), "splash-lib-"));
    expect(() => openLibrary(join(dir, "nope.so"))).toThrow(/cannot load the native library .*nope\.so/);
    const bad = join(dir, "bad.so");
    writeFileSync(bad, "not an ELF file");
    expect(() => openLibrary(bad)).toThrow(NativeLibraryError);
  });

  test("a path on disk is used as it is, without extraction", async () => {
    expect(extractLibrary(embeddedPath)).toBe(embeddedPath);
  });
});
