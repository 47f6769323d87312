// `splash <tool> [MODEL] [-- tool args…]`: the flow every launcher shares.
//   find the tool ─▶ reuse or start the model's server (or, with --url, check a server elsewhere) ─▶ the served
//   limits ─▶ the tool's plan (env, Splash-owned config files, arguments) ─▶ write the files ─▶ run the tool in the
//   foreground, return its exit code
// --print-config stops before anything is started or written and prints the plan as a shell script.
import { basename, isAbsolute, join } from "node:path";
import { stateDir } from "../paths.ts";
import { log } from "../log.ts";
import { modelKey, specLimits, startSpec } from "./model.ts";
import { remoteServer } from "./remote.ts";
import { ensureServer, liveness, servedModel } from "./server.ts";
import { readState, serverUrl } from "./state.ts";
import { describePlan, findBinary, notInstalled, runTool, writeFiles, type Tool, type ToolContext } from "./tool.ts";

export function toolHome(tool: Tool): string {
  return join(stateDir(), "launch", tool.name);
}

// Which server the tool talks to: a local one for MODEL (started on `port` if it is not running), or one elsewhere.
export type LaunchTarget = { kind: "local"; model: string | undefined; port?: number } | { kind: "remote"; url: string; apiKey?: string; model?: string };

type Resolved = { ctx: ToolContext; header: string[]; notes: string[] };

async function remoteContext(tool: Tool, target: Extract<LaunchTarget, { kind: "remote" }>, args: string[]): Promise<Resolved> {
  const remote = await remoteServer(tool, target.url, target.apiKey, target.model);
  const { notes, ...served } = remote;
  return {
    ctx: { ...served, home: toolHome(tool), args },
    header: [`${tool.title} (${tool.api}) on ${remote.model}, served at ${remote.baseUrl}`],
    notes: [...notes, `using ${remote.model} at ${remote.baseUrl}`],
  };
}

// The plan for --print-config: with a running server its real address, key and limits; otherwise the model's spec
// and a placeholder for the port a new server would get.
export async function printConfig(tool: Tool, target: LaunchTarget, args: string[]): Promise<string> {
  let resolved: Resolved;
  if (target.kind === "remote") resolved = await remoteContext(tool, target, args);
  else {
    const key = modelKey(target.model);
    const state = readState(key);
    if (state && (await liveness(state)) === "live") {
      const served = await servedModel(state);
      const ctx = { baseUrl: serverUrl(state), apiKey: state.apiKey, model: served.id, contextLength: served.contextLength, maxOutputTokens: served.maxOutputTokens, home: toolHome(tool), args };
      resolved = { ctx, header: [`${tool.title} (${tool.api}) on ${served.id}, served at ${ctx.baseUrl} by pid ${state.pid}`], notes: [] };
    } else {
      const limits = specLimits(key);
      const model = isAbsolute(key) ? basename(key) : key; // a checkpoint directory is served under its name
      const port = target.port === undefined ? "PORT" : String(target.port);
      const ctx = { baseUrl: `http://127.0.0.1:${port}`, apiKey: "KEY", model, ...limits, home: toolHome(tool), args };
      const where = target.port === undefined ? "on a free PORT" : `on port ${target.port}`;
      resolved = { ctx, header: [`${tool.title} (${tool.api}) on ${model}: no server runs for it yet`, `launching starts one ${where}, with a new API KEY, and may serve a shorter context when memory is short`], notes: [] };
    }
  }
  const { ctx, header } = resolved;
  header.push(`context ${ctx.contextLength} tokens, answers up to ${ctx.maxOutputTokens} tokens`);
  const binary = findBinary(tool);
  header.push(binary ? `${tool.binary}: ${binary}` : `${tool.binary} is not installed: ${tool.install}`);
  const plan = tool.plan(ctx);
  return describePlan(tool, plan, [...header, ...resolved.notes, ...plan.notes]);
}

export async function launch(tool: Tool, target: LaunchTarget, args: string[]): Promise<number> {
  const binary = findBinary(tool);
  if (!binary) throw notInstalled(tool);
  let ctx: ToolContext;
  if (target.kind === "remote") {
    const resolved = await remoteContext(tool, target, args);
    for (const note of resolved.notes) log.info(note);
    ctx = resolved.ctx;
  } else {
    const key = modelKey(target.model);
    const state = await ensureServer(key, () => startSpec(target.model, key), target.port);
    const served = await servedModel(state);
    ctx = { baseUrl: serverUrl(state), apiKey: state.apiKey, model: served.id, contextLength: served.contextLength, maxOutputTokens: served.maxOutputTokens, home: toolHome(tool), args };
  }
  const plan = tool.plan(ctx);
  for (const note of plan.notes) log.info(note);
  writeFiles(plan.files);
  return runTool(binary, plan);
}
