import Tyr.Core

/-!
# Tyr.Conv — convolutions and the ops of image models, channels first

Images are `T #[b, c, h, w]` (PyTorch's layout: batch, channels, height, width), sequences
for a 1-D convolution `T #[b, c, n]`. A convolution's weight is `T #[o, i, kh, kw]` (output
channels, input channels, the kernel), so channels-last input (`T #[b, h, w, c]`) or a
transposed weight is a type error at the argument.

The general ops compute the output length in the type, PyTorch's
`(n + 2 * padding - dilation * (k - 1) - 1) / stride + 1` per axis: a wrong padding, stride
or kernel is a mismatch with the declared result. Lean reduces that term on numbers only
(`Nat.div` and `Nat.sub` do not unfold over a variable), so a helper whose sizes are
variables uses the ops typed by their shape instead: `conv2dSame` (stride 1, the kernel
`2 * pad + 1` padded by `pad`: the size kept), `conv2dDown` (halving, written as an input of
`2 * h`), `upsampleNearest` (`s * h`), `pixelUnshuffle` and `pixelShuffle` (`r * h`,
`c * (r * r)`). As elsewhere in Tyr a product must be written as one (`2 * c.half`):
unification does not split a number into factors.

Grouped convolution (`conv2dGroups`) and group norm state what the types cannot as
hypotheses, decided on the values: the group count divides the channels.
-/

namespace torch

/-- 2-D convolution (`F.conv2d`, one group): `weight : T #[o, i, kh, kw]`, `bias : T #[o]`,
the same `stride`, `padding` (zeros, every side) and `dilation` on both axes; the kernel must
fit the padded input (`hkh`, `hkw`). -/
def conv2d {b i o h w kh kw : Nat} (x : T #[b, i, h, w]) (weight : T #[o, i, kh, kw])
    (bias : T #[o]) (stride padding dilation : Nat) (hs : 0 < stride := by decide)
    (hkh : dilation * (kh - 1) + 1 ≤ h + 2 * padding := by decide)
    (hkw : dilation * (kw - 1) + 1 ≤ w + 2 * padding := by decide) :
    T #[b, o, (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1,
      (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1] :=
  prim "conv2d" [x.node, weight.node, bias.node]
    [.nat "stride" stride, .nat "padding" padding, .nat "dilation" dilation]

/-- `conv2d` in `groups` groups: input channel `j` feeds the outputs of group
`j / (c / groups)`, each through `i` input channels (`weight : T #[o, i, kh, kw]`), so the
input has `groups * i` channels (`hc`) and the groups divide the outputs (`ho`). -/
def conv2dGroups {b c i o h w kh kw : Nat} (x : T #[b, c, h, w]) (weight : T #[o, i, kh, kw])
    (bias : T #[o]) (stride padding dilation groups : Nat) (hs : 0 < stride := by decide)
    (hc : c = groups * i := by decide) (ho : o % groups = 0 := by decide)
    (hkh : dilation * (kh - 1) + 1 ≤ h + 2 * padding := by decide)
    (hkw : dilation * (kw - 1) + 1 ≤ w + 2 * padding := by decide) :
    T #[b, o, (h + 2 * padding - dilation * (kh - 1) - 1) / stride + 1,
      (w + 2 * padding - dilation * (kw - 1) - 1) / stride + 1] :=
  prim "conv2d_groups" [x.node, weight.node, bias.node]
    [.nat "stride" stride, .nat "padding" padding, .nat "dilation" dilation,
      .nat "groups" groups]

/-- A size-keeping 2-D convolution: stride 1, the square kernel `2 * pad + 1` padded by `pad`
on every side (`pad = 1`: 3 × 3, `pad = 0`: 1 × 1), so the output is `h × w` for any `h`,
`w`. -/
def conv2dSame {b i o h w : Nat} (x : T #[b, i, h, w]) (pad : Nat)
    (weight : T #[o, i, 2 * pad + 1, 2 * pad + 1]) (bias : T #[o]) : T #[b, o, h, w] :=
  prim "conv2d_same" [x.node, weight.node, bias.node] [.nat "pad" pad]

/-- The halving convolution of diffusers' `Downsample2D`: one row and one column of zeros
after the input (bottom, right), then a 3 × 3 kernel at stride 2, so `2 * h × 2 * w` becomes
`h × w`. -/
def conv2dDown {b i o h w : Nat} (x : T #[b, i, 2 * h, 2 * w]) (weight : T #[o, i, 3, 3])
    (bias : T #[o]) : T #[b, o, h, w] :=
  prim "conv2d_down" [x.node, weight.node, bias.node]

/-- 1-D convolution (`F.conv1d`, one group): `x : T #[b, i, n]`, `weight : T #[o, i, k]`. -/
def conv1d {b i o n k : Nat} (x : T #[b, i, n]) (weight : T #[o, i, k]) (bias : T #[o])
    (stride padding dilation : Nat) (hs : 0 < stride := by decide)
    (hk : dilation * (k - 1) + 1 ≤ n + 2 * padding := by decide) :
    T #[b, o, (n + 2 * padding - dilation * (k - 1) - 1) / stride + 1] :=
  prim "conv1d" [x.node, weight.node, bias.node]
    [.nat "stride" stride, .nat "padding" padding, .nat "dilation" dilation]

/-- Group norm (`F.group_norm`): the channels in `groups` groups (`hg`: they divide the
channels), each normalised over its channels and every position, then the per-channel gain
`weight` and `bias`. -/
def groupNorm {b c h w : Nat} (x : T #[b, c, h, w]) (weight bias : T #[c]) (groups : Nat)
    (hg0 : 0 < groups := by decide) (hg : c % groups = 0 := by decide) (eps : Float := 1e-6) :
    T #[b, c, h, w] :=
  prim "group_norm" [x.node, weight.node, bias.node] [.nat "groups" groups, .float "eps" eps]

/-- Batch norm at inference (`F.batch_norm`, `training=False`, no affine): every channel
`(x - mean) / √(var + eps)` with the running statistics `mean`, `var`. -/
def batchNormEval {b c h w : Nat} (x : T #[b, c, h, w]) (mean var : T #[c])
    (eps : Float := 1e-5) : T #[b, c, h, w] :=
  prim "batch_norm_eval" [x.node, mean.node, var.node] [.float "eps" eps]

/-- The inverse of `batchNormEval`: `x √(var + eps) + mean`. -/
def batchNormInverse {b c h w : Nat} (x : T #[b, c, h, w]) (mean var : T #[c])
    (eps : Float := 1e-5) : T #[b, c, h, w] :=
  prim "batch_norm_inverse" [x.node, mean.node, var.node] [.float "eps" eps]

/-- Nearest-neighbour upsampling by the integer factor `s` on both axes. -/
def upsampleNearest {b c h w : Nat} (x : T #[b, c, h, w]) (s : Nat) (hs : 0 < s := by decide) :
    T #[b, c, s * h, s * w] :=
  prim "upsample_nearest" [x.node] [.nat "s" s]

/-- Space to depth (`F.pixel_unshuffle`): every `r × r` patch becomes `r * r` channels, the
channel `c' · r² + i · r + j` holding the patch's pixel `(i, j)`. -/
def pixelUnshuffle {b c h w : Nat} (r : Nat) (x : T #[b, c, r * h, r * w])
    (hr : 0 < r := by decide) :
    T #[b, c * (r * r), h, w] :=
  prim "pixel_unshuffle" [x.node] [.nat "r" r]

/-- Depth to space (`F.pixel_shuffle`), the inverse of `pixelUnshuffle`. -/
def pixelShuffle {b c h w : Nat} (r : Nat) (x : T #[b, c * (r * r), h, w])
    (hr : 0 < r := by decide) :
    T #[b, c, r * h, r * w] :=
  prim "pixel_shuffle" [x.node] [.nat "r" r]

/-- A linear map of the channels at every position (`weight : T #[o, i]`, a `Linear`'s, not a
1 × 1 kernel's `T #[o, i, 1, 1]`): `y[b, :, y, x] = weight · x[b, :, y, x] + bias`. -/
def linearChannels {b i o h w : Nat} (x : T #[b, i, h, w]) (weight : T #[o, i]) (bias : T #[o]) :
    T #[b, o, h, w] :=
  prim "linear_channels" [x.node, weight.node, bias.node]

/-- Attention over the `h * w` positions of an image, one head of all `c` channels
(`softmax(q kᵀ / √c) v`, every position seeing every other): a VAE's mid-block attention. -/
def imageAttention {b c h w : Nat} (q k v : T #[b, c, h, w]) : T #[b, c, h, w] :=
  prim "image_attention" [q.node, k.node, v.node]

end torch
