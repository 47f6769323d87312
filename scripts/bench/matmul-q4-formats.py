"""Which 4-bit group format for Splash's Q4 (native/core/quant.h): weight and output error of candidate formats,
all with group 32 and f16 scales, on Gaussian and heavier-tailed (Student-t, 3 dof) weights.

    python3 scripts/bench/matmul-q4-formats.py

  q4_sym    w = (q - 8)·d, d = signed max / -8   (llama.cpp Q4_0; 4.5 bits/weight)
  q4_sym7   w = q·d, q in -7..7, d = max|w| / 7  (4.5 bits/weight)
  q4_affine w = q·d + m, d = (max - min) / 15    (Splash Q4, llama.cpp Q4_1; 5 bits/weight)
  q8        w = q·d, d = max|w| / 127            (Splash Q8; 8.5 bits/weight), for scale
Errors are relative RMS: of the weights, and of y = x·Wᵀ for Gaussian x.
"""
import numpy as np


def f16(a):
    return a.astype(np.float16).astype(np.float32)


def groups(w):
    return w.reshape(-1, 32)


def q4_sym(w):
    g = groups(w)
    mx = g[np.arange(len(g)), np.abs(g).argmax(1)]
    d = f16(mx / -8)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.round(g * inv[:, None]) + 8, 0, 15)
    return ((q - 8) * d[:, None]).reshape(w.shape)


def q4_sym7(w):
    g = groups(w)
    d = f16(np.abs(g).max(1) / 7)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    return (np.clip(np.round(g * inv[:, None]), -7, 7) * d[:, None]).reshape(w.shape)


def q4_affine(w):
    g = groups(w)
    lo, hi = g.min(1), g.max(1)
    d, m = f16((hi - lo) / 15), f16(lo)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    q = np.clip(np.round((g - m[:, None]) * inv[:, None]), 0, 15)
    return (q * d[:, None] + m[:, None]).reshape(w.shape)


def q8(w):
    g = groups(w)
    d = f16(np.abs(g).max(1) / 127)
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    return (np.clip(np.round(g * inv[:, None]), -127, 127) * d[:, None]).reshape(w.shape)


def rel(a, b):
    return float(np.sqrt(((a - b) ** 2).mean() / (b**2).mean()))


def main():
    rng = np.random.default_rng(0)
    weights = {
        "gaussian": rng.standard_normal((512, 4096)).astype(np.float32) * 0.02,
        "student-t3": (rng.standard_t(3, (512, 4096)) * 0.02).astype(np.float32),
    }
    x = rng.standard_normal((16, 4096)).astype(np.float32)
    print(f"{'weights':11s} {'format':10s} {'bits/w':>6s} {'weight err':>11s} {'output err':>11s}")
    for name, w in weights.items():
        y = x @ w.T
        for fmt, fn, bits in [("q4_sym", q4_sym, 4.5), ("q4_sym7", q4_sym7, 4.5), ("q4_affine", q4_affine, 5.0), ("q8", q8, 8.5)]:
            wq = fn(w)
            print(f"{name:11s} {fmt:10s} {bits:6.1f} {rel(wq, w):11.4f} {rel(x @ wq.T, y):11.4f}")


if __name__ == "__main__":
    main()
