// Builds dist/splash: one executable holding the TypeScript code, libsplash and the embedded default model.
//   bun scripts/build/binary.ts [--target bun-linux-arm64 …] [--outfile PATH]
// The one recipe for the executable: tests that need a compiled binary build it here too (--outfile).
import { $ } from "bun";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
const flag = (name: string): string | undefined =>
  process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined;
const target = flag("--target");
const outfile = flag("--outfile") ?? join(root, "dist/splash");

await $`bun ${join(root, "scripts/build/native.ts")}`;
// Worker entry points are bundled beside main.ts (Bun does not follow `new Worker(url)` on its own).
const workers = ["src/engine/grammar/grammar-worker.ts", "src/native/call-thread-worker.ts"].map((w) => join(root, w));
const args = ["build", "--compile", "--minify", "--bytecode", join(root, "src/main.ts"), ...workers, "--outfile", outfile];
if (target) args.push("--target", target);
await $`bun ${args}`.cwd(root);
