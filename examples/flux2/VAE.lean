import Tyr

/-!
# The FLUX.2 autoencoder — diffusers' `AutoencoderKLFlux2`, by its checkpoint's keys

The VAE of FLUX.2 [klein] and [dev]: an encoder from an image of `in_ch` channels to the
moments (mean and log-variance) of `latent` channels at an eighth of its size, and a decoder
back. Both are diffusers' `Encoder`/`Decoder` of four levels of `block_out_channels`
`(ch0, ch1, ch2, ch2)` (FLUX.2's `(128, 256, 512, 512)`: the last two are one width), two
ResNet blocks a level going down and three going up (`layers_per_block = 2`), group norms of
`groups` groups (`norm_num_groups`, dividing every width: hypotheses decided on the values)
and a mid block of two ResNet blocks around a one-head attention over the positions. A ResNet
block that changes the width has a 1 × 1 `conv_shortcut`; going down, a level halves the size
with `Downsample2D`'s padded stride-2 convolution (`conv2dDown`), going up it doubles it by
nearest upsampling and a 3 × 3 convolution.

FLUX.2's latents are the VAE's 2 × 2 pixel-unshuffled (`patched = latent * (2 * 2)`
channels), normalised by the frozen batch norm `bn` (its running mean and variance,
`batch_norm_eps`). `flux2Decode` undoes both and decodes: what `Flux2KleinPipeline` does
with the transformer's last latents. Image sizes are written as products (`2 * (2 * (2 *
h))`), so a latent grid of any size checks and a size that does not halve is a type error.
Parameter paths are the keys of `AutoencoderKLFlux2.state_dict()`
(`decoder.up_blocks.2.resnets.0.conv_shortcut.weight`); the buffer
`bn.num_batches_tracked` is no parameter. Initialisation: normal(0, 0.02) kernels, zero
biases, unit norm gains; `config.json` beside this file holds a small model's sizes.
-/

open torch

/-- Sizes of an `AutoencoderKLFlux2` (its diffusers config, the levels' widths by name). -/
structure VAEConfig where
  /-- Image channels in (`in_channels`). -/
  in_ch : Nat
  /-- Image channels out (`out_channels`). -/
  out_ch : Nat
  /-- The first level's width (`block_out_channels[0]`). -/
  ch0 : Nat
  /-- The second level's (`block_out_channels[1]`). -/
  ch1 : Nat
  /-- The third and fourth levels' (`block_out_channels[2]`, `[3]`). -/
  ch2 : Nat
  /-- Latent channels (`latent_channels`). -/
  latent : Nat
  /-- Groups of every group norm (`norm_num_groups`). -/
  groups : Nat
  /-- The latents' batch norm's epsilon (`batch_norm_eps`). -/
  bn_eps : Float

/-- FLUX.2's latent channels: the VAE's, 2 × 2 pixel-unshuffled. -/
def VAEConfig.patched (c : VAEConfig) : Nat := c.latent * (2 * 2)

/-- `nn.Conv2d(i, o, 3, padding=1)`. -/
structure Conv3 (o i : Nat) where
  weight : T #[o, i, 3, 3] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- `nn.Conv2d(i, o, 1)`. -/
structure Conv1 (o i : Nat) where
  weight : T #[o, i, 1, 1] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- `nn.Linear(i, o)`. -/
structure Linear (o i : Nat) where
  weight : T #[o, i] := normal 0.02
  bias : T #[o] := zeros
  deriving TensorStruct

/-- `nn.GroupNorm(groups, ch)`. -/
structure Norm (ch : Nat) where
  weight : T #[ch] := ones
  bias : T #[ch] := zeros
  deriving TensorStruct

/-- `ResnetBlock2D(ch, ch)`. -/
structure Resnet (ch : Nat) where
  norm1 : Norm ch
  conv1 : Conv3 ch ch
  norm2 : Norm ch
  conv2 : Conv3 ch ch
  deriving TensorStruct

/-- `ResnetBlock2D(i, o)` with `i ≠ o`: a 1 × 1 shortcut. -/
structure ResnetWiden (o i : Nat) where
  norm1 : Norm i
  conv1 : Conv3 o i
  norm2 : Norm o
  conv2 : Conv3 o o
  conv_shortcut : Conv1 o i
  deriving TensorStruct

/-- `to_out`: `to_out.0`, the output projection. -/
structure AttnOut (ch : Nat) where
  «0» : Linear ch ch
  deriving TensorStruct

/-- The mid block's `Attention`: a group norm, the query, key, value and output projections. -/
structure Attention (ch : Nat) where
  group_norm : Norm ch
  to_q : Linear ch ch
  to_k : Linear ch ch
  to_v : Linear ch ch
  to_out : AttnOut ch
  deriving TensorStruct

/-- `attentions`: one. -/
structure MidAttentions (ch : Nat) where
  «0» : Attention ch
  deriving TensorStruct

/-- Two ResNet blocks of one width. -/
structure Two (ch : Nat) where
  «0» : Resnet ch
  «1» : Resnet ch
  deriving TensorStruct

/-- Two ResNet blocks, the first widening. -/
structure TwoWiden (o i : Nat) where
  «0» : ResnetWiden o i
  «1» : Resnet o
  deriving TensorStruct

/-- Three ResNet blocks of one width. -/
structure Three (ch : Nat) where
  «0» : Resnet ch
  «1» : Resnet ch
  «2» : Resnet ch
  deriving TensorStruct

/-- Three ResNet blocks, the first changing the width. -/
structure ThreeWiden (o i : Nat) where
  «0» : ResnetWiden o i
  «1» : Resnet o
  «2» : Resnet o
  deriving TensorStruct

/-- `UNetMidBlock2D`: a ResNet block, the attention, a ResNet block. -/
structure Mid (ch : Nat) where
  attentions : MidAttentions ch
  resnets : Two ch
  deriving TensorStruct

/-- `Downsample2D`'s or `Upsample2D`'s convolution. -/
structure Resample (ch : Nat) where
  conv : Conv3 ch ch
  deriving TensorStruct

/-- `downsamplers` / `upsamplers`: one. -/
structure Resamplers (ch : Nat) where
  «0» : Resample ch
  deriving TensorStruct

/-- A `DownEncoderBlock2D` that keeps its width and halves the size. -/
structure DownKeep (ch : Nat) where
  resnets : Two ch
  downsamplers : Resamplers ch
  deriving TensorStruct

/-- A `DownEncoderBlock2D` that widens and halves the size. -/
structure DownWiden (o i : Nat) where
  resnets : TwoWiden o i
  downsamplers : Resamplers o
  deriving TensorStruct

/-- The last `DownEncoderBlock2D`: no downsampler. -/
structure DownLast (ch : Nat) where
  resnets : Two ch
  deriving TensorStruct

/-- The encoder's four levels. -/
structure DownBlocks (c : VAEConfig) where
  «0» : DownKeep c.ch0
  «1» : DownWiden c.ch1 c.ch0
  «2» : DownWiden c.ch2 c.ch1
  «3» : DownLast c.ch2
  deriving TensorStruct

/-- diffusers' `Encoder` (`double_z`: mean and log-variance). -/
structure Encoder (c : VAEConfig) where
  conv_in : Conv3 c.ch0 c.in_ch
  down_blocks : DownBlocks c
  mid_block : Mid c.ch2
  conv_norm_out : Norm c.ch2
  conv_out : Conv3 (2 * c.latent) c.ch2
  deriving TensorStruct

/-- An `UpDecoderBlock2D` that keeps its width and doubles the size. -/
structure UpKeep (ch : Nat) where
  resnets : Three ch
  upsamplers : Resamplers ch
  deriving TensorStruct

/-- An `UpDecoderBlock2D` that narrows and doubles the size. -/
structure UpNarrow (o i : Nat) where
  resnets : ThreeWiden o i
  upsamplers : Resamplers o
  deriving TensorStruct

/-- The last `UpDecoderBlock2D`: narrows, no upsampler. -/
structure UpLast (o i : Nat) where
  resnets : ThreeWiden o i
  deriving TensorStruct

/-- The decoder's four levels, widest first. -/
structure UpBlocks (c : VAEConfig) where
  «0» : UpKeep c.ch2
  «1» : UpKeep c.ch2
  «2» : UpNarrow c.ch1 c.ch2
  «3» : UpLast c.ch0 c.ch1
  deriving TensorStruct

/-- diffusers' `Decoder`. -/
structure Decoder (c : VAEConfig) where
  conv_in : Conv3 c.ch2 c.latent
  mid_block : Mid c.ch2
  up_blocks : UpBlocks c
  conv_norm_out : Norm c.ch0
  conv_out : Conv3 c.out_ch c.ch0
  deriving TensorStruct

/-- The latents' frozen `BatchNorm2d` (no affine): its running statistics. -/
structure LatentNorm (ch : Nat) where
  running_mean : T #[ch] := zeros
  running_var : T #[ch] := ones
  deriving TensorStruct

/-- `AutoencoderKLFlux2`. -/
structure VAEParams (c : VAEConfig) where
  encoder : Encoder c
  decoder : Decoder c
  quant_conv : Conv1 (2 * c.latent) (2 * c.latent)
  post_quant_conv : Conv1 c.latent c.latent
  bn : LatentNorm c.patched
  deriving TensorStruct

/-- The groups of the config divide these channels (`hc`), and there are some (`hg`). -/
def norm (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (n : Norm ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  groupNorm x n.weight n.bias c.groups hg hc 1e-6

/-- A 3 × 3 convolution that keeps the size. -/
def conv3 {b i o h w : Nat} (k : Conv3 o i) (x : T #[b, i, h, w]) : T #[b, o, h, w] :=
  conv2dSame x 1 k.weight k.bias

/-- A 1 × 1 convolution. -/
def conv1 {b i o h w : Nat} (k : Conv1 o i) (x : T #[b, i, h, w]) : T #[b, o, h, w] :=
  conv2dSame x 0 k.weight k.bias

/-- `x + conv2 (silu (norm2 (conv1 (silu (norm1 x)))))`. -/
def resnet (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (p : Resnet ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  let y := conv3 p.conv1 (silu (norm c hg hc p.norm1 x))
  add x (conv3 p.conv2 (silu (norm c hg hc p.norm2 y)))

/-- A ResNet block from `i` to `o` channels, its residual through the shortcut. -/
def resnetWiden (c : VAEConfig) {b i o h w : Nat} (hg : 0 < c.groups)
    (hi : i % c.groups = 0) (ho : o % c.groups = 0) (p : ResnetWiden o i)
    (x : T #[b, i, h, w]) : T #[b, o, h, w] :=
  let y := conv3 p.conv1 (silu (norm c hg hi p.norm1 x))
  add (conv1 p.conv_shortcut x) (conv3 p.conv2 (silu (norm c hg ho p.norm2 y)))

/-- The mid block's attention around its residual. -/
def attention (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (p : Attention ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  let n := norm c hg hc p.group_norm x
  let y := imageAttention (linearChannels n p.to_q.weight p.to_q.bias)
    (linearChannels n p.to_k.weight p.to_k.bias) (linearChannels n p.to_v.weight p.to_v.bias)
  add (linearChannels y p.to_out.«0».weight p.to_out.«0».bias) x

/-- `UNetMidBlock2D`. -/
def mid (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (p : Mid ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  resnet c hg hc p.resnets.«1» (attention c hg hc p.attentions.«0»
    (resnet c hg hc p.resnets.«0» x))

/-- Two ResNet blocks of one width. -/
def two (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (p : Two ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  resnet c hg hc p.«1» (resnet c hg hc p.«0» x)

/-- Two ResNet blocks, the first widening. -/
def twoWiden (c : VAEConfig) {b i o h w : Nat} (hg : 0 < c.groups) (hi : i % c.groups = 0)
    (ho : o % c.groups = 0) (p : TwoWiden o i) (x : T #[b, i, h, w]) : T #[b, o, h, w] :=
  resnet c hg ho p.«1» (resnetWiden c hg hi ho p.«0» x)

/-- Three ResNet blocks of one width. -/
def three (c : VAEConfig) {b ch h w : Nat} (hg : 0 < c.groups) (hc : ch % c.groups = 0)
    (p : Three ch) (x : T #[b, ch, h, w]) : T #[b, ch, h, w] :=
  resnet c hg hc p.«2» (resnet c hg hc p.«1» (resnet c hg hc p.«0» x))

/-- Three ResNet blocks, the first changing the width. -/
def threeWiden (c : VAEConfig) {b i o h w : Nat} (hg : 0 < c.groups) (hi : i % c.groups = 0)
    (ho : o % c.groups = 0) (p : ThreeWiden o i) (x : T #[b, i, h, w]) : T #[b, o, h, w] :=
  resnet c hg ho p.«2» (resnet c hg ho p.«1» (resnetWiden c hg hi ho p.«0» x))

/-- `Downsample2D`: halved. -/
def down {b ch h w : Nat} (p : Resamplers ch) (x : T #[b, ch, 2 * h, 2 * w]) :
    T #[b, ch, h, w] :=
  conv2dDown x p.«0».conv.weight p.«0».conv.bias

/-- `Upsample2D`: doubled, nearest, then a 3 × 3 convolution. -/
def up {b ch h w : Nat} (p : Resamplers ch) (x : T #[b, ch, h, w]) :
    T #[b, ch, 2 * h, 2 * w] :=
  conv3 p.«0».conv (upsampleNearest x 2)

/-- The encoder: an image of `8 h × 8 w` to the moments of its latents, `h × w`. -/
def encode (c : VAEConfig) {b h w : Nat} (hg : 0 < c.groups) (h0 : c.ch0 % c.groups = 0)
    (h1 : c.ch1 % c.groups = 0) (h2 : c.ch2 % c.groups = 0) (p : Encoder c)
    (x : T #[b, c.in_ch, 2 * (2 * (2 * h)), 2 * (2 * (2 * w))]) :
    T #[b, 2 * c.latent, h, w] :=
  let d := p.down_blocks
  let x := down d.«0».downsamplers (two c hg h0 d.«0».resnets (conv3 p.conv_in x))
  let x := down d.«1».downsamplers (twoWiden c hg h0 h1 d.«1».resnets x)
  let x := down d.«2».downsamplers (twoWiden c hg h1 h2 d.«2».resnets x)
  let x := mid c hg h2 p.mid_block (two c hg h2 d.«3».resnets x)
  conv3 p.conv_out (silu (norm c hg h2 p.conv_norm_out x))

/-- The decoder: latents of `h × w` to an image of `8 h × 8 w`. -/
def decode (c : VAEConfig) {b h w : Nat} (hg : 0 < c.groups) (h0 : c.ch0 % c.groups = 0)
    (h1 : c.ch1 % c.groups = 0) (h2 : c.ch2 % c.groups = 0) (p : Decoder c)
    (z : T #[b, c.latent, h, w]) : T #[b, c.out_ch, 2 * (2 * (2 * h)), 2 * (2 * (2 * w))] :=
  let u := p.up_blocks
  let x := mid c hg h2 p.mid_block (conv3 p.conv_in z)
  let x := up u.«0».upsamplers (three c hg h2 u.«0».resnets x)
  let x := up u.«1».upsamplers (three c hg h2 u.«1».resnets x)
  let x := up u.«2».upsamplers (threeWiden c hg h2 h1 u.«2».resnets x)
  let x := threeWiden c hg h1 h0 u.«3».resnets x
  conv3 p.conv_out (silu (norm c hg h0 p.conv_norm_out x))

/-- `AutoencoderKLFlux2.encode(x).latent_dist.parameters`: the latents' mean and
log-variance, `quant_conv` of the encoder's output. -/
@[model]
def vaeEncode (c : VAEConfig) {b h w : Nat} (hg : 0 < c.groups) (h0 : c.ch0 % c.groups = 0)
    (h1 : c.ch1 % c.groups = 0) (h2 : c.ch2 % c.groups = 0) (p : VAEParams c)
    (x : T #[b, c.in_ch, 2 * (2 * (2 * h)), 2 * (2 * (2 * w))]) :
    T #[b, 2 * c.latent, h, w] :=
  conv1 p.quant_conv (encode c hg h0 h1 h2 p.encoder x)

/-- `AutoencoderKLFlux2.decode(z)`: `post_quant_conv`, then the decoder. -/
@[model]
def vaeDecode (c : VAEConfig) {b h w : Nat} (hg : 0 < c.groups) (h0 : c.ch0 % c.groups = 0)
    (h1 : c.ch1 % c.groups = 0) (h2 : c.ch2 % c.groups = 0) (p : VAEParams c)
    (z : T #[b, c.latent, h, w]) : T #[b, c.out_ch, 2 * (2 * (2 * h)), 2 * (2 * (2 * w))] :=
  decode c hg h0 h1 h2 p.decoder (conv1 p.post_quant_conv z)

/-- FLUX.2's latents (`patched` channels, batch-normed) to an image of `16 h × 16 w`: the
normalisation undone, the 2 × 2 patches unshuffled, decoded (the pipeline's last step). -/
@[model]
def flux2Decode (c : VAEConfig) {b h w : Nat} (hg : 0 < c.groups)
    (h0 : c.ch0 % c.groups = 0) (h1 : c.ch1 % c.groups = 0) (h2 : c.ch2 % c.groups = 0)
    (p : VAEParams c) (latents : T #[b, c.patched, h, w]) :
    T #[b, c.out_ch, 2 * (2 * (2 * (2 * h))), 2 * (2 * (2 * (2 * w)))] :=
  let z := pixelShuffle 2 (batchNormInverse latents p.bn.running_mean p.bn.running_var c.bn_eps)
  decode c hg h0 h1 h2 p.decoder (conv1 p.post_quant_conv z)
