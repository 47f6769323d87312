"""splash-tiny's three networks and their files.

- target: transformers' own `Qwen3_5ForConditionalGeneration` (text part trained; no vision weights are
  saved: the small `vision_config` only keeps the class from building a full-size tower on load).
- MTP (`mtp.*`), as Qwen3.5 ships it and vLLM runs it (qwen35-architecture.md §2.6):
      e = pre_fc_norm_embedding(embed(token t+1));  h = pre_fc_norm_hidden(final-normed hidden at t)
      x = fc([e ; h]);  x = layers[0](x)  (a full-attention Qwen3.5 decoder layer, position t);  m = norm(x)
      logits = lm_head(m) predict token t+2.  Chained drafting feeds m back as the next step's h.
- DFlash drafter in the z-lab layout (speculative-decoding.md §1.2, §4.3): Qwen3-style layers (plain
  w·x̂ RMSNorm, full-width NeoX RoPE), context = hidden_norm(fc(concat of tapped target layers)) injected
  as extra keys/values in every layer, block [anchor, MASK×(B−1)] attends bidirectionally to itself and
  to the context before the anchor; lm_head(norm(h)) on rows 1..B−1. Embedding and head are the target's.
- DFlash2 drafter (z-lab `DFlash2DraftModel`, speculative-decoding.md §1.3): the same, with a grouped dynamic
  causal convolution before and after attention and the MLP of every layer (block-local), and a candidate
  selector: per drafted row the top-k of its logits, scored s(c) = logit(c) + Σ_r pred[prev]·(W n)·succ[c],
  walked from the anchor. It starts from a trained DFlash drafter: identity convolutions and a selector whose
  term is zero, so it begins as that drafter and training adds what the new parts can do.
"""

import copy
import json
import math

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

SHARD_BYTES = 15 * 1024 * 1024


def target_config(vocab_size, ids, size):
    """The Qwen3_5Config of splash-tiny. `size` holds hidden/intermediate/layers; ids the special token ids."""
    n_layers = size["layers"]
    text = {
        "model_type": "qwen3_5_text",
        "vocab_size": vocab_size,
        "hidden_size": size["hidden"],
        "intermediate_size": size["intermediate"],
        "num_hidden_layers": n_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 64,
        "linear_value_head_dim": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "full_attention_interval": 4,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n_layers)],
        "max_position_embeddings": size["context"],
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
            "mrope_section": [3, 3, 2],
            "mrope_interleaved": True,
        },
        "rms_norm_eps": 1e-6,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "use_cache": True,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "mamba_ssm_dtype": "float32",
        "bos_token_id": None,
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    vision = {
        "model_type": "qwen3_5_vision",
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_heads": 2,
        "out_hidden_size": size["hidden"],
        "num_position_embeddings": 64,
    }
    return Qwen3_5Config(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=False,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )


def init_linears(module, std):
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, std)


class MTP(nn.Module):
    def __init__(self, text_config):
        super().__init__()
        cfg = copy.deepcopy(text_config)
        cfg.num_hidden_layers = 1
        cfg.layer_types = ["full_attention"]
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = Qwen3_5RMSNorm(h, eps=eps)
        self.pre_fc_norm_hidden = Qwen3_5RMSNorm(h, eps=eps)
        self.layers = nn.ModuleList([Qwen3_5DecoderLayer(cfg, 0)])
        self.norm = Qwen3_5RMSNorm(h, eps=eps)
        init_linears(self, cfg.initializer_range)

    def forward(self, next_embeds, hidden, position_embeddings):
        """next_embeds: embed(t+1) [B,T,H]; hidden: normed main (or previous MTP) hidden at t [B,T,H];
        position_embeddings: the text model's (cos, sin) for positions t. Returns normed hidden [B,T,H]."""
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], dim=-1))
        x = self.layers[0](x, position_embeddings=position_embeddings, attention_mask=None)
        return self.norm(x)


def text_rope(model, x, positions):
    """(cos, sin) of the target's rotary embedding for 1-D text positions [B,T]."""
    pos3 = positions[None].expand(3, *positions.shape)
    return model.model.language_model.rotary_emb(x, pos3)


class RMSNorm(nn.Module):
    """Qwen3 RMSNorm (the drafter's): y = w · x̂, weight initialised to ones."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class DraftAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, nh, nkv, hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(h, nh * hd, bias=False)
        self.k_proj = nn.Linear(h, nkv * hd, bias=False)
        self.v_proj = nn.Linear(h, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, h, bias=False)
        self.q_norm = RMSNorm(hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(hd, c["rms_norm_eps"])

    def forward(self, x, ctx, rope_q, rope_k, mask):
        """x: block rows [B,Q,H]; ctx: fused context [B,C,H]; rope_q/rope_k: (cos, sin) for the Q block
        positions and the C+Q key positions; mask: bool [B,1,Q,C+Q] (True = visible)."""
        b, q_len, _ = x.shape
        kv_in = torch.cat([ctx, x], dim=1)
        q = self.q_norm(self.q_proj(x).view(b, q_len, self.nh, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(kv_in).view(b, -1, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(kv_in).view(b, -1, self.nkv, self.hd).transpose(1, 2)
        q = q * rope_q[0] + rotate_half(q) * rope_q[1]
        k = k * rope_k[0] + rotate_half(k) * rope_k[1]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, q_len, self.nh * self.hd))


class DraftLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.input_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.self_attn = DraftAttention(c)
        self.post_attention_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.mlp = nn.ModuleDict({
            "gate_proj": nn.Linear(h, i, bias=False),
            "up_proj": nn.Linear(h, i, bias=False),
            "down_proj": nn.Linear(i, h, bias=False),
        })

    def forward(self, x, ctx, rope_q, rope_k, mask):
        x = x + self.self_attn(self.input_layernorm(x), ctx, rope_q, rope_k, mask)
        y = self.post_attention_layernorm(x)
        return x + self.mlp["down_proj"](F.silu(self.mlp["gate_proj"](y)) * self.mlp["up_proj"](y))


def drafter_config(target_text, taps, block_size, mask_token_id, n_layers, intermediate):
    h = target_text.hidden_size
    return {
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3",
        "hidden_size": h,
        "intermediate_size": intermediate,
        "num_hidden_layers": n_layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "hidden_act": "silu",
        "attention_bias": False,
        "attention_dropout": 0.0,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000000,
        "rope_scaling": None,
        "max_position_embeddings": target_text.max_position_embeddings,
        "vocab_size": target_text.vocab_size,
        "tie_word_embeddings": False,
        "layer_types": ["full_attention"] * n_layers,
        "use_sliding_window": False,
        "sliding_window": None,
        "block_size": block_size,
        "num_target_layers": target_text.num_hidden_layers,
        "dflash_config": {"mask_token_id": mask_token_id, "target_layer_ids": list(taps), "block_size": block_size},
        "dtype": "bfloat16",
    }


class Drafter(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h = c["hidden_size"]
        taps = c["dflash_config"]["target_layer_ids"]
        self.fc = nn.Linear(len(taps) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, c["rms_norm_eps"])
        self.layers = nn.ModuleList([DraftLayer(c) for _ in range(c["num_hidden_layers"])])
        self.norm = RMSNorm(h, c["rms_norm_eps"])
        hd = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd)), persistent=False)
        init_linears(self, 0.02)

    def rope(self, positions, dtype):
        """(cos, sin) [B,1,T,hd] for integer positions [B,T] (NeoX layout, full head width)."""
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos()[:, None].to(dtype), emb.sin()[:, None].to(dtype)

    def forward(self, block_embeds, block_pos, taps_hidden, ctx_pos, mask):
        """block_embeds [B,Q,H] (target embedding of anchor/MASK rows), block_pos [B,Q], taps_hidden
        [B,C,n_taps·H] (concatenated tapped target hiddens of context tokens), ctx_pos [B,C], mask bool
        [B,1,Q,C+Q]. Returns normed hidden [B,Q,H] (apply the target lm_head to the draft rows)."""
        ctx = self.hidden_norm(self.fc(taps_hidden))
        dtype = block_embeds.dtype
        rope_q = self.rope(block_pos, dtype)
        rope_k = self.rope(torch.cat([ctx_pos, block_pos], dim=1), dtype)
        x = block_embeds
        for layer in self.layers:
            x = layer(x, ctx, rope_q, rope_k, mask)
        return self.norm(x)


def load_drafter(drafter, dflash_dir):
    """Loads a saved drafter's weights into `drafter`, whose config must equal the saved one (so a resumed
    drafter is exactly the shape the arguments describe)."""
    saved = json.loads((dflash_dir / "config.json").read_text())
    if saved != drafter.c:
        diff = sorted(k for k in saved.keys() | drafter.c.keys() if saved.get(k) != drafter.c.get(k))
        raise ValueError(f"{dflash_dir}/config.json differs from the drafter the arguments describe: {diff}")
    drafter.load_state_dict(load_file(str(dflash_dir / "model.safetensors")))


def block_mask(anchors, block_size, ctx_len):
    """Visibility for blocks at `anchors` [B,nb]: block k's rows see context positions < anchor_k and the
    block_size rows of block k. Returns bool [B,1,nb·block_size,ctx_len+nb·block_size]."""
    b, nb = anchors.shape
    dev = anchors.device
    rows_block = torch.arange(nb, device=dev).repeat_interleave(block_size)            # [Q]
    ctx_ok = torch.arange(ctx_len, device=dev)[None, None, :] < anchors[:, rows_block, None]  # [B,Q,C]
    blk_ok = rows_block[:, None] == rows_block[None, :]                                 # [Q,Q]
    mask = torch.cat([ctx_ok, blk_ok[None].expand(b, -1, -1)], dim=2)
    return mask[:, None]


class Taps:
    """Captures the outputs of chosen decoder layers: the residual stream after layer i (for the last layer,
    before the final norm), the z-lab tap (speculative-decoding.md §1.1)."""

    def __init__(self, model, layer_ids):
        self.layer_ids = list(layer_ids)
        self.out = {}
        layers = model.model.language_model.layers
        self.handles = [layers[i].register_forward_hook(self._hook(i)) for i in self.layer_ids]

    def _hook(self, i):
        def fn(_module, _inputs, output):
            self.out[i] = output[0] if isinstance(output, tuple) else output
        return fn

    def concat(self):
        return torch.cat([self.out[i] for i in self.layer_ids], dim=-1)

    def remove(self):
        for h in self.handles:
            h.remove()


def new_target(config):
    model = Qwen3_5ForConditionalGeneration(config)
    mtp = MTP(model.config.text_config)
    return model, mtp


def target_state(model, mtp):
    """The tensors to ship, official names: language model, lm_head and mtp.* (no vision tower)."""
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("model.visual.")}
    state.update({f"mtp.{k}": v for k, v in mtp.state_dict().items()})
    return state


def save_sharded(state, out_dir, stem="model"):
    """bf16 safetensors, one file if it fits SHARD_BYTES, else model-0000i-of-0000n + index.json."""
    tensors = {k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in state.items()}
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * 2
        if current and size + nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[name] = tensors[name]
        size += nbytes
    shards.append(current)
    meta = {"format": "pt"}
    if len(shards) == 1:
        save_file(shards[0], str(out_dir / f"{stem}.safetensors"), metadata=meta)
        return [f"{stem}.safetensors"]
    names = [f"{stem}-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    weight_map = {}
    for name, shard in zip(names, shards):
        save_file(shard, str(out_dir / name), metadata=meta)
        weight_map.update({k: name for k in shard})
    index = {"metadata": {"total_size": sum(t.numel() * 2 for t in tensors.values())}, "weight_map": weight_map}
    (out_dir / f"{stem}.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    return names + [f"{stem}.safetensors.index.json"]


def count(module_or_state):
    if isinstance(module_or_state, dict):
        return sum(v.numel() for v in module_or_state.values())
    return sum(p.numel() for p in module_or_state.parameters())


def cosine_lr(step, total, warmup, peak, floor):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * t))


# ------------------------------------------------------------------------------------------------- DFlash2


def drafter2_config(dcfg, conv_kernel, conv_group, rank, top_k):
    """The DFlash2 config of a drafter with DFlash config `dcfg`'s backbone."""
    c = copy.deepcopy(dcfg)
    c["architectures"] = ["DFlash2DraftModel"]
    c["auto_map"] = {"AutoModel": "dflash.DFlash2DraftModel"}
    c["dflash_config"].update({"conv_kernel_size": conv_kernel, "conv_group_size": conv_group,
                               "selector_rank": rank, "selector_top_k": top_k})
    return c


class GroupedConv(nn.Module):
    """z-lab GroupedDynamicCausalConv on blocks of `block` rows: x [B, nb·block, H], never across blocks."""

    def __init__(self, h, kernel, group):
        super().__init__()
        self.k, self.g = kernel, group
        self.base_kernel = nn.Parameter(torch.zeros(2, kernel, h))
        self.kernel_projection = nn.Linear(h, 2 * kernel * h // group, bias=False)
        with torch.no_grad():  # identity: out_t = x_t
            self.base_kernel[:, 0] = 1.0
            self.kernel_projection.weight.zero_()

    def _conv(self, x, dyn, base, block):
        b, q, h = x.shape
        xs = x.view(b, q // block, block, h // self.g, self.g)
        dyn = dyn.view(b, q // block, block, self.k, h // self.g, 1)
        out = torch.zeros_like(xs)
        for o in range(self.k):
            shifted = xs if o == 0 else F.pad(xs[:, :, :-o], (0, 0, 0, 0, o, 0))
            out = out + (base[o].view(h // self.g, self.g) + dyn[:, :, :, o]) * shifted
        return out.view(b, q, h)

    def prepare(self, x, block):
        dyn = self.kernel_projection(x).view(*x.shape[:-1], 2, self.k * x.shape[-1] // self.g)
        return self._conv(x, dyn[..., 0, :], self.base_kernel[0], block), dyn[..., 1, :]

    def finish(self, y, dyn, block):
        return self._conv(y, dyn, self.base_kernel[1], block)


class Draft2Layer(DraftLayer):
    def __init__(self, c):
        super().__init__(c)
        h, dc = c["hidden_size"], c["dflash_config"]
        self.attention_conv = GroupedConv(h, dc["conv_kernel_size"], dc["conv_group_size"])
        self.mlp_conv = GroupedConv(h, dc["conv_kernel_size"], dc["conv_group_size"])
        self.block = dc["block_size"]

    def forward(self, x, ctx, rope_q, rope_k, mask):
        block = x.shape[1] if x.shape[1] < self.block else self.block
        y, dyn = self.attention_conv.prepare(self.input_layernorm(x), block)
        x = x + self.attention_conv.finish(self.self_attn(y, ctx, rope_q, rope_k, mask), dyn, block)
        y, dyn = self.mlp_conv.prepare(self.post_attention_layernorm(x), block)
        m = self.mlp["down_proj"](F.silu(self.mlp["gate_proj"](y)) * self.mlp["up_proj"](y))
        return x + self.mlp_conv.finish(m, dyn, block)


class Drafter2(Drafter):
    def __init__(self, c):
        super().__init__(c)
        self.layers = nn.ModuleList([Draft2Layer(c) for _ in range(c["num_hidden_layers"])])
        init_linears(self.layers, 0.02)
        for layer in self.layers:  # init_linears re-drew them: identity again
            for conv in (layer.attention_conv, layer.mlp_conv):
                conv.kernel_projection.weight.data.zero_()
        dc, h, v = c["dflash_config"], c["hidden_size"], c["vocab_size"]
        self.top_k = dc["selector_top_k"]
        self.candidate_selector = nn.ModuleDict({
            "hidden_projection": nn.Linear(h, dc["selector_rank"], bias=False),
            "predecessor_codebook": nn.Embedding(v, dc["selector_rank"]),
            "successor_codebook": nn.Embedding(v, dc["selector_rank"]),
        })
        with torch.no_grad():  # a zero selector term to start with, with gradient into the successor codebook
            nn.init.normal_(self.candidate_selector["hidden_projection"].weight, 0.0, 0.02)
            nn.init.normal_(self.candidate_selector["predecessor_codebook"].weight, 0.0, 1.0)
            self.candidate_selector["successor_codebook"].weight.zero_()

    def scores(self, hidden, unary, cand, prev):
        """Selector scores [..., k]: hidden [..., H] (final-normed rows), unary [..., k] their candidates'
        logits, cand [..., k] the candidates, prev [...] the previous token of each row."""
        sel = self.candidate_selector
        ctx = sel["predecessor_codebook"](prev) * sel["hidden_projection"](hidden)
        return unary + torch.einsum("...r,...kr->...k", ctx, sel["successor_codebook"](cand))

    @torch.no_grad()
    def walk(self, hidden, logits, anchor):
        """Greedy selector walk over the drafted rows hidden [Q, H], logits [Q, V], from token `anchor`."""
        unary, cand = torch.topk(logits, self.top_k, dim=-1)
        prev, path = anchor, []
        for j in range(hidden.shape[0]):
            s = self.scores(hidden[j], unary[j], cand[j], prev)
            prev = cand[j, int(torch.argmax(s))]
            path.append(prev)
        return torch.stack(path)

    def checkpoint_state(self):
        """state_dict in the checkpoint's names (codebooks without .weight, as z-lab stores them)."""
        return {k[:-len(".weight")] if k.endswith("_codebook.weight") else k: v for k, v in self.state_dict().items()}


def init_from_dflash(drafter2, dflash_dir):
    """Starts a DFlash2 drafter from a trained DFlash one with the same backbone: its weights, identity
    convolutions, a zero selector term."""
    saved = json.loads((dflash_dir / "config.json").read_text())
    want = {k: v for k, v in drafter2.c.items() if k not in ("architectures", "auto_map", "dflash_config")}
    diff = sorted(k for k in want if saved.get(k) != want[k])
    if diff or any(saved["dflash_config"][k] != drafter2.c["dflash_config"][k] for k in saved["dflash_config"]):
        raise ValueError(f"{dflash_dir}/config.json is not this drafter's backbone: {diff or 'dflash_config'}")
    missing, unexpected = drafter2.load_state_dict(load_file(str(dflash_dir / "model.safetensors")), strict=False)
    assert not unexpected and all("_conv." in k or k.startswith("candidate_selector.") for k in missing), (missing, unexpected)


def load_drafter2(drafter2, dflash2_dir):
    """Loads a saved DFlash2 drafter (its config must equal the one the arguments describe)."""
    saved = json.loads((dflash2_dir / "config.json").read_text())
    if saved != drafter2.c:
        diff = sorted(k for k in saved.keys() | drafter2.c.keys() if saved.get(k) != drafter2.c.get(k))
        raise ValueError(f"{dflash2_dir}/config.json differs from the drafter the arguments describe: {diff}")
    state = load_file(str(dflash2_dir / "model.safetensors"))
    drafter2.load_state_dict({k + ".weight" if k.endswith("_codebook") else k: v for k, v in state.items()})
