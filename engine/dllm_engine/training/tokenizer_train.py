"""Train the default model's byte-level BPE tokenizer with Hugging Face `tokenizers`.

Newline is its own pre-token, so line boundaries always fall between tokens:
a hole cut at a line boundary tokenizes the same alone as inside the file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Order fixes the ids: <pad> 0, <mask> 1, <eos> 2, <suf> 3, <pre> 4.
SPECIAL_TOKENS = ["<pad>", "<mask>", "<eos>", "<suf>", "<pre>"]


def build_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\n"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train(files: list[Path], vocab_size: int, out: Path) -> Tokenizer:
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )

    def texts():
        for path in files:
            try:
                yield path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue

    tok.train_from_iterator(texts(), trainer=trainer, length=len(files))
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    return tok


def main(argv: list[str] | None = None) -> None:
    from .corpus import read_manifest

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifest", type=Path, required=True)
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    files = [Path(p) for p in read_manifest(args.manifest)["train"]]
    train(files, args.vocab_size, args.out)


if __name__ == "__main__":
    main()
