// Builds dist/splash: one executable holding the TypeScript code, libsplash and the embedded default model.
//   bun scripts/build/binary.ts [--target bun-linux-arm64 …]
import { $ } from "bun";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
const target = process.argv.includes("--target") ? process.argv[process.argv.indexOf("--target") + 1] : undefined;

await $`bun ${join(root, "scripts/build/native.ts")}`;
// Worker entry points are bundled beside main.ts (Bun does not follow `new Worker(url)` on its own).
const workers = ["src/engine/grammar/grammar-worker.ts", "src/native/call-thread-worker.ts"].map((w) => join(root, w));
const args = ["build", "--compile", "--minify", "--bytecode", join(root, "src/main.ts"), ...workers, "--outfile", join(root, "dist/splash")];
if (target) args.push("--target", target);
await $`bun ${args}`.cwd(root);
