"""`tyr generate`: text to image through FLUX.2 [klein]'s three models written in Lean (the
Qwen3 prompt features, the FLUX.2 transformer, the autoencoder), read from a directory that
diffusers wrote for a `Flux2KleinPipeline` (`layout`), with the pipeline's tokenization
(`prompt`) and schedule (`schedule`); or from a run of `tyr train` prompted as FLUX.2 is
(`trained`: `examples/flux2/digits`), over the same schedule."""
