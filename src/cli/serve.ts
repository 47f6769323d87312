// `splash serve [MODEL]`: load the model and serve the OpenAI and Anthropic APIs until interrupted.
import { z } from "zod";
import { ensureModelFiles } from "../models/resolve.ts";
import { loadModel } from "../models/load.ts";
import { createServer } from "../server/server.ts";
import { QUANTS } from "../models/spec.ts";
import { DRAFT_CHOICES } from "../models/drafter.ts";
import { join } from "node:path";
import { defaultDiskBudget } from "../engine/disk-cache.ts";
import { log } from "../log.ts";
import { cacheDir } from "../paths.ts";
import { CliError, command, intOption, parseOption, sizeOption } from "./_command.ts";
import { loadFlags, parseLoadFlags } from "./_load-flags.ts";

export default command({
  meta: { name: "serve", description: "Serve a model over the OpenAI and Anthropic APIs (default: the embedded model)" },
  args: {
    model: { type: "positional", required: false, description: "A supported model id, a checkpoint directory, or nothing for the embedded model" },
    host: { type: "string", default: "127.0.0.1", description: "Address to listen on" },
    port: { type: "string", default: "8080", description: "Port to listen on" },
    apiKey: { type: "string", description: "Require this key (Authorization: Bearer or x-api-key)" },
    kvBudget: { type: "string", description: "Cap on sequence-state memory, e.g. 8G (default: derived from this machine)" },
    diskCache: { type: "string", description: "Prefix cache kept on disk (survives restarts), e.g. 20G; 0 turns it off (default: 10% of the free disk space in the cache directory)" },
    draft: { type: "enum", options: [...DRAFT_CHOICES], default: "auto", description: "Speculative drafter (auto: the model's measured best)" },
    quant: { type: "enum", options: [...QUANTS], description: "Quantize weights at load (default: the model's recipe)" },
    ...loadFlags,
    allowImageUrls: { type: "boolean", default: false, description: "Fetch http(s) image URLs in requests (default: refused; clients send images as base64)" },
  },
  async run({ args }) {
    const port = parseOption("serve", "port", intOption(0, 65535), args.port);
    const kvBudget = args.kvBudget === undefined ? undefined : parseOption("serve", "kv-budget", sizeOption, args.kvBudget);
    const diskCache = args.diskCache === undefined ? defaultDiskBudget(join(cacheDir(), "prefix")) : parseOption("serve", "disk-cache", sizeOption, args.diskCache);
    const quant = args.quant === undefined ? undefined : parseOption("serve", "quant", z.enum(QUANTS), args.quant);
    const draft = parseOption("serve", "draft", z.enum(DRAFT_CHOICES), args.draft);
    const load = parseLoadFlags("serve", args);
    const resolved = await ensureModelFiles(args.model, { interactive: process.stdin.isTTY === true });
    const loaded = await loadModel(resolved, { quant, kvBudget, diskCache, ...load, draft, vision: { allowUrls: args.allowImageUrls } });
    let server;
    try {
      server = createServer({ models: [loaded.chat], host: args.host, port, apiKey: args.apiKey, sampling: loaded.sampling });
    } catch (e) {
      await loaded.close();
      const why = e instanceof Error ? e.message : String(e);
      throw new CliError(`cannot listen on ${args.host}:${port}: ${why}`, "pick another --port, or stop what is using it");
    }
    log.info(`serving ${loaded.chat.id} on ${server.url} (OpenAI: ${server.url}/v1, Anthropic: ${server.url})`);
    // Machine-readable line for launchers and scripts: they wait for it on stdout.
    console.log(JSON.stringify({ event: "listening", url: server.url, model: loaded.chat.id, pid: process.pid }));
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
    log.info("stopping");
    await server.stop();
    await loaded.close();
  },
});
