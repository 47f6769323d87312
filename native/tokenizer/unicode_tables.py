#!/usr/bin/env python3
"""Generates unicode_tables.c: the general category and White_Space flag of every code point, and the simple case
folding, which the pre-tokenizer regex (regex.c) needs for \\p{L}, \\s, (?i:...) and friends.

    python3 native/tokenizer/unicode_tables.py > native/tokenizer/unicode_tables.c

Hugging Face tokenizers matches pre-tokenizer regexes with Oniguruma 6.9.8 (Unicode 14.0); this script records the
Unicode version of the Python that ran it, and the tests compare ids against tokenizers' own output.
"""
import sys
import unicodedata

# General categories, in the order of the SP_GC_* enum in unicode.h.
CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi",
              "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
# PropList.txt White_Space (stable since Unicode 6.3); unicodedata does not expose it.
WHITE_SPACE = [*range(0x09, 0x0E), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F,
               0x3000]
WS_BIT = 0x20


def main() -> None:
    values = []
    ws = set(WHITE_SPACE)
    for cp in range(0x110000):
        v = CATEGORIES.index(unicodedata.category(chr(cp)))
        if cp in ws:
            v |= WS_BIT
        values.append(v)
    blocks: dict[tuple[int, ...], int] = {}
    stage1 = []
    for b in range(0x110000 // 256):
        block = tuple(values[b * 256:(b + 1) * 256])
        stage1.append(blocks.setdefault(block, len(blocks)))
    # Simple case folding of single code points (what Oniguruma uses for a one-character literal under (?i)).
    folds = []
    for cp in range(0x110000):
        f = chr(cp).casefold()
        if len(f) == 1 and ord(f) != cp:
            folds.append((cp, ord(f)))

    out = sys.stdout
    out.write(f"/* Generated from Unicode {unicodedata.unidata_version}: do not edit. Regenerate with\n"
              " *   python3 native/tokenizer/unicode_tables.py > native/tokenizer/unicode_tables.c */\n")
    out.write('#include "tokenizer/unicode.h"\n\n')
    out.write(f"const char *const sp_unicode_version = \"{unicodedata.unidata_version}\";\n\n")
    out.write(f"static const uint{16 if len(blocks) > 255 else 8}_t stage1[{len(stage1)}] = {{\n")
    for i in range(0, len(stage1), 32):
        out.write("    " + ",".join(str(x) for x in stage1[i:i + 32]) + ",\n")
    out.write("};\n\n")
    out.write(f"static const uint8_t stage2[{len(blocks)}][256] = {{\n")
    for block in blocks:
        out.write("    {" + ",".join(str(x) for x in block) + "},\n")
    out.write("};\n\n")
    out.write("uint8_t sp_unicode_props(uint32_t cp) {\n")
    out.write("    return cp < 0x110000 ? stage2[stage1[cp >> 8]][cp & 255] : SP_GC_CN;\n}\n\n")
    out.write(f"static const uint32_t fold_from[{len(folds)}] = {{\n")
    for i in range(0, len(folds), 16):
        out.write("    " + ",".join(hex(a) for a, _ in folds[i:i + 16]) + ",\n")
    out.write("};\n")
    out.write(f"static const uint32_t fold_to[{len(folds)}] = {{\n")
    for i in range(0, len(folds), 16):
        out.write("    " + ",".join(hex(b) for _, b in folds[i:i + 16]) + ",\n")
    out.write("};\n\n")
    out.write("uint32_t sp_unicode_fold(uint32_t cp) {\n")
    out.write(f"    int lo = 0, hi = {len(folds)} - 1;\n")
    out.write("    while (lo <= hi) {\n        int mid = (lo + hi) / 2;\n")
    out.write("        if (fold_from[mid] == cp) return fold_to[mid];\n")
    out.write("        if (fold_from[mid] < cp) lo = mid + 1; else hi = mid - 1;\n    }\n    return cp;\n}\n")


if __name__ == "__main__":
    main()
