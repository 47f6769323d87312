// The URL a Worker is started from, given its entry point's path under src/. Inside the compiled binary (Bun.main in
// its /$bunfs/ file system) workers are entry points that scripts/build/binary.ts bundles, named from src/; under
// `bun run` they are the source files.
export function workerUrl(src: string): string {
  return /^\/\$bunfs\/|^[A-Z]:[\\/]~BUN[\\/]/.test(Bun.main) ? `./${src}` : new URL(`./${src}`, import.meta.url).href;
}
