"""Oracles of `Tyr/Conv.lean`'s ops, written out with slicing and sums (no `F.conv2d`, no
`F.group_norm`): what `tests/test_exec.py` compares the lowerings with, forward and
backward, and `tests/test_conv_ops.py` over random sizes."""
from __future__ import annotations

import torch


def conv_nd(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, stride: int, padding: int,
            dilation: int, groups: int = 1) -> torch.Tensor:
    """A convolution over the last 1 or 2 axes, as a sum over the kernel's offsets of the
    strided slices of the zero-padded input, each through the weight's `[o, i]` slice."""
    axes = x.dim() - 2
    for ax in range(axes):  # zeros before and after, on every spatial axis
        z = torch.zeros(*x.shape[:2 + ax], padding, *x.shape[3 + ax:], dtype=x.dtype)
        x = torch.cat([z, x, z], dim=2 + ax)
    kernel = w.shape[2:]
    size = [(x.shape[2 + ax] - dilation * (kernel[ax] - 1) - 1) // stride + 1
            for ax in range(axes)]
    cin, cout = w.shape[1], w.shape[0] // groups
    parts = []
    for g in range(groups):
        xg, wg = x[:, g * cin:(g + 1) * cin], w[g * cout:(g + 1) * cout]
        out = torch.zeros(x.shape[0], cout, *size, dtype=x.dtype)
        for offset in torch.cartesian_prod(*[torch.arange(k) for k in kernel]).reshape(
                -1, axes).tolist():
            index = [slice(None), slice(None)] + [
                slice(o * dilation, o * dilation + stride * (n - 1) + 1, stride)
                for o, n in zip(offset, size)]
            patch = xg[tuple(index)]
            tap = wg[(slice(None), slice(None), *offset)]
            out = out + torch.einsum("bi...,oi->bo...", patch, tap)
        parts.append(out)
    out = torch.cat(parts, dim=1)
    return out + bias.reshape(1, -1, *[1] * axes)


def down(x, w, b):
    # a row and a column of zeros after the input, then 3 × 3 at stride 2
    x = torch.cat([x, torch.zeros(*x.shape[:2], 1, x.shape[3])], dim=2)
    x = torch.cat([x, torch.zeros(*x.shape[:3], 1)], dim=3)
    return conv_nd(x, w, b, 2, 0, 1)


def group_norm(x, weight, bias, groups, eps):
    b, c = x.shape[:2]
    g = x.reshape(b, groups, -1)
    mean = g.mean(-1, keepdim=True)
    var = ((g - mean) ** 2).mean(-1, keepdim=True)
    y = ((g - mean) / torch.sqrt(var + eps)).reshape(x.shape)
    return y * weight[:, None, None] + bias[:, None, None]


def unshuffle(x, r):
    b, c, h, w = x.shape
    return (x.reshape(b, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
            .reshape(b, c * r * r, h // r, w // r))


def shuffle(x, r):
    b, c, h, w = x.shape
    return (x.reshape(b, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
            .reshape(b, c // (r * r), h * r, w * r))


def image_attention(q, k, v):
    # every position's softmax over all positions of q·k / √c, then the values' mix
    b, c = q.shape[:2]
    qs, ks, vs = (t.reshape(b, c, -1) for t in (q, k, v))  # [b, c, n]
    scores = torch.einsum("bci,bcj->bij", qs, ks) / c ** 0.5
    return torch.einsum("bij,bcj->bci", torch.softmax(scores, -1), vs).reshape(q.shape)


CONV_ORACLES = {
    # 8 × 7 through 3 × 2 at stride 2, padding 1, dilation 2
    "conv2d": ([([2, 3, 8, 7], "f32"), ([4, 3, 3, 2], "f32"), ([4], "f32")],
               {"stride": 2, "padding": 1, "dilation": 2}, [2, 4, 3, 4],
               lambda x, w, b: conv_nd(x, w, b, 2, 1, 2)),
    "conv2d_groups": ([([2, 6, 5, 5], "f32"), ([4, 3, 3, 3], "f32"), ([4], "f32")],
                      {"stride": 1, "padding": 1, "dilation": 1, "groups": 2}, [2, 4, 5, 5],
                      lambda x, w, b: conv_nd(x, w, b, 1, 1, 1, 2)),
    "conv2d_same": ([([2, 3, 5, 4], "f32"), ([4, 3, 3, 3], "f32"), ([4], "f32")], {"pad": 1},
                    [2, 4, 5, 4], lambda x, w, b: conv_nd(x, w, b, 1, 1, 1)),
    "conv2d_down": ([([2, 3, 6, 4], "f32"), ([4, 3, 3, 3], "f32"), ([4], "f32")], {},
                    [2, 4, 3, 2], down),
    "conv1d": ([([2, 3, 9], "f32"), ([4, 3, 3], "f32"), ([4], "f32")],
               {"stride": 2, "padding": 1, "dilation": 1}, [2, 4, 5],
               lambda x, w, b: conv_nd(x, w, b, 2, 1, 1)),
    "group_norm": ([([2, 6, 3, 2], "f32"), ([6], "f32"), ([6], "f32")],
                   {"groups": 3, "eps": 1e-6}, [2, 6, 3, 2],
                   lambda x, w, b: group_norm(x, w, b, 3, 1e-6)),
    # the variances drawn positive (POSITIVE in tests/test_exec.py)
    "batch_norm_eval": ([([2, 3, 2, 2], "f32"), ([3], "f32"), ([3], "f32")], {"eps": 1e-4},
                        [2, 3, 2, 2], lambda x, m, v: (x - m[:, None, None])
                        / torch.sqrt(v[:, None, None] + 1e-4)),
    "batch_norm_inverse": ([([2, 3, 2, 2], "f32"), ([3], "f32"), ([3], "f32")], {"eps": 1e-4},
                           [2, 3, 2, 2], lambda x, m, v: x * torch.sqrt(v[:, None, None] + 1e-4)
                           + m[:, None, None]),
    "upsample_nearest": ([([2, 3, 2, 3], "f32")], {"s": 2}, [2, 3, 4, 6],
                         lambda x: x.repeat_interleave(2, 2).repeat_interleave(2, 3)),
    "pixel_unshuffle": ([([2, 3, 4, 6], "f32")], {"r": 2}, [2, 12, 2, 3],
                        lambda x: unshuffle(x, 2)),
    "pixel_shuffle": ([([2, 12, 2, 3], "f32")], {"r": 2}, [2, 3, 4, 6], lambda x: shuffle(x, 2)),
    "linear_channels": ([([2, 3, 2, 4], "f32"), ([5, 3], "f32"), ([5], "f32")], {},
                        [2, 5, 2, 4], lambda x, w, b: torch.einsum("bihw,oi->bohw", x, w)
                        + b[:, None, None]),
    "image_attention": ([([2, 3, 2, 2], "f32")] * 3, {}, [2, 3, 2, 2], image_attention),
}
# implicit arguments the validator cannot invert from closed shapes (`2 * h`, `c * (r * r)`)
CONV_IMPLICIT = {"conv2d_down": {"b": 2, "i": 3, "o": 4, "h": 3, "w": 2},
                 "pixel_unshuffle": {"b": 2, "c": 3, "h": 2, "w": 3},
                 "pixel_shuffle": {"b": 2, "c": 3, "h": 2, "w": 3}}
# float inputs that must be positive (a variance)
CONV_POSITIVE = {"batch_norm_eval": (2,), "batch_norm_inverse": (2,)}
