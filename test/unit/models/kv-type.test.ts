// applyKvType against a backend that lacks a KV type (every built-in backend now runs all three, so the CLI cannot
// reach this): an explicit choice is refused naming the types it has, and auto falls back to the next wider type.
import { expect, test } from "bun:test";
import { CliError } from "../../../src/cli/_command.ts";
import { applyKvType, type KvType } from "../../../src/models/kv-type.ts";
import type { Model } from "../../../src/native/model.ts";

function stub(have: KvType[]) {
  const set: KvType[] = [];
  const model = { kvTypes: have, info: { backend: "gpu: test" }, setKvType: (t: KvType) => set.push(t) } as unknown as Model;
  return { model, set };
}

test("an explicit type the backend lacks is refused, naming what it has", () => {
  const { model, set } = stub(["f32", "f16"]);
  let err: unknown;
  try {
    applyKvType(model, "int8", "int8");
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(CliError);
  expect((err as Error).message).toBe("--kv-type int8: the gpu: test backend has no int8 KV cache (it has f32, f16)");
  expect(set).toEqual([]);
});

test("auto takes the measured type, else the next wider one the backend has, else f32", () => {
  for (const [have, measured, want] of [
    [["f32", "f16", "int8"], "int8", "int8"],
    [["f32", "f16"], "int8", "f16"],
    [["f32"], "int8", "f32"],
    [["f32", "f16", "int8"], undefined, "f32"],
  ] as [KvType[], KvType | undefined, KvType][]) {
    const { model, set } = stub(have);
    expect(applyKvType(model, "auto", measured)).toBe(want);
    expect(set).toEqual([want]);
  }
});
