"""How likely the model finds a document with each candidate fill in its hole.

Best of N (`DiffusionParams.candidates`, candidates.py) fills a hole several ways and keeps
the fill under which the document reads best: the fill and the first tokens of the code
after it, scored left to right by the model itself. A fill that leaves the suffix
unexplained (an `if ...:` line followed by a dedent, a value computed and never used, a
`return` before code that still runs) makes the suffix's first tokens unlikely, whatever
the fill's own probability; this is where a base that was never trained to read a suffix
still uses it.

The score runs in the hole's own layout: the context the fills were written from (the
suffix, then the prefix up to its last line break), then the rows of each candidate, its
line's start, the fill and `SUFFIX_TOKENS` of the suffix, all in one causal pass. That context
is in the engine's cache from the fill itself, so a score costs one pass of rows and no
encoding. The candidates' rows form a tree (`token_tree`, `Runner.score_tree`): texts that
start alike share the rows of their common start, each read as its own causal chain. The cuts
of one fill (fill_end.py) all start with the fill, so 9 cuts of a 32-token fill are ~180 rows
instead of ~450, and the context is stacked once instead of once a cut.
Until the thirtieth session the score read plain text in reading order (the prefix
alone, then the rows): the suffix out of view, so its first tokens could not be copied from
it, but a second encoding of the whole prefix, which a fill at a new place pays in full
(~1,000 tokens: 1.4 s on an AMD EPYC). Measured against that on HumanEval single-line
`tasks[::5]`, choosing where 207 variable-length fills end (benchmarks/RESULTS.md, thirtieth
session): the same cut for 199 of 207, 57 passed with either; best of 2 in line mode 33.8% ->
33.3% (0 won, 1 lost), its first answer at a new place 0.86x.
"""

from __future__ import annotations

import torch

SUFFIX_TOKENS = 16  # the suffix's first tokens that vouch for a fill (the next line or two)


def _anchor(prefix: str) -> int:
    """Where the shared context ends: the prefix's last line break (a token boundary for every
    byte-level tokenizer we load), so the rows of every candidate start at the same text."""
    return max(prefix.rfind("\n"), 0)


@torch.inference_mode()
def score_fills(engine, prefix: str, suffix: str, fills: list[str], room: int,
                suffix_tokens: int = SUFFIX_TOKENS) -> list[float]:
    """Log-probability per fill of [the prefix's last line, the fill, the suffix's first
    `suffix_tokens` tokens] after the hole's context cut at that line (`room`: the hole's
    max_tokens, which the context was encoded with, so its cached entry serves), one pass over
    the fills' rows merged into a tree.

    Shifted-logit models only (a pretrained base in our layout: slot j read from the row
    before it, so a causal row chain is the base's own left-to-right scoring)."""
    runner, tok = engine.runner, engine.tokenizer
    if not getattr(runner, "shifted", False):
        raise ValueError("candidate scoring needs a shifted-logit model")
    cut = _anchor(prefix)
    ctx = runner.encode_context(tok.encode(prefix[:cut]) if cut else [], tok.encode(suffix), room)
    rows = []
    for fill in fills:
        start = len(prefix) + len(fill) - cut  # where the suffix starts in the rows' text
        ids, offsets = tok.encode_with_offsets(prefix[cut:] + fill + suffix)
        first_suffix = next((i for i, (s, _) in enumerate(offsets) if s >= start), len(ids))
        rows.append(ids[: first_suffix + suffix_tokens])
    tokens, parents, paths = token_tree(rows)
    logp = runner.score_tree(ctx, tokens, parents).float().log_softmax(-1)
    node_logp = logp[torch.tensor(parents, dtype=torch.long) + 1, torch.tensor(tokens, dtype=torch.long)] if tokens \
        else torch.zeros(0)
    scores = [float(node_logp[path].sum()) if path else 0.0 for path in paths]
    if not suffix.strip():  # no code after the hole: the file ends after the fill
        ends = torch.tensor(document_end_ids(engine), dtype=torch.long)
        scores = [score + float(logp[path[-1] + 1 if path else 0, ends].logsumexp(-1))
                  for score, path in zip(scores, paths)]
    return scores


def document_end_ids(engine) -> list[int]:
    """The tokens with which the base ends a file: its end tokens and, for a base trained on
    repositories (SmolLM2: StarCoder's format), the marker that starts the next file (our
    layout's prefix marker). Where the hole is the file's end, what follows a right fill is one
    of them, and a fill that runs on into another function makes them unlikely: on HumanEval
    single-line `tasks[::5]`, 30 of 207 holes are a file's last line, and variable-length fills
    went on with a new `def` in 9 of the 10 the line-mode fill got right (benchmarks/RESULTS.md,
    thirty-seventh session)."""
    cfg = engine.loaded.config
    return sorted({i for i in (*engine.special.end, cfg.prefix_token_id) if i is not None and i >= 0})


def token_tree(rows: list[list[int]]) -> tuple[list[int], list[int], list[list[int]]]:
    """(tokens, parents, paths): `rows` merged where they start alike, one node per distinct
    start (a trie): node i holds tokens[i] after node parents[i] (-1: the context), and row k
    is the nodes paths[k]. The cuts of one fill share the fill's rows up to each cut."""
    tokens: list[int] = []
    parents: list[int] = []
    node_of: dict[tuple[int, int], int] = {}
    paths = []
    for ids in rows:
        parent, path = -1, []
        for token in ids:
            node = node_of.get((parent, token))
            if node is None:
                node = node_of[(parent, token)] = len(tokens)
                tokens.append(token)
                parents.append(parent)
            path.append(node)
            parent = node
        paths.append(path)
    return tokens, parents, paths
