// An Engine that replays a fixed answer, tokenized as the model would emit it (special tokens such as </think> and
// <tool_call> as their added tokens), a few tokens a step, then <|im_end|> unless the reason is "length"; it honours
// abort. Under it the whole chat layer runs as with a model (template, parser, stop strings, usage), deterministically.
import type { Engine, EngineEvent, GenerateRequest } from "../../src/engine/types.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

export type Replay = { answer: string; reason?: "stop" | "length" | "cancelled"; cached?: number; step?: number; logprobs?: boolean };

export class ReplayEngine implements Engine {
  requests: GenerateRequest[] = [];
  delivered = 0;

  constructor(
    private readonly tok: Tokenizer,
    private readonly replay: Replay | ((req: GenerateRequest) => Replay),
  ) {}

  async *generate(req: GenerateRequest): AsyncIterable<EngineEvent> {
    this.requests.push(req);
    const script = typeof this.replay === "function" ? this.replay(req) : this.replay;
    yield { type: "admitted", promptTokens: req.prompt.length, cachedPromptTokens: script.cached ?? 0 };
    const ids = [...this.tok.encodeTemplate(script.answer)];
    const reason = script.reason ?? "stop";
    if (reason === "stop") ids.push(this.tok.addedTokenId("<|im_end|>")!);
    const step = script.step ?? 3;
    for (let i = 0; i < ids.length; i += step) {
      await Bun.sleep(0);
      if (req.signal.aborted) {
        yield { type: "done", reason: "cancelled" };
        return;
      }
      const tokens = ids.slice(i, i + step).map((id) => ({ id, ...(script.logprobs ? { logprob: -0.5, top: [{ id, logprob: -0.5 }] } : {}) }));
      this.delivered += tokens.length;
      yield { type: "tokens", tokens };
    }
    yield { type: "done", reason };
  }

  stats() {
    return { running: 0, queued: 0, stateBytesInUse: 0, stateBytesBudget: 0, prefixCacheHitTokens: 0, promptTokensComputed: 0, generatedTokens: 0 };
  }

  async close() {}
}
