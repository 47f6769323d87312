// Bundles the page into one HTML document: page.html with page.css and main.ts (built for the browser by Bun,
// its npm dependencies included) inlined, so it needs nothing but the server that serves it, offline too.
//
// It runs as a Bun macro (src/server/page.ts imports it with { type: "macro" }): `bun build --compile` runs it once
// and carries the result inside the binary; under `bun run` it runs when that module is first loaded. Bun.build
// cannot be called from a macro (the bundler is busy with the importer), so the CLI does the bundling.
import { readFileSync } from "node:fs";
import { join } from "node:path";

export type BundledPage = { html: string; scriptHash: string }; // scriptHash: for the Content-Security-Policy

export function bundlePage(): BundledPage {
  const dir = import.meta.dir;
  const build = Bun.spawnSync([process.execPath, "build", join(dir, "main.ts"), "--target=browser", "--format=esm", "--minify"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, NO_COLOR: "1" },
  });
  if (build.exitCode !== 0) throw new Error(`bundling the page failed:\n${build.stderr.toString()}`);
  // "</script" inside the code would end the element early; "<\/script" means the same to JavaScript.
  const script = build.stdout.toString().replaceAll("</script", "<\\/script");
  const css = readFileSync(join(dir, "page.css"), "utf8");
  const html = readFileSync(join(dir, "page.html"), "utf8").split("/*STYLE*/").join(css).split("/*SCRIPT*/").join(script);
  return { html, scriptHash: new Bun.CryptoHasher("sha256").update(script).digest("base64") };
}
