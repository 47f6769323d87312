// Builds libsplash (native/) with the system C compiler, plus the small C programs in native/tests and
// native/tools (linked against the same objects, so they can reach internal functions; the sanitizer build has
// native/tests only).
//
//   bun scripts/build/native.ts            release: -O3, build/libsplash.{so,dylib}
//   bun scripts/build/native.ts --debug    -O1 -g with AddressSanitizer + UBSan, into build/debug/
//   bun scripts/build/native.ts --cpu-only release without the GPU backends, into build/cpu-only/ (what a machine
//                                          without the Vulkan headers builds; the suite checks it builds and serves)
//
// Per-ISA kernels live in files named *_avx2.c, *_avxvnni.c, *_avx512.c, *_neon.c. Only those files get the ISA's flags, and
// the library picks them at run time from the detected CPU, so one build runs on any x86-64 (ARCHITECTURE.md §4).
// Objects are rebuilt when the source or a header it includes (from the compiler's depfile) is newer.
import { $ } from "bun";
import { existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { basename, dirname, join, relative } from "node:path";

const root = join(import.meta.dir, "..", "..");
const debug = process.argv.includes("--debug");
const cpuOnly = process.argv.includes("--cpu-only");
const verbose = process.argv.includes("--verbose");
const out = join(root, "build", debug ? "debug" : cpuOnly ? "cpu-only" : "");
const cc = process.env.CC ?? "cc";
const arch = process.arch; // "x64" | "arm64"
const isMac = process.platform === "darwin";
const metalLib = isMac && !cpuOnly; // the Metal backend is part of the library
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version as string;

const common = [
  "-std=c11",
  "-fPIC",
  "-pthread",
  "-fvisibility=hidden",
  "-Wall",
  "-Wextra",
  "-Werror",
  "-Wno-unused-parameter",
  "-DSPLASH_BUILD",
  "-D_GNU_SOURCE",
  `-DSPLASH_VERSION_STRING="${version}"`,
  `-I${join(root, "native", "include")}`,
  `-I${join(root, "native")}`,
  ...(debug ? ["-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer"] : ["-O3", "-DNDEBUG"]),
];

// Flags for a source file by its ISA suffix; null = not built on this machine.
function isaFlags(file: string): string[] | null {
  const name = basename(file, ".c");
  if (name.endsWith("_avx2")) return arch === "x64" ? ["-mavx2", "-mfma", "-mf16c"] : null;
  if (name.endsWith("_avxvnni")) return arch === "x64" ? ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"] : null;
  if (name.endsWith("_avx512"))
    return arch === "x64" ? ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma", "-mf16c"] : null;
  if (name.endsWith("_neon")) return arch === "arm64" ? ["-march=armv8.2-a+dotprod+fp16"] : null;
  return [];
}

// The Vulkan backend is built where glslang (kernels → SPIR-V, embedded by kernels/generate.ts) and the Vulkan headers
// are found; libvulkan itself is opened at run time. Elsewhere the library has the CPU backend only.
const vulkan = isMac || cpuOnly ? null : await vulkanKernels();
if (vulkan) common.push("-DSPLASH_HAVE_VULKAN", `-I${dirname(vulkan.source)}`);

async function vulkanKernels() {
  const headers = await $`echo "#include <vulkan/vulkan.h>" | ${cc} -E -x c -`.nothrow().quiet();
  if (headers.exitCode !== 0) return null;
  const { generate } = await import("../../kernels/generate.ts");
  return generate(join(out, "gen"));
}

// The Metal backend (kernels/msl/, embedded by scripts/build/msl.ts). On macOS it is part of the library, its device
// layer in Objective-C (*.m) linked with the Metal framework. On Linux its portable C is built only into the
// native/tests/metal_* programs, which run it over the Vulkan device (so it needs the Vulkan backend there); a
// kernels/msl/ that is stale for the kernels listed now leaves those programs out here (the test that needs them
// fails) and fails the build on macOS.
const metal = metalLib || vulkan ? await metalKernels() : null;
if (metal) common.push(`-I${dirname(metal.source)}`);

async function metalKernels() {
  const { embed } = await import("./msl.ts");
  try {
    return embed(join(out, "gen"));
  } catch (e) {
    if (metalLib) throw e;
    console.error(`native build: no Metal host programs: ${(e as Error).message}`);
    return null;
  }
}
// macOS 15 has every Metal call the backend makes (residency sets, math modes); the product's own minimum (26.4) is
// checked by `splash doctor`, not by the loader, so the library also loads on the CI's macOS 15 runners.
const macMin = "-mmacosx-version-min=15.0";
if (isMac) common.push(macMin);
if (metalLib) common.push("-DSPLASH_HAVE_METAL");

// Folders whose sources are not part of the library: test and tool programs, and backends built elsewhere (the GPU op
// layer, native/backends/gpu/, comes with either GPU backend).
const excluded = [
  "native/tests/",
  "native/tools/",
  ...(metalLib ? [] : ["native/backends/metal/"]),
  ...(vulkan ? [] : ["native/backends/vulkan/"]),
  ...(vulkan || metalLib ? [] : ["native/backends/gpu/"]),
];

async function sources(dir: string): Promise<string[]> {
  if (!existsSync(join(root, dir))) return [];
  const glob = new Bun.Glob(isMac ? "**/*.{c,m}" : "**/*.c");
  const files: string[] = [];
  for await (const f of glob.scan({ cwd: join(root, dir) })) files.push(join(dir, f));
  return files.sort();
}

function newer(obj: string, dep: string): boolean {
  return !existsSync(obj) || statSync(dep).mtimeMs > statSync(obj).mtimeMs;
}

// The compiler and flags every object was built with: when they change (glslang or the Vulkan headers installed since
// the last build turn SPLASH_HAVE_VULKAN on, say), every object is rebuilt, since mtimes alone would not tell.
const flagsFile = join(out, "obj", "flags.txt");
const signature = [cc, ...common].join(" ");
const flagsChanged = !existsSync(flagsFile) || readFileSync(flagsFile, "utf8") !== signature;

// True when the flags changed, or the object is missing or older than its source or any header in its depfile.
function stale(src: string, obj: string): boolean {
  if (flagsChanged || newer(obj, join(root, src))) return true;
  const depfile = obj.replace(/\.o$/, ".d");
  if (!existsSync(depfile)) return true;
  const deps = readFileSync(depfile, "utf8").replace(/\\\n/g, " ").split(/\s+/).slice(1).filter(Boolean);
  return deps.some((d) => !existsSync(d) || newer(obj, d));
}

async function compile(src: string): Promise<string | null> {
  const flags = isaFlags(src);
  if (flags === null) return null;
  const obj = join(out, "obj", src.replace(/\.[cm]$/, ".o"));
  if (stale(src, obj)) {
    mkdirSync(dirname(obj), { recursive: true });
    // Written under a private name and renamed: several builds may share one tree (helpers, tests).
    const tmp = `${obj}.${process.pid}.tmp`;
    const dep = obj.replace(/\.o$/, ".d");
    const lang = src.endsWith(".m") ? ["-x", "objective-c", "-fobjc-arc"] : [];
    const args = [...common, ...lang, ...flags, "-MMD", "-MF", `${dep}.${process.pid}.tmp`, "-MT", obj, "-c", join(root, src), "-o", tmp];
    if (verbose) console.error([cc, ...args].join(" "));
    const r = await $`${cc} ${args}`.nothrow().quiet();
    if (r.exitCode !== 0) throw new Error(`compiling ${src} failed:\n${r.stderr.toString()}${r.stdout.toString()}`);
    renameSync(`${dep}.${process.pid}.tmp`, dep);
    renameSync(tmp, obj);
  }
  return obj;
}

// Runs `jobs` async tasks with at most `limit` at a time, keeping results in order.
async function pool<T>(items: string[], limit: number, fn: (s: string) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

const libFiles = (await sources("native")).filter((f) => !excluded.some((e) => f.startsWith(e)));
if (vulkan) libFiles.push(relative(root, vulkan.source), relative(root, vulkan.tables));
if (metalLib && metal) libFiles.push(relative(root, metal.source), relative(root, metal.tables));
const jobs = Math.max(1, cpus().length);
const objs = (await pool(libFiles, jobs, compile)).filter((o): o is string => o !== null);

const libName = isMac ? "libsplash.dylib" : "libsplash.so";
const lib = join(out, libName);
// CoreGraphics: without it MTLCreateSystemDefaultDevice returns nil in a process that is not an app (Apple's docs).
const frameworks = ["-framework", "Metal", "-framework", "Foundation", "-framework", "CoreGraphics", macMin];
const libs = ["-lm", "-pthread", ...(isMac ? frameworks : ["-ldl"])];
const sanitize = debug ? ["-fsanitize=address,undefined"] : [];
if (!existsSync(lib) || objs.some((o) => newer(lib, o))) {
  const shared = isMac ? ["-dynamiclib", "-install_name", "@rpath/libsplash.dylib"] : ["-shared"];
  const tmp = `${lib}.${process.pid}.tmp`;
  const r = await $`${cc} ${shared} ${sanitize} -o ${tmp} ${objs} ${libs}`.nothrow().quiet();
  if (r.exitCode !== 0) throw new Error(`linking ${libName} failed:\n${r.stderr.toString()}`);
  renameSync(tmp, lib);
}

// Programs: each native/tests/*.c and native/tools/*.c is one executable, linked with the library's objects (on
// Linux, metal_* programs also with the Metal backend's portable C, which is not in the library there). The sanitizer
// build has the test programs only: the tools (labs, benchmarks) run at full speed or not at all, and each linked
// copy of the library costs tens of megabytes on the test machine's disk.
const programs = [...(await sources("native/tests")), ...(debug ? [] : await sources("native/tools"))].filter(
  (f) =>
    (dirname(f) === "native/tests" || dirname(f) === "native/tools") &&
    (vulkan || !basename(f).startsWith("vulkan_")) &&
    (metal || !basename(f).startsWith("metal_")),
);
const metalPortable = !isMac && metal ? [...(await sources("native/backends/metal")), relative(root, metal.source)] : [];
const metalObjs = (await pool(metalPortable, jobs, compile)).filter((o): o is string => o !== null);
await pool(programs, jobs, async (src) => {
  const obj = await compile(src);
  if (!obj) return;
  const exe = join(out, basename(dirname(src)), basename(src, ".c"));
  const deps = [...(basename(src).startsWith("metal_") ? metalObjs : []), ...objs];
  if (existsSync(exe) && !newer(exe, obj) && !deps.some((o) => newer(exe, o))) return;
  mkdirSync(dirname(exe), { recursive: true });
  const r = await $`${cc} ${sanitize} -o ${exe}.${process.pid}.tmp ${obj} ${deps} ${libs}`.nothrow().quiet();
  if (r.exitCode !== 0) throw new Error(`linking ${relative(root, exe)} failed:\n${r.stderr.toString()}`);
  renameSync(`${exe}.${process.pid}.tmp`, exe);
});

if (flagsChanged) writeFileSync(flagsFile, signature);
if (verbose) console.error(`built ${relative(root, lib)} from ${objs.length} objects`);

// The module through which the binding imports the library as an embedded file: `bun build --compile` then carries
// it inside dist/splash, and `bun run` gets the path on disk (src/native/library.ts).
const embed = join(out, "native-lib.ts");
const embedSource = `// Generated by scripts/build/native.ts.\nimport path from "./${libName}" with { type: "file" };\nexport default path;\n`;
if (!existsSync(embed) || readFileSync(embed, "utf8") !== embedSource) await Bun.write(embed, embedSource);
