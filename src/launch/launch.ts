// `splash <tool> [MODEL] [-- tool args…]`: the flow every launcher shares.
//   find the tool ─▶ reuse or start the model's server ─▶ ask it for the served limits ─▶ the tool's plan (env,
//   Splash-owned config files, arguments) ─▶ write the files ─▶ run the tool in the foreground, return its exit code
// --print-config stops before anything is started or written and prints the plan as a shell script.
import { basename, isAbsolute, join } from "node:path";
import { stateDir } from "../paths.ts";
import { log } from "../log.ts";
import { modelKey, specLimits, startSpec } from "./model.ts";
import { ensureServer, liveness, servedModel } from "./server.ts";
import { readState, serverUrl } from "./state.ts";
import { describePlan, findBinary, notInstalled, runTool, writeFiles, type Tool, type ToolContext } from "./tool.ts";

export function toolHome(tool: Tool): string {
  return join(stateDir(), "launch", tool.name);
}

export type LaunchOptions = { printConfig: boolean };

// The plan for --print-config: with a running server its real address, key and limits; otherwise the model's spec
// and a placeholder for the port a new server would get.
export async function printConfig(tool: Tool, modelArg: string | undefined, args: string[]): Promise<string> {
  const key = modelKey(modelArg);
  const state = readState(key);
  const header: string[] = [];
  let ctx: ToolContext;
  if (state && (await liveness(state)) === "live") {
    const served = await servedModel(state);
    ctx = { baseUrl: serverUrl(state), apiKey: state.apiKey, model: served.id, contextLength: served.contextLength, maxOutputTokens: served.maxOutputTokens, home: toolHome(tool), args };
    header.push(`${tool.title} (${tool.api}) on ${served.id}, served at ${ctx.baseUrl} by pid ${state.pid}`);
  } else {
    const limits = specLimits(key);
    const model = isAbsolute(key) ? basename(key) : key; // a checkpoint directory is served under its name
    ctx = { baseUrl: "http://127.0.0.1:PORT", apiKey: "KEY", model, ...limits, home: toolHome(tool), args };
    header.push(`${tool.title} (${tool.api}) on ${model}: no server runs for it yet`, `launching starts one on a free PORT, with a new API KEY, and may serve a shorter context when memory is short`);
  }
  header.push(`context ${ctx.contextLength} tokens, answers up to ${ctx.maxOutputTokens} tokens`);
  const binary = findBinary(tool);
  header.push(binary ? `${tool.binary}: ${binary}` : `${tool.binary} is not installed: ${tool.install}`);
  const plan = tool.plan(ctx);
  return describePlan(tool, plan, [...header, ...plan.notes]);
}

export async function launch(tool: Tool, modelArg: string | undefined, args: string[]): Promise<number> {
  const binary = findBinary(tool);
  if (!binary) throw notInstalled(tool);
  const key = modelKey(modelArg);
  const state = await ensureServer(key, () => startSpec(modelArg, key));
  const served = await servedModel(state);
  const plan = tool.plan({ baseUrl: serverUrl(state), apiKey: state.apiKey, model: served.id, contextLength: served.contextLength, maxOutputTokens: served.maxOutputTokens, home: toolHome(tool), args });
  for (const note of plan.notes) log.info(note);
  writeFiles(plan.files);
  return runTool(binary, plan);
}
