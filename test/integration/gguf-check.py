"""Independent check of a GGUF written by `splash export-gguf`, with gguf-py's GGUFReader and numpy.

  python3 test/integration/gguf-check.py CHECKPOINT_DIR FILE.gguf

Re-derives every tensor from the safetensors the way llama.cpp's converter does (conversion/qwen.py:
Qwen3NextModel.modify_tensors, _LinearAttentionVReorderBase, Qwen2MoeModel's gate_up split; norms + 1 except
linear_attn.norm, A_log -> -exp, conv1d squeezed, V heads grouped -> tiled) and compares: F32 tensors exactly,
F16/BF16 after the same rounding, Q8_0/Q4_0 byte for byte against gguf-py's reference quantizers. Prints one JSON
line {"tensors": n, "metadata": {...}} and exits non-zero naming the first mismatch.
"""
import json
import struct
import sys
from pathlib import Path

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType, quants


def read_safetensors(d: Path) -> dict:
    files = sorted(d.glob("*.safetensors"))
    out = {}
    for f in files:
        raw = f.read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        for name, t in header.items():
            if name == "__metadata__":
                continue
            a, b = t["data_offsets"]
            buf = raw[base + a:base + b]
            if t["dtype"] == "BF16":
                x = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32)
            elif t["dtype"] == "F16":
                x = np.frombuffer(buf, np.float16).astype(np.float32)
            else:
                x = np.frombuffer(buf, np.float32)
            out[name] = x.reshape(t["shape"])
    return out


def reorder_v(x: np.ndarray, axis: int, hk: int, r: int, dim: int) -> np.ndarray:
    # [.., Hk, r, dim, ..] -> [.., r, Hk, dim, ..] along `axis` (the converter's _reorder_v_heads)
    shape = list(x.shape)
    new = shape[:axis] + [hk, r, dim] + shape[axis + 1:]
    y = x.reshape(new)
    perm = list(range(len(new)))
    perm[axis], perm[axis + 1] = perm[axis + 1], perm[axis]
    return y.transpose(perm).reshape(shape)


def expected(d: Path) -> tuple[dict, dict, str]:
    cfg = json.loads((d / "config.json").read_text())
    t = cfg.get("text_config", cfg)
    st = read_safetensors(d)
    pre = "model.language_model." if "model.language_model.embed_tokens.weight" in st else "model."
    moe = "num_experts" in t
    hk, hv, dk, dv = t["linear_num_key_heads"], t["linear_num_value_heads"], t["linear_key_head_dim"], t["linear_value_head_dim"]
    r = hv // hk
    out = {"token_embd.weight": st[pre + "embed_tokens.weight"], "output_norm.weight": st[pre + "norm.weight"] + 1}
    if "lm_head.weight" in st:
        out["output.weight"] = st["lm_head.weight"]
    for i in range(t["num_hidden_layers"]):
        p, b = f"{pre}layers.{i}.", f"blk.{i}."
        out[b + "attn_norm.weight"] = st[p + "input_layernorm.weight"] + 1
        out[b + "post_attention_norm.weight"] = st[p + "post_attention_layernorm.weight"] + 1
        if p + "self_attn.q_proj.weight" in st:
            for src, dst in [("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"), ("o_proj", "attn_output")]:
                out[b + dst + ".weight"] = st[p + f"self_attn.{src}.weight"]
            out[b + "attn_q_norm.weight"] = st[p + "self_attn.q_norm.weight"] + 1
            out[b + "attn_k_norm.weight"] = st[p + "self_attn.k_norm.weight"] + 1
        else:
            a = p + "linear_attn."
            reo = hk != hv
            qkv = st[a + "in_proj_qkv.weight"]
            kd = hk * dk * 2
            conv = st[a + "conv1d.weight"].squeeze()
            if reo:
                qkv = np.concatenate([qkv[:kd], reorder_v(qkv[kd:], 0, hk, r, dv)])
                conv = np.concatenate([conv[:kd], reorder_v(conv[kd:], 0, hk, r, dv)])
            f = (lambda x, dim, axis=0: reorder_v(x, axis, hk, r, dim)) if reo else (lambda x, dim, axis=0: x)
            out[b + "attn_qkv.weight"] = qkv
            out[b + "attn_gate.weight"] = f(st[a + "in_proj_z.weight"], dv)
            out[b + "ssm_beta.weight"] = f(st[a + "in_proj_b.weight"], 1)
            out[b + "ssm_alpha.weight"] = f(st[a + "in_proj_a.weight"], 1)
            out[b + "ssm_conv1d.weight"] = conv
            out[b + "ssm_dt.bias"] = f(st[a + "dt_bias"][:, None], 1)[:, 0]
            out[b + "ssm_a"] = f(-np.exp(st[a + "A_log"])[:, None], 1)[:, 0]
            out[b + "ssm_norm.weight"] = st[a + "norm.weight"]
            out[b + "ssm_out.weight"] = f(st[a + "out_proj.weight"], dv, 1)
        if moe:
            m = p + "mlp."
            out[b + "ffn_gate_inp.weight"] = st[m + "gate.weight"]
            if m + "experts.gate_up_proj" in st:
                gu = st[m + "experts.gate_up_proj"]
                n = gu.shape[1] // 2
                out[b + "ffn_gate_exps.weight"], out[b + "ffn_up_exps.weight"] = gu[:, :n], gu[:, n:]
                out[b + "ffn_down_exps.weight"] = st[m + "experts.down_proj"]
            else:
                for proj, dst in [("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")]:
                    out[b + dst + ".weight"] = np.stack([st[m + f"experts.{e}.{proj}.weight"] for e in range(t["num_experts"])])
            out[b + "ffn_gate_inp_shexp.weight"] = st[m + "shared_expert_gate.weight"].squeeze()
            for proj, dst in [("gate_proj", "ffn_gate_shexp"), ("up_proj", "ffn_up_shexp"), ("down_proj", "ffn_down_shexp")]:
                out[b + dst + ".weight"] = st[m + f"shared_expert.{proj}.weight"]
        else:
            for proj, dst in [("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")]:
                out[b + dst + ".weight"] = st[p + f"mlp.{proj}.weight"]
    return out, t, "qwen35moe" if moe else "qwen35"


F32_ALWAYS = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_inp_shexp.weight", "ssm_conv1d.weight")


def main() -> None:
    d, path = Path(sys.argv[1]), sys.argv[2]
    want, t, arch = expected(d)
    reader = GGUFReader(path)
    fields = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.ggml.")}
    def check(cond: bool, what: str) -> None:
        if not cond:
            sys.exit(f"{path}: {what}")
    check(fields["general.architecture"] == arch, f"architecture {fields['general.architecture']}")
    kv = {
        "block_count": t["num_hidden_layers"], "embedding_length": t["hidden_size"],
        "attention.head_count": t["num_attention_heads"], "attention.head_count_kv": t["num_key_value_heads"],
        "attention.key_length": t["head_dim"], "attention.value_length": t["head_dim"],
        "ssm.conv_kernel": t["linear_conv_kernel_dim"], "ssm.state_size": t["linear_key_head_dim"],
        "ssm.group_count": t["linear_num_key_heads"], "ssm.time_step_rank": t["linear_num_value_heads"],
        "ssm.inner_size": t["linear_num_value_heads"] * t["linear_value_head_dim"],
        "rope.dimension_count": int(t["head_dim"] * t["rope_parameters"]["partial_rotary_factor"]),
        "rope.dimension_sections": (t["rope_parameters"]["mrope_section"] + [0, 0, 0, 0])[:4],
        "full_attention_interval": t.get("full_attention_interval", 4),
    }
    if arch == "qwen35moe":
        kv.update({"expert_count": t["num_experts"], "expert_used_count": t["num_experts_per_tok"],
                   "expert_feed_forward_length": t["moe_intermediate_size"],
                   "expert_shared_feed_forward_length": t["shared_expert_intermediate_size"]})
    else:
        kv["feed_forward_length"] = t["intermediate_size"]
    for k, v in kv.items():
        check(fields.get(f"{arch}.{k}") == v, f"{arch}.{k} = {fields.get(f'{arch}.{k}')}, expected {v}")
    check(abs(fields[f"{arch}.rope.freq_base"] - t["rope_parameters"]["rope_theta"]) <= 1e-6 * t["rope_parameters"]["rope_theta"], "rope.freq_base")
    names = [x.name for x in reader.tensors]
    check(sorted(names) == sorted(want), f"tensor names differ: extra {sorted(set(names) - set(want))}, missing {sorted(set(want) - set(names))}")
    for x in reader.tensors:
        e = want[x.name].astype(np.float32)
        shape = tuple(int(s) for s in reversed(x.shape))
        check(shape == e.shape, f"{x.name}: shape {shape}, expected {e.shape}")
        q = x.tensor_type
        forced = x.name.endswith(F32_ALWAYS) or e.ndim == 1 or not x.name.endswith(".weight")
        check(not forced or q == GGMLQuantizationType.F32, f"{x.name}: {q.name}, llama.cpp's converter keeps it F32")
        raw = np.asarray(x.data)
        if q == GGMLQuantizationType.F32:
            got = raw.reshape(e.shape)
            # ssm_a = -exp(A_log): exp may differ by an ulp between libraries; everything else is exact
            ok = np.allclose(got, e, rtol=1e-6, atol=0) if x.name.endswith("ssm_a") else np.array_equal(got, e)
            check(ok, f"{x.name}: max |diff| {np.abs(got - e).max()}")
        elif q in (GGMLQuantizationType.F16, GGMLQuantizationType.BF16):
            ref = quants.quantize(e, q)
            check(np.array_equal(raw.view(np.uint8).reshape(-1), ref.view(np.uint8).reshape(-1)), f"{x.name}: {q.name} bytes differ from gguf-py's rounding")
        else:
            ref = quants.quantize(e.reshape(-1, e.shape[-1]), q)
            got = raw.view(np.uint8).reshape(-1)
            diff = int((got != ref.reshape(-1)).sum())
            # numpy and C may round a value that sits exactly on a half differently: allow a few bytes, no more
            check(diff <= max(2, got.size // 100000), f"{x.name}: {diff} of {got.size} {q.name} bytes differ from gguf-py's reference quantizer")
    print(json.dumps({"tensors": len(names), "arch": arch}))


main()
