// The bun:ffi side of libsplash's tokenizer (native/tokenizer/): build the BPE tables once, then encode plain-text
// segments through one reusable input buffer and one reusable id buffer, so an encode allocates only its result.
import { type Pointer } from "bun:ffi";
import type { NativeLibrary } from "../native/library.ts";
import type { TokenizerSpec } from "./tokenizer-json.ts";

export class NativeBpe {
  private input = new Uint8Array(1 << 16);
  private ids = new Int32Array(1 << 16);
  private readonly count = new BigInt64Array(1);
  private readonly utf8 = new TextEncoder();

  private constructor(
    private readonly lib: NativeLibrary,
    private handle: Pointer | null,
  ) {}

  static create(lib: NativeLibrary, spec: TokenizerSpec): NativeBpe {
    const n = spec.tokenOffsets.length - 1;
    // The C side needs a non-empty buffer even for an (impossible) empty vocabulary blob.
    const bytes = spec.tokenBytes.length > 0 ? spec.tokenBytes : new Uint8Array(1);
    const pattern = spec.pattern === null ? null : Buffer.from(`${spec.pattern}\0`, "utf8");
    const out = new BigUint64Array(1);
    const merges = spec.merges.length > 0 ? spec.merges : new Int32Array(2);
    const status = lib.splash_tokenizer_create(pattern, bytes, spec.tokenOffsets, n, merges, spec.merges.length / 2, spec.ignoreMerges ? 1 : 0, out);
    if (status !== 0) throw new Error(`cannot build the tokenizer: ${lib.splash_last_error()}`);
    return new NativeBpe(lib, Number(out[0]) as Pointer);
  }

  // Ids of one NFC-normalized segment that holds no added tokens. The returned array is a view into a buffer the
  // next call overwrites: copy it before encoding again.
  encode(text: string): Int32Array {
    if (this.handle === null) throw new Error("the tokenizer was freed");
    if (text.length === 0) return this.ids.subarray(0, 0);
    if (this.input.length < text.length * 3) this.input = new Uint8Array(text.length * 3 + 1024);
    const { written } = this.utf8.encodeInto(text, this.input);
    if (this.ids.length < written) this.ids = new Int32Array(written + 1024);
    const status = this.lib.splash_tokenizer_encode(this.handle, this.input, written, this.ids, this.ids.length, this.count);
    if (status !== 0) throw new Error(`tokenizer: ${this.lib.splash_last_error()}`);
    return this.ids.subarray(0, Number(this.count[0]));
  }

  free(): void {
    if (this.handle !== null) this.lib.splash_tokenizer_free(this.handle);
    this.handle = null;
  }
}
