"""Training the embedded default model: corpus manifest, tokenizer, diffusion objective."""
