// Installs Debian/Ubuntu packages the build or tests need, once: checks with dpkg first, so a machine that has
// them does nothing, and runs apt-get as root (or through sudo when available).
import { $ } from "bun";

export async function ensureAptPackages(packages: string[]): Promise<void> {
  if (process.platform !== "linux" || packages.length === 0) return;
  const missing: string[] = [];
  for (const p of packages) {
    const r = await $`dpkg-query -W -f=\${Status} ${p}`.nothrow().quiet();
    if (!r.stdout.toString().includes("install ok installed")) missing.push(p);
  }
  if (missing.length === 0) return;
  const root = process.getuid?.() === 0;
  const sudo = root ? [] : ["sudo", "-n"];
  console.error(`installing system packages: ${missing.join(" ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  await $`${sudo} apt-get update -qq`.env(env).quiet();
  const r = await $`${sudo} apt-get install -y -qq --no-install-recommends ${missing}`.env(env).nothrow();
  if (r.exitCode !== 0) {
    throw new Error(`apt-get could not install ${missing.join(" ")}; install them by hand and run again`);
  }
}
