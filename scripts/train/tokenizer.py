"""Byte-level BPE tokenizer in the Qwen3.5 layout: NFC normalizer, the Qwen3.5 pre-tokenizer regex
(with \\p{M}), byte-level alphabet, the family's added tokens by name appended after the learned
vocabulary (in the family's order), plus `<|MASK|>` for the DFlash drafter."""

import json
import re

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|"
    r"\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (token, special) in the Qwen3.5 order (ids 248044..248069 there), then the drafter's mask token.
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True), ("<|vision_end|>", True),
    ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", True), ("<|fim_middle|>", True), ("<|fim_suffix|>", True), ("<|fim_pad|>", True),
    ("<|repo_name|>", True), ("<|file_sep|>", True),
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False),
    ("<|MASK|>", True),
]
ADDED_RE = re.compile("|".join(re.escape(t) for t, _ in ADDED_TOKENS))


def train_tokenizer(texts, bpe_vocab_size):
    """texts: an iterable of strings. Added tokens are cut out of the training text (they are matched
    whole at encode time), so no merges are spent on them."""
    tok = Tokenizer(models.BPE(dropout=None, unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=bpe_vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator((ADDED_RE.sub("\n", t) for t in texts), trainer=trainer)
    for token, special in ADDED_TOKENS:
        tok.add_tokens([AddedToken(token, special=special, normalized=False, single_word=False, lstrip=False, rstrip=False)])
    return tok


def token_ids(tok):
    return {t: tok.token_to_id(t) for t, _ in ADDED_TOKENS}


def save_tokenizer(tok, out_dir, model_max_length):
    tok.save(str(out_dir / "tokenizer.json"))
    ids = token_ids(tok)
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(ids[t]): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                          "special": special}
            for t, special in ADDED_TOKENS
        },
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "mask_token": "<|MASK|>",
        "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen3_5Tokenizer",
        "unk_token": None,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
