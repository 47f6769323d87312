// Finds, extracts and opens libsplash, and checks that its ABI is the one this binding was written for.
//
// Under `bun run` the library is build/libsplash.{so,dylib}. Inside the compiled binary it is an embedded file at a
// /$bunfs/ path that dlopen cannot use directly without leaving temp files behind (bun-stack.md), so it is copied
// once to <cache>/lib/<name>; the name carries Bun's content hash, so a new build never reuses an old copy. Two
// processes starting at once both write a private temp file and rename it into place: rename is atomic, and both
// copies are identical, so either winner is fine. Loading is synchronous, so code that only asks the library a question
// (which files a checkpoint is) needs no async path.
import { dlopen } from "bun:ffi";
import { mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import embeddedPath from "../../build/native-lib.ts";
import { cacheDir } from "../paths.ts";
import { ABI_VERSION, symbols } from "./symbols.ts";

export type NativeLibrary = ReturnType<typeof dlopen<typeof symbols>>["symbols"];

export class NativeLibraryError extends Error {
  override name = "NativeLibraryError";
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return -1;
  }
}

// Returns a path dlopen can open: the library itself on disk, or its extracted copy in the cache.
export function extractLibrary(path: string, cache = join(cacheDir(), "lib")): string {
  if (!path.startsWith("/$bunfs/") && !/^[A-Z]:\\~BUN\\/.test(path)) return path;
  const target = join(cache, basename(path));
  if (fileSize(target) === Bun.file(path).size) return target;
  mkdirSync(cache, { recursive: true });
  const tmp = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, readFileSync(path));
  renameSync(tmp, target);
  return target;
}

// Where each opened library came from: its call thread (call-thread.ts) opens the same file.
const paths = new WeakMap<NativeLibrary, string>();

// The file `lib` was opened from.
export function libraryPath(lib: NativeLibrary): string {
  const path = paths.get(lib);
  if (path === undefined) throw new Error("this library was not opened by openLibrary");
  return path;
}

// Opens the library at `path` and checks its ABI version against `expectedAbi`.
export function openLibrary(path: string, expectedAbi = ABI_VERSION): NativeLibrary {
  let lib: NativeLibrary;
  try {
    lib = dlopen(path, symbols).symbols;
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    throw new NativeLibraryError(`cannot load the native library ${path}: ${why}`);
  }
  const abi = lib.splash_abi_version();
  if (abi !== expectedAbi) {
    throw new NativeLibraryError(
      `native library ${path} has ABI version ${abi}, but this build of splash needs ${expectedAbi}: ` +
        `rebuild it with \`bun run build:native\` (or delete ${path} if it is a stale extracted copy)`,
    );
  }
  paths.set(lib, path);
  return lib;
}

let loaded: NativeLibrary | undefined;

// The process's library, loaded on first use. SPLASH_LIB points at another build (tests, debug builds).
export function native(): NativeLibrary {
  loaded ??= openLibrary(process.env.SPLASH_LIB ?? extractLibrary(embeddedPath));
  return loaded;
}
