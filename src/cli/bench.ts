// `splash bench <what>`: benchmark programs. Each is its own file, imported only when run; each ends with one JSON
// line holding its figures (BENCHMARKS.md records them with the exact command).
import { defineCommand, type SubCommandsDef } from "citty";

const subCommands: SubCommandsDef = {
  decode: () => import("./bench-decode.ts").then((m) => m.default),
  grammar: () => import("./bench-grammar.ts").then((m) => m.default),
  kv: () => import("./bench-kv.ts").then((m) => m.default),
  memory: () => import("./bench-memory.ts").then((m) => m.default),
  peers: () => import("./bench-peers.ts").then((m) => m.default),
  serve: () => import("./bench-serve.ts").then((m) => m.default),
  spec: () => import("./bench-spec.ts").then((m) => m.default),
  tokenize: () => import("./bench-tokenize.ts").then((m) => m.default),
};

export default defineCommand({
  meta: { name: "bench", description: "Benchmarks (each ends with one JSON line of figures)" },
  subCommands,
});
