// The vision fixture as a servable model, for tests of image input through the whole stack (API → template →
// tokenizer → vision encoder → native engine):
//
//   weights      test/fixtures/models/qwen35-vision-tiny (random, vocab 1024, a 2-block vision tower, its
//                preprocessor_config.json)
//   tokenizer    fixture-1024's byte-level BPE with the vision fixture's special ids: 1016 <|im_end|>,
//                1017 <|endoftext|>, 1018 <|im_start|>, 1019 <think>, 1020 <|vision_start|>, 1021 <|vision_end|>,
//                1022 <|image_pad|>, 1023 <|video_pad|> (fixture-1024 puts think and tool tokens at 1020-1023; here
//                </think> and the tool tags are plain text)
//   template     fixture-1024's turn format, with each image part rendered as <|vision_start|><|image_pad|><|vision_end|>
//
//   const loaded = await loadVisionFixtureModel();   // loadModel() on it; loaded.chat.vision is true
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type LoadedModel, type LoadModelOptions } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";

const FIXTURES = join(import.meta.dir, "../fixtures");
export const VISION_MODEL_ID = "fixture-vision-tiny";
const WEIGHTS = join(FIXTURES, "models/qwen35-vision-tiny");
const TOKENIZER = join(FIXTURES, "tokenizers/fixture-1024");

const ADDED: [number, string, boolean][] = [
  [1016, "<|im_end|>", true],
  [1017, "<|endoftext|>", true],
  [1018, "<|im_start|>", true],
  [1019, "<think>", false],
  [1020, "<|vision_start|>", true],
  [1021, "<|vision_end|>", true],
  [1022, "<|image_pad|>", true],
  [1023, "<|video_pad|>", true],
];

// A message's content: a string, or parts where images become the vision placeholders.
const CONTENT = `{%- if message.content is string -%}{{- message.content -}}{%- else -%}{%- for part in message.content -%}{%- if part.type == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}{%- else -%}{{- part.text -}}{%- endif -%}{%- endfor -%}{%- endif -%}`;

let assembled: string | undefined;

export function visionFixtureModelDir(): string {
  if (assembled) return assembled;
  const root = mkdtempSync(join(tmpdir(), "splash-vision-model-"));
  process.on("exit", () => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, VISION_MODEL_ID);
  mkdirSync(dir);
  for (const f of ["config.json", "generation_config.json", "model.safetensors", "preprocessor_config.json"]) copyFileSync(join(WEIGHTS, f), join(dir, f));
  const tokenizer = JSON.parse(readFileSync(join(TOKENIZER, "tokenizer.json"), "utf8")) as { added_tokens: Record<string, unknown>[] };
  const template = readFileSync(join(TOKENIZER, "chat_template.jinja"), "utf8");
  tokenizer.added_tokens = ADDED.map(([id, content, special]) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special }));
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
  writeFileSync(join(dir, "tokenizer_config.json"), readFileSync(join(TOKENIZER, "tokenizer_config.json")));
  const withImages = template
    .replace("{{- '<|im_start|>user\\n' + message.content + '<|im_end|>\\n' -}}", `{{- '<|im_start|>user\\n' -}}${CONTENT}{{- '<|im_end|>\\n' -}}`)
    .replace("{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' -}}", `{{- '<|im_start|>user\\n<tool_response>\\n' -}}${CONTENT}{{- '\\n</tool_response><|im_end|>\\n' -}}`);
  if (withImages === template) throw new Error("fixture-1024's chat template changed: update the vision fixture helper");
  writeFileSync(join(dir, "chat_template.jinja"), withImages);
  assembled = dir;
  return dir;
}

export function loadVisionFixtureModel(options: LoadModelOptions = {}): Promise<LoadedModel> {
  return loadModel(resolveModel(visionFixtureModelDir()), { threads: 2, kvBudget: 32 << 20, ...options });
}
