"""Loads the saved splash-tiny checkpoint with transformers, checks it against the trained model, prints
logits for a prompt, and writes the golden file for the engine's parity test.

    python3 scripts/train/verify.py models/splash-tiny [--golden DIR]

Golden tensors (fp32, computed in fp32 from the bf16 weights; vocabulary rows include the padding ids):
    p{i}.input_ids int32 [T]         p{i}.logits f32 [T, V]          (prompts 0..2, all positions)
    p0.taps f32 [T, n_taps·H]        DFlash taps (post-residual outputs of target_layer_ids) of prompt 0
    p0.mtp_logits f32 [T-1, V]       MTP, one step at every position t: inputs (token t+1, final-normed hidden t)
    p0.dflash_logits f32 [B-1, V]    DFlash block anchored at the last token of prompt 0 (context = the others)
    p3.input_ids int32 [T]  p3.argmax int32 [T]  p3.logits_last f32 [V]   a longer prompt (several GDN chunks)"""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoTokenizer, Qwen3_5ForConditionalGeneration

sys.path.insert(0, str(Path(__file__).parent))
import chat  # noqa: E402
import modeling  # noqa: E402

LONG_CODE = '''import json
from pathlib import Path


class Store:
    """A tiny JSON key-value store kept in one file."""

    def __init__(self, path):
        self.path = Path(path)
        self.data = json.loads(self.path.read_text()) if self.path.exists() else {}

    def get(self, key, default=None):
        """Return the value stored under key, or default."""
        return self.data.get(key, default)

    def set(self, key, value):
        """Store value under key and write the file."""
        self.data[key] = value
        self.path.write_text(json.dumps(self.data, indent=2))

    def delete(self, key):
        """Remove key if present; return whether it was there."""
        present = key in self.data
        if present:
            del self.data[key]
            self.path.write_text(json.dumps(self.data, indent=2))
        return present


def merge(a, b):
    """Merge two dicts recursively, b winning on conflicts."""
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out
'''


def golden_prompts():
    fib = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number"}]
    multi = [{"role": "system", "content": "Über café — 日本語 ✓"}, {"role": "user", "content": "Say hi 👋"}]
    return [
        chat.render(fib, None, True, False),
        "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n",
        chat.render(multi, None, True, None),
        LONG_CODE,
    ]


def load_state(model_dir):
    state = {}
    for f in sorted(Path(model_dir).glob("model*.safetensors")):
        state.update(load_file(str(f)))
    return state


def load_target(model, mtp, model_dir):
    state = load_state(model_dir)
    mtp_state = {k[len("mtp."):]: v for k, v in state.items() if k.startswith("mtp.")}
    main = {k: v for k, v in state.items() if not k.startswith("mtp.")}
    missing, unexpected = model.load_state_dict(main, strict=False)
    assert not unexpected and all(k.startswith("model.visual.") for k in missing), (missing, unexpected)
    mtp.load_state_dict(mtp_state)


@torch.no_grad()
def check_and_golden(model_dir, golden_dir, model, mtp, drafter, tok, device, log):
    model_dir, golden_dir = Path(model_dir), Path(golden_dir)
    hf, info = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32, output_loading_info=True)
    hf.to(device).eval()
    missing = sorted(info["missing_keys"])
    unexpected = sorted(info["unexpected_keys"])
    assert all(k.startswith("model.visual.") for k in missing), missing
    assert all(k.startswith("mtp.") for k in unexpected), unexpected
    hf_tok = AutoTokenizer.from_pretrained(model_dir)
    fib = [{"role": "user", "content": "Write a Python function that returns the n-th Fibonacci number"}]
    templ = hf_tok.apply_chat_template(fib, tokenize=False, add_generation_prompt=True, enable_thinking=False)
    assert templ == chat.render(fib, None, True, False), "chat_template.jinja differs from the training renderer"
    result = {"missing_keys": f"{len(missing)} model.visual.* (text-only checkpoint)", "unexpected_keys": len(unexpected)}

    tensors, prompts_meta = {}, []
    taps = modeling.Taps(model, drafter.c["dflash_config"]["target_layer_ids"])
    max_diff = 0.0
    for i, text in enumerate(golden_prompts()):
        ids = tok.encode(text, add_special_tokens=False).ids
        assert ids == hf_tok(text, add_special_tokens=False)["input_ids"], "tokenizers and transformers disagree"
        x = torch.tensor([ids], device=device)
        hf_logits = hf(input_ids=x, use_cache=False).logits[0].float()
        h = model.model.language_model(input_ids=x, use_cache=False).last_hidden_state
        own = model.lm_head(h)[0].float()
        max_diff = max(max_diff, (own - hf_logits).abs().max().item())
        prompts_meta.append({"name": f"p{i}", "text": text, "tokens": len(ids)})
        tensors[f"p{i}.input_ids"] = torch.tensor(ids, dtype=torch.int32)
        if i < 3:
            tensors[f"p{i}.logits"] = hf_logits.cpu()
        else:
            tensors[f"p{i}.argmax"] = hf_logits.argmax(-1).to(torch.int32).cpu()
            tensors[f"p{i}.logits_last"] = hf_logits[-1].cpu()
        if i == 0:
            ctx = taps.concat()
            tensors["p0.taps"] = ctx[0].float().cpu()
            pos = torch.arange(len(ids) - 1, device=device)[None]
            embed = model.model.language_model.embed_tokens
            m = mtp(embed(x[:, 1:]), h[:, :-1], modeling.text_rope(model, h, pos))
            tensors["p0.mtp_logits"] = model.lm_head(m)[0].float().cpu()
            block = drafter.c["block_size"]
            s = len(ids) - 1
            bids = torch.full((1, block), drafter.c["dflash_config"]["mask_token_id"], device=device)
            bids[0, 0] = x[0, s]
            out = drafter(embed(bids), torch.arange(s, s + block, device=device)[None], ctx[:, :s],
                          torch.arange(s, device=device)[None], None)
            tensors["p0.dflash_logits"] = model.lm_head(out[:, 1:])[0].float().cpu()
    taps.remove()
    golden_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(golden_dir / "golden.safetensors"))
    meta = {
        "model": "models/splash-tiny",
        "reference": "transformers Qwen3_5ForConditionalGeneration, fp32 compute on the bf16 checkpoint weights",
        "prompts": prompts_meta,
        "dflash": {"target_layer_ids": drafter.c["dflash_config"]["target_layer_ids"], "anchor": "last token of p0",
                   "block_size": drafter.c["block_size"]},
        "mtp_positions": "row t: inputs (token t+1 embedding, final-normed hidden t) at RoPE position t",
        "own_vs_transformers_max_abs_diff": max_diff,
    }
    (golden_dir / "golden.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n")
    result["own_vs_transformers_max_abs_diff"] = max_diff
    result["golden_bytes"] = (golden_dir / "golden.safetensors").stat().st_size
    log(f"verify: transformers reload ok, max |logit diff| vs trained model {max_diff:.2e}, "
        f"golden {result['golden_bytes']} bytes")
    return result


def main():
    model_dir = Path(sys.argv[1])
    hf = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    text = golden_prompts()[0]
    ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        logits = hf(input_ids=ids).logits[0]
    print(f"prompt: {text!r}\ntokens: {ids[0].tolist()}")
    for t in range(ids.shape[1]):
        top = logits[t].topk(3)
        print(f"pos {t:3d} {tok.decode(ids[0, t])!r:>16} → " +
              ", ".join(f"{tok.decode(i)!r} {v:.2f}" for v, i in zip(top.values.tolist(), top.indices.tolist())))
    golden = model_dir.parent.parent / "test/fixtures/models/splash-tiny-golden/golden.safetensors"
    if golden.exists():
        ref = load_file(str(golden))
        ids0 = ref["p0.input_ids"].long()
        with torch.no_grad():
            diff = (hf(input_ids=ids0[None]).logits[0].float() - ref["p0.logits"]).abs().max().item()
        print(f"max |logit - golden| on p0: {diff:.2e}")


if __name__ == "__main__":
    main()
