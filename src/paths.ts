// Where Splash keeps its files on this machine. One place, so every command agrees.
//   cache: extracted native library, extracted embedded model, prefix-cache spill (safe to delete)
//   state: running servers' state files and logs (launchers)
// SPLASH_CACHE_DIR / SPLASH_STATE_DIR override them (tests use temporary directories).
import { homedir } from "node:os";
import { join } from "node:path";

function home(): string {
  return process.env.HOME || homedir();
}

export function cacheDir(): string {
  if (process.env.SPLASH_CACHE_DIR) return process.env.SPLASH_CACHE_DIR;
  if (process.platform === "darwin") return join(home(), "Library", "Caches", "splash");
  return join(process.env.XDG_CACHE_HOME || join(home(), ".cache"), "splash");
}

export function stateDir(): string {
  if (process.env.SPLASH_STATE_DIR) return process.env.SPLASH_STATE_DIR;
  if (process.platform === "darwin") return join(home(), "Library", "Application Support", "splash");
  return join(process.env.XDG_STATE_HOME || join(home(), ".local", "state"), "splash");
}
