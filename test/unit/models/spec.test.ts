// The spec schema and the registry: every committed spec parses, lookups by id and alias, and the schema refuses
// malformed specs with the field named. Config matching: a checkpoint is the supported model only when every
// expected value matches, and a refusal names the key, the expected and the actual value.
import { describe, expect, test } from "bun:test";
import { readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { configMismatches, describeMismatch, expectedConfig, interpretConfig, ConfigError, type JsonObject } from "../../../src/models/config.ts";
import { allSpecs, findSpec, hubSpecs, MODELS_DIR, specForConfig } from "../../../src/models/registry.ts";
import { hubDrafter, parseSpec, type HubModelSpec } from "../../../src/models/spec.ts";
import { specConfigJson } from "../../helpers/mock-hub.ts";

const spec27 = findSpec("qwen3.8-27b") as HubModelSpec;
const spec35 = findSpec("qwen3.6-35b-a3b") as HubModelSpec;

describe("registry", () => {
  test("every models/*/spec.json is registered (so dist/splash embeds it) and parses", () => {
    const registered = new Set(allSpecs().map((s) => s.id));
    const dirs = readdirSync(MODELS_DIR).filter((d) => existsSync(join(MODELS_DIR, d, "spec.json")));
    const missing = dirs.filter((d) => !registered.has(d)).map((d) => `models/${d}/spec.json is not imported in RAW of src/models/registry.ts`);
    expect(missing).toEqual([]);
    expect([...registered].sort()).toEqual(dirs.sort());
  });
  test("lookup by id, alias and official repository, case-insensitive", () => {
    expect(findSpec("qwen3.8-27b")?.id).toBe("qwen3.8-27b");
    expect(findSpec("Qwen/Qwen3.8-27B")?.id).toBe("qwen3.8-27b");
    expect(findSpec("QWEN3.8")?.id).toBe("qwen3.8-27b");
    expect(findSpec("qwen/qwen3.6-35b-a3b")?.id).toBe("qwen3.6-35b-a3b");
    expect(findSpec("qwen3.8-27")).toBeUndefined();
  });
  test("hub models name a verified-or-assumed source for every format and a separately downloaded drafter", () => {
    for (const s of hubSpecs()) {
      expect(Object.keys(s.sources).sort()).toEqual(["bf16", "mlx-4bit", "mlx-8bit"]);
      for (const src of Object.values(s.sources)) expect(src.evidence.length).toBeGreaterThan(20);
      expect(hubDrafter(s)).toBeDefined();
      expect(s.draft.default).toBe("mtp");
    }
  });
});

describe("schema", () => {
  const base = structuredClone(spec27) as unknown as JsonObject;
  const refuse = (patch: (s: JsonObject) => void, message: RegExp) => {
    const s = structuredClone(base);
    patch(s);
    expect(() => parseSpec(s, "x.json")).toThrow(message);
  };
  test("the committed spec round-trips", () => expect(parseSpec(base, "x.json").id).toBe("qwen3.8-27b"));
  test("an unknown key is an error (strict), naming it", () => refuse((s) => (s.contextLenght = 1), /Unrecognized key.*contextLenght/));
  test("a hub model needs its expected config", () => refuse((s) => delete s.config, /config: a hub model needs `config`/));
  test("a spec is either a hub model or an embedded one", () => refuse((s) => (s.files = { config: "config.json" }), /either `sources`/));
  test("a repository id has an owner", () => refuse((s) => ((s.sources as JsonObject).bf16 = { ...((s.sources as JsonObject).bf16 as JsonObject), repo: "Qwen3.8-27B" }), /sources\.bf16\.repo/));
  test("a recipe covers each kind once", () =>
    refuse((s) => (s.quantization as { recipe: JsonObject[] }).recipe.push({ kinds: ["embed"], q8: "q8", q4: "q4", why: "again" }), /embed is covered by rule 1 already/));
});

describe("config matching", () => {
  const real27 = () => structuredClone(specConfigJson(spec27)) as JsonObject & { text_config: JsonObject };

  test("a config shaped like the official one (nested text_config, explicit layer_types, rope_parameters) matches", () => {
    const cfg = interpretConfig(real27(), "config.json");
    expect(configMismatches(spec27.config, cfg)).toEqual([]);
    expect(specForConfig(cfg)?.id).toBe("qwen3.8-27b");
  });
  test("each spec matches its own expected config and not the other's", () => {
    expect(configMismatches(spec27.config, expectedConfig(spec27))).toEqual([]);
    expect(configMismatches(spec35.config, expectedConfig(spec35))).toEqual([]);
    expect(specForConfig(expectedConfig(spec35))?.id).toBe("qwen3.6-35b-a3b");
  });
  test("a differing value is named with expected and actual", () => {
    const c = real27();
    c.text_config.hidden_size = 4096;
    const m = configMismatches(spec27.config, interpretConfig(c, "config.json"));
    expect(m.map(describeMismatch)).toEqual(["text_config.hidden_size: expected 5120, found 4096"]);
    expect(specForConfig(interpretConfig(c, "config.json"))).toBeUndefined();
  });
  test("layer kinds are compared one by one", () => {
    const c = real27();
    (c.text_config.layer_types as string[])[5] = "full_attention";
    expect(configMismatches(spec27.config, interpretConfig(c, "config.json")).map(describeMismatch)).toEqual(['layer_types[5]: expected "linear_attention", found "full_attention"']);
  });
  test("a key left out means the transformers default (head_dim 256 matches; a missing vision tower does not)", () => {
    const c = real27();
    delete c.text_config.head_dim;
    expect(configMismatches(spec27.config, interpretConfig(c, "config.json"))).toEqual([]);
    delete c.vision_config;
    expect(configMismatches(spec27.config, interpretConfig(c, "config.json"))[0]).toEqual({ key: "vision_config.depth", expected: 27, actual: undefined });
  });
  test("RoPE settings at the top of text_config (older configs) are read too", () => {
    const c = real27();
    const rope = c.text_config.rope_parameters as JsonObject;
    c.text_config.rope_theta = rope.rope_theta;
    c.text_config.partial_rotary_factor = rope.partial_rotary_factor;
    delete c.text_config.rope_parameters;
    expect(configMismatches(spec27.config, interpretConfig(c, "config.json"))).toEqual([]);
  });
  test("an MLX config: flat text keys and a quantization block", () => {
    const c = real27();
    const flat = { ...c.text_config, model_type: "qwen3_5", vision_config: c.vision_config, quantization: { group_size: 64, bits: 4 } };
    const cfg = interpretConfig(flat, "config.json");
    expect(cfg.mlx).toEqual({ mode: "affine", bits: 4, groupSize: 64, overrides: {} });
    expect(specForConfig(cfg)?.id).toBe("qwen3.8-27b");
    expect(() => interpretConfig({ ...flat, quantization: { group_size: 32, bits: 4 } }, "config.json")).toThrow(/group size 32/);
  });
  test("a checkpoint of another family is refused by model type", () => {
    expect(() => interpretConfig({ model_type: "llama" }, "config.json")).toThrow(ConfigError);
    expect(() => interpretConfig({ model_type: "llama" }, "config.json")).toThrow(/"llama" is not a Qwen3.5-family checkpoint/);
  });
});
