// Entry point of `splash` (and of dist/splash). Keep it free of exports and of top-level await: `bun build
// --compile --bytecode` crashes at start on an entry file with exports (bun-stack.md) and compiles to CommonJS.
import { main } from "./cli/index.ts";

void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
