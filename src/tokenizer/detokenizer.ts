// Incremental detokenization for streaming: token ids in, text out as soon as it is whole. A character split across
// tokens (CJK and emoji are often 2-4 byte-level tokens) is held until its last byte arrives, so no broken UTF-8
// sequence is ever emitted and no byte is lost or repeated at a token boundary. Bytes that can never become a valid
// character become U+FFFD as soon as that is certain, exactly as decoding the whole sequence at once would (the
// WHATWG UTF-8 decoder in streaming mode; same replacement rules as Python's errors="replace").
import type { Tokenizer } from "./tokenizer.ts";

export class IncrementalDetokenizer {
  // ignoreBOM: a leading U+FEFF is text the model produced, not a byte-order mark to drop.
  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  constructor(private readonly tokenizer: Tokenizer) {}

  // The text that token `id` completes ("" while a character is still incomplete).
  push(id: number): string {
    return this.decoder.decode(this.tokenizer.tokenBytes(id), { stream: true });
  }

  // The rest at the end of the stream: an incomplete character becomes U+FFFD.
  flush(): string {
    return this.decoder.decode();
  }
}
