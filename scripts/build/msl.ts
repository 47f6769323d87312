// The Metal kernels: every SPIR-V kernel of kernels/ translated to Metal Shading Language by SPIRV-Cross, its
// interface read back and checked, and the result committed in kernels/msl/ (one .metal per kernel and a manifest);
// plus the C table the Metal host compiles, made from those committed files by bun alone.
//
//   bun scripts/build/msl.ts            regenerate kernels/msl/ (needs glslang-tools, spirv-tools, spirv-cross)
//   bun scripts/build/msl.ts --check    exit 1 when kernels/msl/ is not what kernels/ translates to now
//
// Why committed: the Mac runs byte for byte the text checked here (Homebrew's SPIRV-Cross is another version and
// would emit other text), and a Mac build needs no shader tools. When a kernel changes, the test that compares
// kernels/msl/ with a fresh translation fails until this script is run again.
//
// What a kernel's interface is, and where each part is checked (test/unit/kernels/metal-translate.test.ts):
// - The push constants are the only argument: kernels read every buffer through 64-bit device addresses
//   (kernels/common.glsl), which SPIRV-Cross turns into `device T*` casts. The translated entry point takes
//   `constant P& p [[buffer(0)]]` plus built-ins; `--msl-decoration-binding` pins that index. The manifest
//   records P's fields with their MSL offsets, which must equal the SPIR-V (std430) offsets the host fills.
// - Specialization constants become function constants with the same ids (the host sets each one the kernel
//   declares, and only those); workgroup-size constants must be dispatched as threads per threadgroup.
// - Shared arrays must have literal sizes (Metal forbids function constants there); their total must fit the
//   32 KiB of threadgroup memory every Apple GPU has.
// Kernels written in MSL by hand (kernels/*.metal, marked metalOnly in kernels/generate.ts: the GEMM on simdgroup
// matrices, which SPIRV-Cross cannot make) are not translated and not in the manifest: the C table takes their text
// from kernels/ and their interface read back from it by the same reader, held to the same rules (handWritten).
import { $ } from "bun";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { kernelIdent, type Variant, writeTables } from "../../kernels/generate.ts";

const root = join(import.meta.dir, "..", "..");
export const MSL_DIR = join(root, "kernels", "msl");
export const MANIFEST = join(MSL_DIR, "manifest.json");
// The translation. MSL 3.0 is what buffer-device-address casts need (Metal 3; every M3+ Mac has it).
export const MSL_VERSION = "30000";
export const SPIRV_CROSS_FLAGS = ["--msl", "--msl-version", MSL_VERSION, "--msl-decoration-binding"];
// Apple GPUs: threadgroup memory per threadgroup (MTLDevice.maxThreadgroupMemoryLength).
export const THREADGROUP_MEMORY = 32768;
export const entryName = (kernel: string) => `splash_${kernel}`;

const Field = z.object({ name: z.string(), type: z.string(), offset: z.number().int() }).strict();
const Kernel = z
  .object({
    name: z.string(),
    entry: z.string(),
    source: z.string(), // kernels/<file> and its defines
    sha256: z.string(),
    push: z.object({ struct: z.string(), index: z.number().int(), size: z.number().int(), fields: z.array(Field) }).strict(),
    constants: z.array(z.object({ id: z.number().int(), name: z.string(), type: z.literal("uint"), default: z.number().int() }).strict()),
    // per dimension: a literal size, or { constant: id } = the function constant that sets it
    threadgroupSize: z.array(z.union([z.number().int(), z.object({ constant: z.number().int() }).strict()])).length(3),
    threadgroupMemory: z.number().int(),
    defines: z.record(z.string(), z.union([z.string(), z.number()])),
  })
  .strict();
export type MslKernel = z.infer<typeof Kernel>;
export const Manifest = z
  .object({
    comment: z.string(),
    spirvCross: z.string(),
    flags: z.array(z.string()),
    kernels: z.array(Kernel),
  })
  .strict();
export type Manifest = z.infer<typeof Manifest>;

export const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

// ---- reading translated MSL -------------------------------------------------------------------------------------

// Size and alignment of the MSL scalar and vector types a push block or a shared array may hold.
const MSL_TYPES: Record<string, { size: number; align: number }> = {
  uint: { size: 4, align: 4 }, int: { size: 4, align: 4 }, float: { size: 4, align: 4 },
  ulong: { size: 8, align: 8 }, long: { size: 8, align: 8 }, half: { size: 2, align: 2 },
  ushort: { size: 2, align: 2 }, short: { size: 2, align: 2 }, uchar: { size: 1, align: 1 }, char: { size: 1, align: 1 },
  uint2: { size: 8, align: 8 }, int2: { size: 8, align: 8 }, float2: { size: 8, align: 8 }, half2: { size: 4, align: 4 },
  uint3: { size: 16, align: 16 }, int3: { size: 16, align: 16 }, float3: { size: 16, align: 16 },
  uint4: { size: 16, align: 16 }, int4: { size: 16, align: 16 }, float4: { size: 16, align: 16 }, half4: { size: 8, align: 8 },
};

// The attributes an entry-point parameter may carry: compute built-ins and the one push-constant buffer.
const BUILTINS = new Set([
  "thread_position_in_threadgroup", "threadgroup_position_in_grid", "threadgroups_per_grid", "thread_position_in_grid",
  "thread_index_in_threadgroup", "thread_index_in_simdgroup", "simdgroup_index_in_threadgroup",
  "simdgroups_per_threadgroup", "threads_per_simdgroup", "thread_execution_width", "threads_per_threadgroup",
]);

// Text that means SPIRV-Cross emitted something Metal rejects or we must not rely on (gpu-toolchain.md).
const FORBIDDEN: [RegExp, string][] = [
  [/SPIRV_CROSS_CONSTANT_ID_\d+/, "a specialization constant used where Metal needs a literal (array size): a macro the host would have to define"],
  [/atomic_float|atomic<float>/, "a float atomic (SPIRV-Cross emits invalid MSL for it)"],
  [/\[\[\s*threadgroup\s*\(/, "a dynamically sized threadgroup buffer (the host sets none)"],
  [/\b(texture[123]d|sampler)\b/, "a texture or sampler (the host binds none)"],
  [/#error/, "an #error directive"],
];

export type MslInterface = {
  entry: string;
  push: { struct: string; index: number; size: number; fields: { name: string; type: string; offset: number }[] } | null;
  constants: { id: number; name: string; type: string; default: number | null }[];
  threadgroupSize: (number | { constant: number })[] | null; // null: the kernel does not name gl_WorkGroupSize
  threadgroupMemory: number;
  problems: string[];
};

function balanced(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === "(") depth++;
    else if (text[i] === ")" && --depth === 0) return i;
  }
  return -1;
}

function splitTop(params: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of params) {
    if ("([<".includes(ch)) depth++;
    if (")]>".includes(ch)) depth--;
    if (ch === "," && depth === 0) {
      out.push(cur.trim());
      cur = "";
    } else cur += ch;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

// Reads the interface of one translated kernel back from its MSL text: entry point, push block, function constants,
// threadgroup size and shared memory. Anything outside the shapes above is reported in `problems`.
export function readMsl(text: string, entry: string): MslInterface {
  const problems: string[] = [];
  for (const [re, why] of FORBIDDEN) if (re.test(text)) problems.push(`forbidden construct: ${why}`);
  const kernels = [...text.matchAll(/\bkernel\s+void\s+(\w+)\s*\(/g)];
  if (kernels.length !== 1 || kernels[0]![1] !== entry)
    problems.push(`expected one entry point ${entry}, found ${kernels.map((k) => k[1]).join(", ") || "none"}`);
  const result: MslInterface = { entry, push: null, constants: [], threadgroupSize: null, threadgroupMemory: 0, problems };
  if (kernels.length !== 1) return result;
  const k = kernels[0]!;
  const open = k.index! + k[0].length - 1;
  const close = balanced(text, open);
  const params = splitTop(text.slice(open + 1, close));
  const buffers: { type: string; name: string; index: number }[] = [];
  for (const p of params) {
    const m = /^(.*?)\s*(\w+)\s*\[\[\s*(\w+)(?:\s*\(\s*(\d+)\s*\))?\s*\]\]$/.exec(p);
    if (!m) {
      problems.push(`entry parameter without an attribute: ${p}`);
      continue;
    }
    const [, type, name, attr, arg] = m;
    if (attr === "buffer") buffers.push({ type: type!.trim(), name: name!, index: Number(arg) });
    else if (!BUILTINS.has(attr!)) problems.push(`entry parameter ${name} has attribute [[${attr}]]: only the push buffer and compute built-ins are bound`);
  }
  if (buffers.length > 1) problems.push(`more than one buffer argument: ${buffers.map((b) => `${b.name} [[buffer(${b.index})]]`).join(", ")}`);
  const b = buffers[0];
  if (b) {
    const t = /^constant\s+(\w+)\s*&$/.exec(b.type);
    if (!t) problems.push(`the buffer argument ${b.name} is \`${b.type}\`, expected \`constant P&\` (push constants)`);
    else {
      const body = new RegExp(`struct\\s+${t[1]}\\s*\\{([^}]*)\\}`).exec(text);
      if (!body) problems.push(`no definition of struct ${t[1]}`);
      else {
        const fields: { name: string; type: string; offset: number }[] = [];
        let at = 0;
        let align = 1;
        for (const line of body[1]!.split(";").map((s) => s.trim()).filter(Boolean)) {
          const f = /^(\w+)\s+(\w+)$/.exec(line);
          const ty = f && MSL_TYPES[f[1]!];
          if (!f || !ty) {
            problems.push(`push field \`${line}\`: only scalars and vectors are expected`);
            continue;
          }
          at = Math.ceil(at / ty.align) * ty.align;
          fields.push({ name: f[2]!, type: f[1]!, offset: at });
          at += ty.size;
          align = Math.max(align, ty.align);
        }
        result.push = { struct: t[1]!, index: b.index, size: Math.ceil(at / align) * align, fields };
      }
    }
  }
  // function constants: `constant T X_tmp [[function_constant(N)]];` then `constant T X = is_function_constant_defined(X_tmp) ? X_tmp : D;`
  const byTmp = new Map<string, number>();
  for (const m of text.matchAll(/^constant\s+(\w+)\s+(\w+)\s*\[\[\s*function_constant\s*\(\s*(\d+)\s*\)\s*\]\];$/gm)) {
    const [, type, tmp, id] = m;
    const use = new RegExp(`^constant\\s+\\w+\\s+(\\w+)\\s*=\\s*is_function_constant_defined\\(${tmp}\\)\\s*\\?\\s*${tmp}\\s*:\\s*(\\d+)u?;$`, "m").exec(text);
    const name = use ? use[1]! : tmp!;
    result.constants.push({ id: Number(id), name: name.replace(/_tmp$/, ""), type: type!, default: use ? Number(use[2]) : null });
    byTmp.set(name, Number(id));
  }
  result.constants.sort((a, b) => a.id - b.id);
  const wg = /^constant\s+uint3\s+gl_WorkGroupSize\s*(?:\[\[[^\]]*\]\])?\s*=\s*uint3\(([^)]*)\);$/m.exec(text);
  if (wg) {
    result.threadgroupSize = wg[1]!.split(",").map((s) => {
      const v = s.trim();
      if (/^\d+u?$/.test(v)) return Number(v.replace("u", ""));
      const id = byTmp.get(v);
      if (id === undefined) problems.push(`threadgroup size component \`${v}\` is neither a literal nor a function constant`);
      return { constant: id ?? -1 };
    });
  }
  // shared memory: every `threadgroup T name[N]...;` declaration, literal sizes only
  for (const m of text.matchAll(/^\s*threadgroup\s+(\w+)\s+(\w+)((?:\s*\[[^\]]*\])+)\s*;/gm)) {
    const [, type, name, dims] = m;
    const sizes = [...dims!.matchAll(/\[([^\]]*)\]/g)].map((d) => d[1]!.trim());
    const ty = MSL_TYPES[type!];
    if (sizes.some((s) => !/^\d+$/.test(s))) {
      problems.push(`threadgroup array ${name}[${sizes.join("][")}] is not sized by literals`);
      continue;
    }
    if (!ty) {
      problems.push(`threadgroup array ${name} of unexpected type ${type}`);
      continue;
    }
    result.threadgroupMemory += sizes.reduce((a, s) => a * Number(s), ty.size);
  }
  for (const m of text.matchAll(/^\s*threadgroup\s+[^;(]*;/gm))
    if (!/^\s*threadgroup\s+\w+\s+\w+(\s*\[[^\]]*\])+\s*;$/.test(m[0])) problems.push(`threadgroup declaration that is not an array: ${m[0].trim()}`);
  if (result.threadgroupMemory > THREADGROUP_MEMORY)
    problems.push(`${result.threadgroupMemory} bytes of threadgroup memory, more than the ${THREADGROUP_MEMORY} an Apple GPU has`);
  return result;
}

// ---- translating ------------------------------------------------------------------------------------------------

const Reflection = z.object({
  entryPoints: z.array(z.object({ name: z.string(), workgroup_size: z.array(z.number()), workgroup_size_is_spec_constant_id: z.array(z.boolean()) })),
  types: z.record(z.string(), z.object({ name: z.string(), members: z.array(z.object({ name: z.string(), type: z.string(), offset: z.number().optional() })) })).optional(),
  push_constants: z.array(z.object({ type: z.string(), name: z.string() })).optional(),
  specialization_constants: z.array(z.object({ name: z.string(), id: z.number(), type: z.string(), default_value: z.number() })).optional(),
  ssbos: z.array(z.unknown()).optional(),
  ubos: z.array(z.unknown()).optional(),
  textures: z.array(z.unknown()).optional(),
  images: z.array(z.unknown()).optional(),
});

// SPIR-V type names as MSL spells them (the push block's members).
const SPIRV_TO_MSL: Record<string, string> = { uint64_t: "ulong", int64_t: "long", uint: "uint", int: "int", float: "float" };

export async function spirvCrossVersion(): Promise<string> {
  const r = await $`dpkg-query -W -f=\${Version} spirv-cross`.nothrow().quiet();
  return r.exitCode === 0 ? `spirv-cross ${r.stdout.toString().trim()} (Debian)` : "spirv-cross (version unknown: not a Debian package)";
}

// Translates one kernel and checks its MSL against the SPIR-V's own reflection. Throws with every problem found.
export async function translate(v: Variant, spv: string): Promise<{ text: string; kernel: Omit<MslKernel, "sha256"> }> {
  const entry = entryName(v.name);
  const r = await $`spirv-cross ${spv} ${SPIRV_CROSS_FLAGS} --rename-entry-point main ${entry} comp`.nothrow().quiet();
  if (r.exitCode !== 0 || r.stderr.length) throw new Error(`spirv-cross failed on ${v.name}:\n${r.stderr.toString()}${r.stdout.toString()}`);
  const text = r.stdout.toString();
  const refl = Reflection.parse(JSON.parse((await $`spirv-cross ${spv} --reflect`.quiet()).stdout.toString()));
  const msl = readMsl(text, entry);
  const problems = [...msl.problems];
  if (refl.ssbos?.length || refl.ubos?.length || refl.textures?.length || refl.images?.length)
    problems.push("the kernel binds descriptors; only push constants with device addresses are translated");
  // push constants: the same fields, in the same order, at the same offsets as SPIR-V's layout
  const pc = refl.push_constants?.[0];
  const spirvFields = pc ? (refl.types?.[pc.type]?.members ?? []) : [];
  if (!msl.push !== !pc) problems.push(`push constants: ${pc ? "in SPIR-V but not an MSL argument" : "an MSL argument SPIR-V lacks"}`);
  if (msl.push) {
    if (msl.push.index !== 0) problems.push(`push constants at [[buffer(${msl.push.index})]], the host binds index 0`);
    // names may differ (SPIRV-Cross renames MSL keywords: `kernel` becomes `kernel0`); types and offsets may not
    const want = spirvFields.map((f) => `${SPIRV_TO_MSL[f.type] ?? f.type}@${f.offset}`).join(" ");
    const got = msl.push.fields.map((f) => `${f.type}@${f.offset}`).join(" ");
    if (want !== got) problems.push(`push block differs from SPIR-V:\n  SPIR-V ${want}\n  MSL    ${got}`);
  }
  // specialization constants → function constants with the same id, type and default
  const specs = (refl.specialization_constants ?? []).map((s) => `${s.id}:${s.type}=${s.default_value}`).sort().join(" ");
  const consts = msl.constants.map((c) => `${c.id}:${c.type}=${c.default}`).sort().join(" ");
  if (specs !== consts) problems.push(`function constants differ from the specialization constants:\n  SPIR-V ${specs}\n  MSL    ${consts}`);
  if (msl.constants.some((c) => c.type !== "uint")) problems.push("a function constant that is not uint (the host sets uint values)");
  // threadgroup size: SPIR-V's workgroup size, literal or by spec constant id
  const ep = refl.entryPoints[0]!;
  const size = ep.workgroup_size.map((n, i) => (ep.workgroup_size_is_spec_constant_id[i] ? { constant: n } : n));
  if (msl.threadgroupSize && JSON.stringify(msl.threadgroupSize) !== JSON.stringify(size))
    problems.push(`threadgroup size ${JSON.stringify(msl.threadgroupSize)} differs from SPIR-V's ${JSON.stringify(size)}`);
  if (problems.length) throw new Error(`${v.name} (kernels/${v.file}):\n- ${problems.join("\n- ")}`);
  return {
    text,
    kernel: {
      name: v.name,
      entry,
      source: `kernels/${v.file}`,
      push: msl.push ?? { struct: "", index: 0, size: 0, fields: [] },
      constants: msl.constants.map((c) => ({ id: c.id, name: c.name, type: "uint" as const, default: c.default ?? 0 })),
      threadgroupSize: size,
      threadgroupMemory: msl.threadgroupMemory,
      defines: v.defines,
    },
  };
}

export type Translation = { manifest: Manifest; texts: Map<string, string> };

// Compiles the kernels to SPIR-V (kernels/generate.ts, into build/gen like the Vulkan build, so both share the
// cache) and translates every one. Throws when a tool is missing or any kernel does not translate cleanly.
export async function translateAll(): Promise<Translation> {
  for (const tool of ["glslangValidator", "spirv-val", "spirv-cross"])
    if (!Bun.which(tool)) throw new Error(`${tool} is needed (Debian: glslang-tools spirv-tools spirv-cross)`);
  const { generate } = await import("../../kernels/generate.ts");
  const out = join(root, "build", "gen");
  const g = await generate(out);
  if (!g) throw new Error("kernels/generate.ts found no glslang");
  const texts = new Map<string, string>();
  const kernels: MslKernel[] = [];
  const errors: string[] = [];
  for (const v of g.variants.filter((v) => !v.vulkanOnly && !v.metalOnly)) {
    try {
      const t = await translate(v, join(out, "spv", `${v.name}.spv`));
      texts.set(v.name, t.text);
      kernels.push({ ...t.kernel, sha256: sha256(t.text) });
    } catch (e) {
      errors.push((e as Error).message);
    }
  }
  if (errors.length) throw new Error(`${errors.length} kernel(s) did not translate cleanly:\n${errors.join("\n")}`);
  const manifest: Manifest = {
    comment: "Generated by scripts/build/msl.ts from kernels/*.comp; regenerate with `bun scripts/build/msl.ts` when a kernel changes.",
    spirvCross: await spirvCrossVersion(),
    flags: SPIRV_CROSS_FLAGS,
    kernels,
  };
  return { manifest, texts };
}

// One line per kernel, so a kernel's change is one line of the diff.
function manifestText(m: Manifest): string {
  const { kernels, ...head } = m;
  const top = JSON.stringify(head, null, 2).replace(/\n}$/, "");
  return `${top},\n  "kernels": [\n${kernels.map((k) => `    ${JSON.stringify(k)}`).join(",\n")}\n  ]\n}\n`;
}

export function readManifest(): Manifest {
  return Manifest.parse(JSON.parse(readFileSync(MANIFEST, "utf8")));
}

// Differences between a fresh translation and kernels/msl/ (empty when they agree).
export function compare(t: Translation): string[] {
  if (!existsSync(MANIFEST)) return ["kernels/msl/manifest.json is missing"];
  const diffs: string[] = [];
  if (readFileSync(MANIFEST, "utf8") !== manifestText(t.manifest)) diffs.push("kernels/msl/manifest.json differs");
  for (const [name, text] of t.texts) {
    const f = join(MSL_DIR, `${name}.metal`);
    if (!existsSync(f)) diffs.push(`kernels/msl/${name}.metal is missing`);
    else if (readFileSync(f, "utf8") !== text) diffs.push(`kernels/msl/${name}.metal differs`);
  }
  for (const f of readdirSync(MSL_DIR).filter((f) => f.endsWith(".metal")))
    if (!t.texts.has(f.replace(/\.metal$/, ""))) diffs.push(`kernels/msl/${f} is no longer a kernel`);
  return diffs;
}

function write(t: Translation): void {
  mkdirSync(MSL_DIR, { recursive: true });
  for (const f of readdirSync(MSL_DIR).filter((f) => f.endsWith(".metal"))) if (!t.texts.has(f.replace(/\.metal$/, ""))) rmSync(join(MSL_DIR, f));
  for (const [name, text] of t.texts) {
    const f = join(MSL_DIR, `${name}.metal`);
    if (!existsSync(f) || readFileSync(f, "utf8") !== text) writeFileSync(f, text);
  }
  writeFileSync(MANIFEST, manifestText(t.manifest));
}

// ---- the C table the Metal host compiles ------------------------------------------------------------------------

// A C string literal of s (ASCII text: SPIRV-Cross output); `??` is split so -std=c11 reads no trigraph.
const cString = (s: string) =>
  `"${s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(/\?\?/g, "?\\?")}"`;

// The C source and header of the kernel table (build/gen/metal_kernels.{c,h}) from kernels/msl/: MSL text and the
// interface each dispatch must respect, by kernel id (gpu_kernels.h, kernels/generate.ts).
export function cTable(m: Manifest, texts: Map<string, string>): { c: string; h: string } {
  const h = [
    "/* Generated by scripts/build/msl.ts from kernels/msl/ (the translated kernels and their interfaces). */",
    "#ifndef SP_METAL_KERNELS_H",
    "#define SP_METAL_KERNELS_H",
    '#include "gpu_kernels.h"',
    "",
    "/* One kernel: its MSL library source and entry point, and what a dispatch must match. */",
    "typedef struct sp_mtl_kernel {",
    "    const char *name;          /* the variant (kernels/generate.ts) */",
    "    const char *entry;         /* the MSL function */",
    "    const char *source;        /* MSL text: a whole library */",
    "    uint32_t push_bytes;       /* sizeof the push struct, passed with setBytes at index push_index */",
    "    uint32_t push_index;",
    "    uint32_t constants;        /* bit i set: function constant i (uint) is declared and must be set */",
    "    int32_t size_constant[3];  /* threads per threadgroup, per dimension: function constant id, or -1 … */",
    "    uint32_t size_literal[3];  /* … and then this literal */",
    "    uint32_t threadgroup_bytes;",
    "} sp_mtl_kernel;",
    "extern const sp_mtl_kernel sp_mtl_kernels[SP_GPU_KERNEL_COUNT];",
    "",
    "#endif",
    "",
  ].join("\n");
  const c = ["/* Generated by scripts/build/msl.ts from kernels/msl/. */", '#include "metal_kernels.h"', ""];
  for (const k of m.kernels) {
    const text = texts.get(k.name);
    if (text === undefined) throw new Error(`kernels/msl/${k.name}.metal is missing`);
    c.push(`/* ${k.name}: ${k.source} ${Object.entries(k.defines).map(([a, b]) => `${a}=${b}`).join(" ")} */`);
    const lines = text.match(/[^\n]*\n|[^\n]+$/g) ?? [""]; // each with its newline: the text exactly
    c.push(`static const char msl_${k.name}[] =`, ...lines.map((l) => `    ${cString(l)}`), "    ;");
  }
  c.push("", "const sp_mtl_kernel sp_mtl_kernels[SP_GPU_KERNEL_COUNT] = {");
  for (const k of m.kernels) {
    const mask = k.constants.reduce((a, x) => a | (1 << x.id), 0);
    const sc = k.threadgroupSize.map((s) => (typeof s === "number" ? -1 : s.constant));
    const sl = k.threadgroupSize.map((s) => (typeof s === "number" ? s : 0));
    c.push(
      `    [${kernelIdent(k.name)}] = {"${k.name}", "${k.entry}", msl_${k.name}, ${k.push.size}, ${k.push.index}, 0x${mask.toString(16)}u, {${sc.join(", ")}}, {${sl.join(", ")}}, ${k.threadgroupMemory}},`,
    );
  }
  c.push("};", "");
  return { c: c.join("\n"), h };
}

// Kernels of the variant list (kernels/generate.ts; those Metal runs, not the Vulkan-only ones) the manifest lacks or
// has in another order, and the reverse.
export function staleKernels(m: Manifest, variants: Variant[]): string[] {
  variants = variants.filter((v) => !v.vulkanOnly && !v.metalOnly);
  const want = variants.map((v) => v.name).join(" ");
  const got = m.kernels.map((k) => k.name).join(" ");
  return want === got ? [] : [`kernels/generate.ts lists ${variants.length} kernels, kernels/msl/manifest.json ${m.kernels.length} (or another order)`];
}

// The hand-written kernels of the variant list (metalOnly): text from kernels/<file>, interface read back from it and
// checked as a translation's is (push block at buffer 0, uint function constants 0 … 3, the threadgroup size from
// function constant 0, literal threadgroup arrays within 32 KiB). Throws with every problem found.
export function handWritten(variants: Variant[]): { kernel: MslKernel; text: string }[] {
  return variants
    .filter((v) => v.metalOnly)
    .map((v) => {
      const text = readFileSync(join(root, "kernels", v.file), "utf8");
      const entry = entryName(v.name);
      const m = readMsl(text, entry);
      const problems = [...m.problems];
      if (!m.push || m.push.index !== 0) problems.push("no push block at [[buffer(0)]]");
      if (m.constants.some((c) => c.type !== "uint" || c.default === null || c.id > 3))
        problems.push("function constants must be uint, with a default, ids 0 … 3 (the host sets spec[0..3])");
      if (JSON.stringify(m.threadgroupSize) !== JSON.stringify([{ constant: 0 }, 1, 1]))
        problems.push("the threadgroup size must be gl_WorkGroupSize = uint3(function constant 0, 1, 1), as the host dispatches it");
      if (problems.length) throw new Error(`${v.name} (kernels/${v.file}):\n- ${problems.join("\n- ")}`);
      const kernel: MslKernel = {
        name: v.name,
        entry,
        source: `kernels/${v.file}`,
        sha256: sha256(text),
        push: m.push!,
        constants: m.constants.map((c) => ({ id: c.id, name: c.name, type: "uint" as const, default: c.default! })),
        threadgroupSize: m.threadgroupSize!,
        threadgroupMemory: m.threadgroupMemory,
        defines: v.defines,
      };
      return { kernel, text };
    });
}

// Writes build/gen/metal_kernels.{c,h} from the committed kernels/msl/ when their content changes, and gpu_kernels.{c,h}
// (the ids) beside them, with the hand-written kernels of kernels/; returns the source paths (scripts/build/native.ts compiles them into the macOS library and
// into the Linux host test). Throws when kernels/msl/ is not the translation of the kernels the generator lists.
export function embed(outDir: string): { source: string; header: string; tables: string } {
  const m = readManifest();
  const tables = writeTables(outDir);
  const stale = staleKernels(m, tables.variants);
  if (stale.length) throw new Error(`${stale.join("; ")}: regenerate with bun scripts/build/msl.ts`);
  const texts = new Map(m.kernels.map((k) => [k.name, readFileSync(join(MSL_DIR, `${k.name}.metal`), "utf8")]));
  for (const k of m.kernels)
    if (sha256(texts.get(k.name)!) !== k.sha256) throw new Error(`kernels/msl/${k.name}.metal does not match its manifest hash: regenerate with bun scripts/build/msl.ts`);
  for (const { kernel, text } of handWritten(tables.variants)) {
    m.kernels.push(kernel);
    texts.set(kernel.name, text);
  }
  const { c, h } = cTable(m, texts);
  const source = join(outDir, "metal_kernels.c");
  const header = join(outDir, "metal_kernels.h");
  for (const [f, text] of [[source, c], [header, h]] as const) if (!existsSync(f) || readFileSync(f, "utf8") !== text) writeFileSync(f, text);
  return { source, header, tables: tables.source };
}

if (import.meta.main) {
  const t = await translateAll();
  if (process.argv.includes("--check")) {
    const diffs = compare(t);
    if (diffs.length) {
      console.error(`kernels/msl/ is stale (${diffs.length}):\n  ${diffs.join("\n  ")}\nregenerate: bun scripts/build/msl.ts`);
      process.exit(1);
    }
    console.log(`kernels/msl/ matches: ${t.manifest.kernels.length} kernels`);
  } else {
    write(t);
    console.log(`${t.manifest.kernels.length} kernels -> kernels/msl/ (${t.manifest.spirvCross})`);
  }
}
