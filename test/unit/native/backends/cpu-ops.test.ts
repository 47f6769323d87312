// The CPU backend's ops against plain references and each other (native/tests/cpu_ops_test.c): paged GQA
// attention (and its tiled forms against the reference, bit for bit, over chunkings, for f32, f16 and int8 caches; a
// compact cache gives the bits of an f32 cache holding its values, attention_ext too), the conv tail, MRoPE, MoE routing, sampling, the GDN recurrence over 600 tokens against the chunked
// form, and the gates, conv, norms and GDN step in their SIMD forms against the plain loops. Runs the sanitizer build when it exists (memory errors fail the test), else the release build.
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";

const build = join(import.meta.dir, "../../../../build");

test("CPU ops match their references", () => {
  const debug = join(build, "debug/tests/cpu_ops_test");
  const exe = existsSync(debug) ? debug : join(build, "tests/cpu_ops_test");
  const r = Bun.spawnSync([exe]);
  const out = r.stdout.toString();
  console.log(out.trim());
  expect(r.stderr.toString()).toBe("");
  expect(r.exitCode).toBe(0);
  expect(out).toContain("gdn: chunked vs recurrent, 600 tokens");
  // the tiled attention (eight and sixteen lanes, each called directly) equals the reference form bit for bit
  // whatever the chunking (batch/chunk invariance), for four head shapes × three KV types
  expect(out.match(/all chunkings and forms = reference, bits .* OK/g)?.length).toBe(12);
  expect(out.match(/= f32 cache of its values, bits .* OK/g)?.length).toBe(10);
  for (const op of ["silu_mul: fast form = plain loop, bits", "sigmoid_mul: fast form = plain loop, bits", "conv: fast form = plain loop, outputs, bits"])
    expect(out).toMatch(new RegExp(`${op} .* OK`));
  expect(out).toContain("all OK");
});
