#version 460
// elementwise.comp — the one-element-per-invocation ops (define OP):
//   ADD                 y[i] += x[i]
//   SILU_MUL            y[i] = silu(g[i]) · x[i]                  (SwiGLU; x is the up projection)
//   SIGMOID_MUL         y[i] *= sigmoid(g[i])                     (gated attention output)
//   COPY2D              y[r·ys + c] = x[r·xs + c], c < d           (strided row copy: split q/gate, gather rows)
//   EMBED               y[r·d + c] = W[tokens[r]][c]               (embedding rows to f32; WT = table type)
// i < n; the grid is 2-D when n needs more than 65535 workgroups. Spec constant 0: workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 0) in;

#define ADD 0
#define SILU_MUL 1
#define SIGMOID_MUL 2
#define COPY2D 3
#define EMBED 4

layout(push_constant) uniform P {
    uint64_t y, x, g;  // EMBED: x = table row 0, g = tokens
    uint n;            // elements (COPY2D, EMBED: rows · d)
    uint d;            // row length
    uint x_stride, y_stride;  // COPY2D: floats between rows; EMBED: x_stride = table row bytes
} p;

void main() {
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= p.n) return;
    Floats y = Floats(p.y), x = Floats(p.x), g = Floats(p.g);
#if OP == ADD
    y.v[i] += x.v[i];
#elif OP == SILU_MUL
    y.v[i] = silu(g.v[i]) * x.v[i];
#elif OP == SIGMOID_MUL
    y.v[i] = y.v[i] * sigmoid(g.v[i]);
#elif OP == COPY2D
    uint r = i / p.d, c = i % p.d;
    y.v[r * p.y_stride + c] = x.v[r * p.x_stride + c];
#elif OP == EMBED
    uint r = i / p.d, c = i % p.d;
    uint token = uint(Ints(p.g).v[r]);
    y.v[i] = weight_at(WT, p.x + uint64_t(token) * p.x_stride, c, p.d);
#endif
}
