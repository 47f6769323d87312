// `splash serve [MODEL]`: load the model and serve the OpenAI and Anthropic APIs until SIGINT/SIGTERM, then drain.
import { z } from "zod";
import { ensureModelFiles } from "../models/resolve.ts";
import { loadModel } from "../models/load.ts";
import { checkListen, createServer, ListenError, type RunningServer } from "../server/server.ts";
import { DEFAULT_MAX_BODY_BYTES } from "../server/body.ts";
import { LOG_FORMATS } from "../server/request-log.ts";
import { DEFAULT_DRAIN_MS } from "../server/shutdown.ts";
import { DRAFT_CHOICES } from "../models/drafter.ts";
import { join } from "node:path";
import { defaultDiskBudget } from "../engine/disk-cache.ts";
import { formatBytes } from "../format.ts";
import { log } from "../log.ts";
import { cacheDir } from "../paths.ts";
import { CliError, command, floatOption, intOption, parseOption, sizeOption, UsageError } from "./_command.ts";
import { loadFlags, parseLoadFlags, parseQuant, quantFlag } from "./_load-flags.ts";

// A comma-separated list of names (--allow-host).
const nameList = z.string().transform((s, ctx) => {
  const names = s.split(",").map((n) => n.trim());
  if (names.some((n) => n === "")) ctx.addIssue({ code: "custom", message: "expected names separated by commas" });
  return names;
});

// A comma-separated list of web origins as browsers send them (scheme://host[:port]), "null", or "*".
const originList = nameList.pipe(
  z.array(
    z.string().refine((o) => o === "*" || o === "null" || URL.canParse(o) && new URL(o).origin === o.toLowerCase().replace(/\/$/, ""), {
      error: "expected origins such as http://localhost:5173 (scheme, host and port; no path), null, or *",
    }),
  ),
);

// The key from --api-key, else SPLASH_API_KEY; an empty one is a mistake (it would turn authentication off).
function apiKeyOf(option: string | undefined): string | undefined {
  if (option !== undefined) {
    if (option.trim() === "") throw new UsageError("--api-key is empty: give the key clients must send, or leave the option out", "serve");
    return option;
  }
  const env = process.env.SPLASH_API_KEY;
  if (env === undefined) return undefined;
  if (env.trim() === "") throw new CliError("SPLASH_API_KEY is set but empty", "set it to the key clients must send, or unset it to serve without a key");
  return env;
}

export default command({
  meta: { name: "serve", description: "Serve a model over the OpenAI and Anthropic APIs (default: the embedded model)" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or nothing for the embedded model" },
    host: { type: "string", default: "127.0.0.1", description: "Address to listen on" },
    port: { type: "string", default: "8080", description: "Port to listen on" },
    apiKey: { type: "string", description: "Require this key on the API (Authorization: Bearer or x-api-key; default: SPLASH_API_KEY)" },
    allowHost: { type: "string", description: "Also answer to these Host names, comma-separated (.example.com: and its subdomains; *: any)" },
    allowOrigin: { type: "string", description: "Serve browser pages from these origins, comma-separated, e.g. http://localhost:5173 (*: any)" },
    maxBody: { type: "string", default: "64M", description: "Largest request body" },
    drainTimeout: { type: "string", default: String(DEFAULT_DRAIN_MS / 1000), description: "Seconds running requests get to finish on SIGINT/SIGTERM" },
    logFormat: { type: "enum", options: [...LOG_FORMATS], default: "text", description: "Request log lines on stderr: text or json" },
    quiet: { type: "boolean", default: false, description: "No request log and no informational lines (warnings and errors only)" },
    kvBudget: { type: "string", description: "Cap on sequence-state memory, e.g. 8G (default: derived from this machine)" },
    diskCache: { type: "string", description: "Prefix cache kept on disk (survives restarts), e.g. 20G; 0 turns it off (default: 10% of the free disk space in the cache directory)" },
    draft: { type: "enum", options: [...DRAFT_CHOICES], default: "auto", description: "Speculative drafter (auto: the model's measured best)" },
    quant: quantFlag("the model's default, each tensor per its recipe"),
    ...loadFlags,
    allowImageUrls: { type: "boolean", default: false, description: "Fetch http(s) image URLs in requests (default: refused; clients send images as base64)" },
  },
  async run({ args }) {
    const port = parseOption("serve", "port", intOption(0, 65535), args.port);
    const apiKey = apiKeyOf(args.apiKey);
    const allowHosts = args.allowHost === undefined ? undefined : parseOption("serve", "allow-host", nameList, args.allowHost);
    const allowOrigins = args.allowOrigin === undefined ? undefined : parseOption("serve", "allow-origin", originList, args.allowOrigin);
    const maxBodyBytes = parseOption("serve", "max-body", sizeOption.pipe(z.number().min(1024, { error: `expected at least 1K (default ${formatBytes(DEFAULT_MAX_BODY_BYTES)})` })), args.maxBody);
    const drainSeconds = parseOption("serve", "drain-timeout", floatOption(0, 3600), args.drainTimeout);
    const logFormat = parseOption("serve", "log-format", z.enum(LOG_FORMATS), args.logFormat);
    const kvBudget = args.kvBudget === undefined ? undefined : parseOption("serve", "kv-budget", sizeOption, args.kvBudget);
    const diskCache = args.diskCache === undefined ? defaultDiskBudget(join(cacheDir(), "prefix")) : parseOption("serve", "disk-cache", sizeOption, args.diskCache);
    const quant = parseQuant("serve", args.quant);
    const draft = parseOption("serve", "draft", z.enum(DRAFT_CHOICES), args.draft);
    const load = parseLoadFlags("serve", args);
    if (args.quiet) log.level = 1;
    const listenFailure = (e: unknown) => (e instanceof ListenError ? new CliError(e.message, e.hint) : e);
    // Before the model loads (minutes for a large one): a port that is taken fails now.
    await checkListen(args.host, port).catch((e: unknown) => Promise.reject(listenFailure(e)));
    const resolved = await ensureModelFiles(args.model, { interactive: process.stdin.isTTY === true });
    const loaded = await loadModel(resolved, { quant, kvBudget, diskCache, ...load, draft, vision: { allowUrls: args.allowImageUrls } });
    let server: RunningServer;
    try {
      server = createServer({
        models: [loaded.chat],
        host: args.host,
        port,
        apiKey,
        sampling: loaded.sampling,
        maxBodyBytes,
        access: { allowHosts, allowOrigins },
        logFormat: args.quiet ? undefined : logFormat,
      });
    } catch (e) {
      await loaded.close();
      throw listenFailure(e);
    }
    log.info(`serving ${loaded.chat.id} on ${server.url} (OpenAI: ${server.url}/v1, Anthropic: ${server.url})`);
    // Machine-readable line for launchers and scripts: they wait for it on stdout.
    console.log(JSON.stringify({ event: "listening", url: server.url, model: loaded.chat.id, pid: process.pid }));
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      process.once("SIGINT", () => resolve("SIGINT"));
      process.once("SIGTERM", () => resolve("SIGTERM"));
    });
    // A second signal ends the running requests at once.
    const hurry = new AbortController();
    const again = () => hurry.abort();
    process.on("SIGINT", again);
    process.on("SIGTERM", again);
    const running = server.running();
    log.info(running === 0 ? `stopping (${signal})` : `stopping (${signal}): ${running === 1 ? "1 running request gets" : `${running} running requests get`} up to ${drainSeconds} s to finish (signal again to end them now)`);
    const { ended } = await server.drain(drainSeconds * 1000, hurry.signal);
    if (ended > 0) log.warn(`ended ${ended} request${ended === 1 ? "" : "s"} that had not finished; their clients were told the server is shutting down`);
    await loaded.close();
    process.off("SIGINT", again);
    process.off("SIGTERM", again);
  },
});
