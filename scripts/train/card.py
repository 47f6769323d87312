"""Writes models/splash-tiny/spec.json and the model card README.md from the run's metrics, so the card
always states what the run measured. Run alone it rewrites both from the committed files:

    python3 scripts/train/card.py models/splash-tiny scripts/train/run"""

import json
import re
import sys
from pathlib import Path

import chat


def thinking_by_default():
    """Whether the template opens a thinking block when `enable_thinking` is not passed (the generation
    prompt then ends in an open "<think>\n" rather than the empty block)."""
    prompt = chat.render([{"role": "user", "content": "x"}], None, True)
    return not prompt.endswith(chat.EMPTY_THINK)


def write_spec(model_dir, config, ids, metrics):
    tau = metrics["eval"]["tau"]
    spec = {
        "id": "splash-tiny",
        "architecture": "qwen3_5",
        "contextLength": config.text_config.max_position_embeddings,
        "maxOutputTokens": 8192,
        "vocabSize": config.text_config.vocab_size,
        "eosTokenIds": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "padTokenId": ids["<|endoftext|>"],
        "thinking": {"start": "<think>", "end": "</think>", "defaultEnabled": thinking_by_default()},
        "toolCallFormat": "qwen3_xml",
        "vision": False,
        "files": {"config": "config.json", "tokenizer": "tokenizer.json", "tokenizerConfig": "tokenizer_config.json",
                  "chatTemplate": "chat_template.jinja", "generationConfig": "generation_config.json"},
        "draft": {"mtp": True, "dflash": "dflash", **({"dflash2": "dflash2"} if (model_dir / "dflash2").is_dir() else {}),
                  "maskTokenId": ids["<|MASK|>"]},
        "measuredAcceptance": {
            "source": "PyTorch reference evaluation (scripts/train/evaluate.py), greedy, held-out coding prompts",
            "mtpK3": round(tau["mtp_k3"], 3),
            "dflashBlock8": round(tau["dflash_block8"], 3),
        },
    }
    (model_dir / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")


def _license(text):
    """A declared license as one table cell: whitespace collapsed, long license texts shortened."""
    parts = [" ".join(p.split()) for p in text.split("|")]
    parts = [p if len(p) <= 60 else p[:57] + "..." for p in parts]
    return re.sub(r"\s+", " ", " / ".join(parts))


def write_card(model_dir, config, dcfg, m, manifest):
    t = config.text_config
    e = m["eval"]
    tt, dt = m["target_training"], m["dflash_training"]
    prev = m.get("previous_run") if m["args"].get("resume_drafter") else None
    unseen = manifest.get("drafter_prompts")
    used = [p for p in manifest["packages"] if p["used"] and p["files"]]
    excluded = [p for p in manifest["packages"] if not p["used"]]
    sizes = {str(p.relative_to(model_dir)): p.stat().st_size for p in sorted(model_dir.rglob("*"))
             if p.is_file() and p.name != "README.md"}
    d2 = model_dir / "dflash2/config.json"
    dflash2 = []
    if d2.exists():
        c2 = json.loads(d2.read_text())["dflash_config"]
        dflash2 = [f"| DFlash2 drafter (`dflash2/`) | the DFlash drafter's backbone and shape with a grouped dynamic causal convolution (kernel {c2['conv_kernel_size']}, {c2['conv_group_size']} channels per coefficient) before and after attention and the MLP of every layer, and a candidate selector (rank {c2['selector_rank']}) over each drafted row's top {c2['selector_top_k']}; trained from the DFlash drafter on a CPU (`scripts/train/run/dflash2/`) |"]
    lines = [
        "# splash-tiny",
        "",
        "Splash's embedded default model: a tiny coding assistant of exactly the Qwen3.5 architecture",
        "(`Qwen3_5ForConditionalGeneration`, model_type `qwen3_5`, text only) with its MTP layer and a DFlash",
        "drafter, trained from scratch by `scripts/train/train.py` in one run on one H200. It exists so that",
        "`splash serve` / `splash run` work with nothing to download, and so speculative decoding and caching",
        "have real acceptance rates to measure. It writes short Python functions and well-formed tool calls;",
        "it knows little else. Quality at long range is not a goal: the 64K context is declared so agent",
        "clients accept it, training used sequences of "
        f"{tt.get('seq_len', m['args']['seq_len'])} tokens.",
        "",
        "## Architecture",
        "",
        "| | |",
        "|---|---|",
        f"| layers | {t.num_hidden_layers}: {', '.join(t.layer_types)} |",
        f"| hidden / MLP | {t.hidden_size} / {t.intermediate_size} (SwiGLU) |",
        f"| gated attention | {t.num_attention_heads} query heads, {t.num_key_value_heads} KV heads (GQA {t.num_attention_heads // t.num_key_value_heads}), head_dim {t.head_dim}, sigmoid output gate, q/k norm |",
        f"| partial RoPE | {int(t.head_dim * t.rope_parameters['partial_rotary_factor'])} of {t.head_dim} dims, theta {t.rope_parameters['rope_theta']:g}, mrope_section {t.rope_parameters['mrope_section']} (interleaved; text positions only) |",
        f"| Gated DeltaNet | {t.linear_num_key_heads} q/k heads × {t.linear_key_head_dim}, {t.linear_num_value_heads} v heads × {t.linear_value_head_dim} (GVA ratio {t.linear_num_value_heads // t.linear_num_key_heads}), conv kernel {t.linear_conv_kernel_dim} |",
        f"| vocabulary | {t.vocab_size} rows ({m['data']['tokenizer_size']} tokens, padded to a multiple of 64), untied lm_head |",
        f"| context | max_position_embeddings {t.max_position_embeddings} |",
        "| norms | zero-centred RMSNorm (1 + w), eps 1e-6; gated RMSNorm (w) in GDN |",
        f"| MTP | 1 layer (`mtp.*`): fc [2H→H] over [norm(embed(t+1)); norm(final-normed hidden t)], one full-attention decoder layer, norm, shared lm_head; {m['params']['mtp']:,} params |",
        f"| DFlash drafter (`dflash/`) | {dcfg['num_hidden_layers']} Qwen3-style layers (hidden {dcfg['hidden_size']}, {dcfg['num_attention_heads']}/{dcfg['num_key_value_heads']} heads × {dcfg['head_dim']}, MLP {dcfg['intermediate_size']}, plain-w RMSNorm, full-width RoPE theta {dcfg['rope_theta']:g}), block {dcfg['block_size']}, target_layer_ids {dcfg['dflash_config']['target_layer_ids']} (residual stream after each of those layers; after layer {t.num_hidden_layers - 1}, the last, it is taken before the final norm), mask token {dcfg['dflash_config']['mask_token_id']} `<\\|MASK\\|>`, bidirectional within the block; embedding and lm_head are the target's (not stored); {m['params']['dflash']:,} params |",
        *dflash2,
        "",
        f"Parameters: target {m['params']['target_text']:,} (text model + lm_head), MTP {m['params']['mtp']:,}, "
        f"drafter {m['params']['dflash']:,}. The checkpoint has no `model.visual.*` tensors; `vision_config` is a",
        "small placeholder so transformers builds its (unused) vision tower quickly, and loading reports those",
        "tensors as missing. Files (bf16 safetensors, sharded at 15 MiB):",
        "",
        "| file | bytes |",
        "|---|---|",
        *[f"| {k} | {v:,} |" for k, v in sizes.items()],
        f"| total (without this card) | {sum(sizes.values()):,} |",
        "",
        "## Tokenizer and chat format",
        "",
        f"Byte-level BPE trained on the corpus ({m['data']['tokenizer_size'] - 27} learned tokens incl. the 256 bytes), NFC",
        "normalizer, the Qwen3.5 pre-tokenizer regex (with `\\p{M}`), then the family's 26 added tokens in the",
        "family's order (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, …, `<think>`, `</think>`) and `<|MASK|>`.",
        f"About {m['data']['bytes_per_token_code']:.2f} bytes per token on the chat samples. `chat_template.jinja` is our own",
        "Qwen3.5-format template (ChatML, `<think>` block on the current turn, XML tool calls, tool results grouped",
        "in one user turn, images/videos as vision placeholders); it renders identically in jinja2 and",
        "@huggingface/jinja (`scripts/train/check_template.py`). As in the Qwen3.5 family, thinking is on by",
        "default: without `enable_thinking` the generation prompt ends in an open `<think>\\n` and the model",
        "writes the block; `enable_thinking=false` renders the empty block `<think>\\n\\n</think>\\n\\n` into the",
        "prompt. All training answers have an empty thinking block, so the mode only changes whether the prompt",
        "or the model writes it.",
        "",
        "## Corpus",
        "",
        f"Python files of the packages installed on the training machine, used only when the package metadata",
        f"names a permissive license and nothing copyleft, proprietary or unknown: {len(used)} packages,",
        f"{manifest['files']} files after content deduplication ({manifest['heldout_files']} held out by file).",
        "Each documented function (4–50 lines, tests left out) became chat samples in "
        f"{m['args']['variants']} phrasings (signature + docstring, or \"Write a Python function that …\"),",
        "the answer being the function, its docstring cut to the summary, in a ```python block; whole files",
        "were added as",
        "`<|repo_name|>`/`<|file_sep|>` documents; synthetic tool conversations (12 tools, XML calls, tool",
        "results, final answers) were added. Training tokens by kind: "
        + ", ".join(f"{k} {v:,}" for k, v in m["data"]["train_tokens_by_kind"].items()) + ".",
        "",
        "| package | version | license (as declared) | files | bytes |",
        "|---|---|---|---|---|",
        *[f"| {p['name']} | {p['version']} | {_license(p['license'])} | {p['files']} | {p['bytes']:,} |" for p in used],
        "",
        "Excluded by license: " + ", ".join(f"{p['name']} ({_license(p['license'])})" for p in excluded) + ".",
        "",
        "## Training run",
        "",
        f"Hardware: {m['device']}; torch {m['torch']}, transformers {m['transformers']}, seed {m['args']['seed']}.",
        *([f"Two runs: the first ({prev['total_seconds']} s wall: corpus, tokenizer, target, drafter, evaluation,",
           f"checks) made the target and a first drafter; a second (`--resume-drafter`, {m['total_seconds']} s wall)",
           "kept the target and continued the drafter, then evaluated everything again. Both rebuilt the same",
           "corpus with the same seed, so the held-out prompts are the same."] if prev else
          [f"Total wall time {m['total_seconds']} s (corpus, tokenizer, both trainings, evaluation, checks)."]),
        "",
        f"- target + MTP: transformers' own modules (torch GDN chunk path), bf16 autocast, AdamW (0.9, 0.95, wd 0.1),",
        f"  peak lr {tt.get('lr')} with {tt.get('warmup')} warm-up steps and cosine decay to 10%, batch {tt.get('batch')} × "
        f"{tt.get('seq_len')} tokens, {tt.get('steps')} steps, {tt.get('tokens', 0):,} tokens in {tt.get('seconds')} s; "
        f"loss = CE(next token) + {m['args']['mtp_weight']} · CE(MTP, token t+2). Final training loss {tt.get('final_loss')},",
        f"  MTP loss {tt.get('final_mtp_loss')}.",
        *(["- DFlash: target frozen; batches of 3/4 greedy answers of the target to requests it never trained on",
           f"  (drawn from {unseen['unseen_functions']} documented functions in {unseen['files_read']} files of the same"
           " packages that the corpus",
           "  size cap left out, none from or equal to a held-out one, and tool requests) and 1/4 corpus chunks;"]
          if unseen and unseen["unseen_functions"] else
          ["- DFlash: target frozen; batches of 3/4 greedy answers of the target to training prompts and 1/4",
           "  corpus chunks;"]),
        f"  {m['args']['draft_anchors']} random anchors per sequence, block [anchor, MASK×7] predicting"
        " anchor+1…anchor+7 against",
        "  the target's greedy token, context = taps of the tokens before the anchor, loss weights exp(−(j−1)/4),",
        f"  AdamW (0.9, 0.95, wd 0.01), cosine decay to 10%, batch {dt['batch']}.",
        *([f"  First run: {prev['dflash_training']['steps']} steps in {prev['dflash_training']['seconds']} s on "
           f"{prev['dflash_training']['generated_sequences']} answers"
           + ("" if "prompt_pool" in prev["dflash_training"] else " to training prompts")
           + f", peak lr {prev['dflash_training']['lr']}. Second run:",
           f"  continued from those weights with a fresh {dt['warmup']}-step warm-up, peak lr {dt['lr']}, "
           f"{dt['steps']} steps in {dt['seconds']} s on",
           f"  {dt['generated_sequences']} newly generated answers ({dt['generated_tokens']:,} tokens)."] if prev else
          # runs from before the drafter's warm-up was recorded used 50 steps
          [f"  {dt.get('warmup', 50)}-step warm-up, peak lr {dt['lr']}, {dt['steps']} steps in {dt['seconds']} s on "
           f"{dt['generated_sequences']} answers."]),
        "",
        "## Evaluation (measured in PyTorch by the training run; the engine's own measurements come later)",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| held-out loss, {k} (nats/token) | {v:.3f} |" for k, v in e["heldout_loss"].items()],
        f"| held-out coding prompts whose greedy answer parses with `ast.parse`, thinking on (the default: prompt ends in `<think>\\n`; issue goal ≥ 60%) | {e['code_think']['parse_rate']:.1%} of {e['code_think']['n']} |",
        f"| same, thinking off (`enable_thinking=false`) | {e['code_no_think']['parse_rate']:.1%} |",
        f"| answers that define a function, thinking on / off | {e['code_think']['defines_function_rate']:.1%} / {e['code_no_think']['defines_function_rate']:.1%} |",
        f"| tool prompts answered with a well-formed call | {e['tools']['well_formed_rate']:.1%} of {e['tools']['n']} |",
        f"| … calling the expected function | {e['tools']['right_function_rate']:.1%} |",
        f"| MTP mean acceptance length τ, k = 3 chained (incl. bonus, max 4) | {e['tau']['mtp_k3']:.2f} over {e['tau']['mtp_cycles']} cycles |",
        f"| DFlash mean acceptance length τ, block 8 (incl. bonus, max 8) | {e['tau']['dflash_block8']:.2f} over {e['tau']['dflash_cycles']} cycles |",
        *([f"| … the first run's drafter, same prompts | {prev['tau']['dflash_block8']:.2f} over {prev['tau']['dflash_cycles']} cycles |"]
          if prev else []),
        "",
        f"τ is measured on the greedy continuations (≤ 256 tokens) of {e['tau']['prompts']} held-out coding prompts (thinking off), with",
        "greedy verification (exact: a cycle accepts the longest draft prefix equal to the target's greedy",
        f"tokens). Histograms of accepted lengths: MTP {e['tau']['mtp_histogram']}, DFlash {e['tau']['dflash_histogram']}.",
        "",
        "Answer to \"" + e["demo"]["prompt"] + "\" (greedy, thinking off):",
        "",
        "````",
        e["demo"]["answer"],
        "````",
        "",
        "Golden logits for the engine's parity test: `test/fixtures/models/splash-tiny-golden/` (written by",
        "`scripts/train/verify.py` from the transformers reload of these files).",
        "",
        "License: Apache-2.0, as Splash; trained only on permissively licensed code listed above.",
        "",
    ]
    (model_dir / "README.md").write_text("\n".join(lines))


def main():
    from transformers import Qwen3_5Config

    model_dir, run_dir = Path(sys.argv[1]), Path(sys.argv[2])
    config = Qwen3_5Config.from_pretrained(model_dir)
    dcfg = json.loads((model_dir / "dflash/config.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    manifest = json.loads((run_dir / "corpus.json").read_text())
    tok = json.loads((model_dir / "tokenizer_config.json").read_text())
    ids = {v["content"]: int(k) for k, v in tok["added_tokens_decoder"].items()}
    write_spec(model_dir, config, ids, metrics)
    write_card(model_dir, config, dcfg, metrics, manifest)


if __name__ == "__main__":
    main()
