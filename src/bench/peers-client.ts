// The Bun side of peers-llama.mjs: spawns it under Node and sends it one request at a time. The first
// start installs node-llama-cpp (node-llama-cpp.ts: into build/, ≈85 MB, needs the npm registry once).
//   const peer = await LlamaPeer.start();
//   await peer.request({ op: "load", model: "x.gguf", exact: true });
//   const { logprobs } = await peer.logprobs(tokens, vocab);
//   await peer.close();
import { join } from "node:path";
import type { Subprocess } from "bun";
import { installNodeLlamaCpp, type LlamaGpu } from "./node-llama-cpp.ts";

const SCRIPT = join(import.meta.dir, "peers-llama.mjs");

export type PeerLoad = { model: string; threads?: number; contextSize?: number; sequences?: number; batchSize?: number; exact?: boolean };
export type PeerInfo = { nodeLlamaCpp: string; llamaCppRelease: { repo: string; release: string }; gpu: string | false; buildType: string; node: string; cpuMathCores: number };

export class LlamaPeer {
  private buffered = "";
  private readonly reader;
  private readonly decoder = new TextDecoder();

  private constructor(private readonly proc: Subprocess<"pipe", "pipe", "inherit">) {
    this.reader = proc.stdout.getReader();
  }

  // `node` must be Node ≥ 20 (node-llama-cpp's addon does not load in Bun). gpu: false = the CPU build.
  static async start(options: { node?: string; gpu?: LlamaGpu } = {}): Promise<LlamaPeer> {
    const gpu = options.gpu ?? false;
    const modules = await installNodeLlamaCpp(gpu);
    const proc = Bun.spawn([options.node ?? "node", SCRIPT, "--gpu", String(gpu), "--modules", modules], { stdin: "pipe", stdout: "pipe", stderr: "inherit" });
    return new LlamaPeer(proc);
  }

  private async line(): Promise<string> {
    for (;;) {
      const nl = this.buffered.indexOf("\n");
      if (nl >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        return line;
      }
      const { value, done } = await this.reader.read();
      if (done) throw new Error(`the llama.cpp peer exited (code ${await this.proc.exited})`);
      this.buffered += this.decoder.decode(value, { stream: true });
    }
  }

  async request<T = Record<string, unknown>>(req: { op: string } & Record<string, unknown>): Promise<T> {
    this.proc.stdin.write(`${JSON.stringify(req)}\n`);
    await this.proc.stdin.flush();
    const reply = JSON.parse(await this.line()) as { ok: boolean; error?: string } & T;
    if (!reply.ok) throw new Error(`llama.cpp peer, ${req.op}: ${reply.error}`);
    return reply;
  }

  load(o: PeerLoad) {
    return this.request({ op: "load", ...o });
  }

  info(): Promise<PeerInfo> {
    return this.request<PeerInfo>({ op: "info" });
  }

  // Log-probabilities [n][vocab] after every position (teacher-forced).
  async logprobs(tokens: ArrayLike<number>, vocab: number): Promise<Float32Array> {
    const r = await this.request<{ logprobs: string }>({ op: "logprobs", tokens: Array.from(tokens), vocab });
    const bytes = Buffer.from(r.logprobs, "base64");
    return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  }

  async close(): Promise<void> {
    this.proc.stdin.end();
    await this.proc.exited;
  }
}
