// The memory plan's sequence-state numbers are a load's: for checkpoints with each supported model's attention and
// GDN head shapes (a few layers, a tiny hidden size, random weights), the inventory's sequence state (described from
// the config alone) equals splash_cache_page_bytes and splash_cache_slot_bytes of the loaded model, and scaling the
// per-layer bytes to the model's layer counts gives the spec's kvBytesPerToken and stateBytesPerSequence, in every
// KV type.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeRandomCheckpoint } from "../../../src/bench/random-checkpoint.ts";
import { randomModelConfig } from "../../../src/bench/random-model.ts";
import { expectedConfig, readCheckpointConfig } from "../../../src/models/config.ts";
import { KV_TYPES } from "../../../src/models/kv-type.ts";
import { hubSpecs } from "../../../src/models/registry.ts";
import { inventory } from "../../../src/native/inventory.ts";
import { Model } from "../../../src/native/model.ts";

const tmp = mkdtempSync(join(tmpdir(), "splash-models-native-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("sequence-state bytes: spec vs libsplash", () => {
  for (const spec of hubSpecs()) {
    test(spec.id, async () => {
      const want = expectedConfig(spec);
      const t = want.text;
      const n = (k: string) => Number(t[k]);
      // 4 layers: three GDN and one full attention, with the model's head counts and dims.
      const dir = join(tmp, spec.id);
      const size = {
        hidden: 64, layers: 4, intermediate: 64, vocab: 256, context: 4096,
        heads: n("num_attention_heads"), kvHeads: n("num_key_value_heads"), headDim: n("head_dim"),
        linearKeyHeads: n("linear_num_key_heads"), linearValueHeads: n("linear_num_value_heads"), linearHeadDim: n("linear_value_head_dim"), vision: true,
      };
      writeRandomCheckpoint(dir, randomModelConfig(size), { seed: 1, producer: "memory-native.test.ts" });
      expect(n("linear_key_head_dim")).toBe(n("linear_value_head_dim")); // the random writer has one GDN head dim
      const { state } = inventory(readCheckpointConfig(dir).root);
      const model = await Model.load(dir, { threads: 1 });
      const full = want.layerTypes.filter((k) => k === "full_attention").length;
      const linear = want.layerTypes.length - full;
      try {
        expect(model.info.kvType).toBe("f32");
        for (const type of KV_TYPES) {
          model.setKvType(type);
          // pages of 64 tokens need no padding: a page is exactly 64 tokens of K and V
          expect(model.pageBytes(64)).toBe(64 * state.kvBytesPerToken[type]);
          expect(model.info.kvBytesPerToken).toBe(state.kvBytesPerToken[type]);
          expect(model.info.kvBytesPerToken * full).toBe(spec.memory!.kvBytesPerToken[type]);
        }
        expect(model.slotBytes).toBe(state.slotBytes);
        expect((model.slotBytes / 3) * linear).toBe(spec.memory!.stateBytesPerSequence);
      } finally {
        model.free();
      }
    });
  }
});
