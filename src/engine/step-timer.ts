// How long steps take, learned from the steps themselves, to size prompt chunks so that running streams keep their
// pace. A step costs about d + c·p: d for its decode tokens (reading the weights once, whatever else the step
// carries) and c per prompt token it carries. Both are moving averages: d over steps that carry no prompt tokens,
// c over steps that carry at least `minChunk` of them.
export class StepTimer {
  private decodeMs: number | undefined;
  private msPerPromptToken: number | undefined;

  constructor(private readonly minChunk: number) {}

  observe(decodeTokens: number, promptTokens: number, ms: number): void {
    const ema = (old: number | undefined, x: number) => (old === undefined ? x : 0.8 * old + 0.2 * x);
    if (promptTokens === 0) {
      if (decodeTokens > 0) this.decodeMs = ema(this.decodeMs, ms);
    } else if (promptTokens >= this.minChunk) {
      const base = decodeTokens > 0 ? (this.decodeMs ?? 0) : 0;
      this.msPerPromptToken = ema(this.msPerPromptToken, Math.max(0, ms - base) / promptTokens);
    }
  }

  // Prompt tokens a step next to decoding streams may carry so that it lasts about targetMs (at least minChunk:
  // prompts always advance). Undefined until a prompt step has been timed.
  promptTokensWithin(targetMs: number): number | undefined {
    if (this.msPerPromptToken === undefined) return undefined;
    const room = (targetMs - (this.decodeMs ?? 0)) / Math.max(this.msPerPromptToken, 1e-6);
    return Math.max(this.minChunk, Math.floor(room));
  }
}
