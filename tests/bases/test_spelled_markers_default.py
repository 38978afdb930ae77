"""The default model's layout markers are SmolLM2's own control tokens (`<|endoftext|>`,
`<repo_name>`, `<file_sep>`); a file that spells them (this repository's bases/catalog.py does)
must reach the model as text, or a completion there reads as the end of the document."""

from dllm_engine.protocol import Hole, InfillRequest


def test_spelled_markers_are_text_to_the_default_model(base_engine):
    tok, cfg = base_engine.tokenizer, base_engine.loaded.config
    markers = {name: tok.token_id(name) for name in ("<|endoftext|>", "<repo_name>", "<file_sep>")}
    assert None not in markers.values()
    prefix = 'BOS = "<|endoftext|>"\nSUFFIX_MARKER = "<repo_name>"\nPREFIX_MARKER = "'
    suffix = '"\n'
    ids = tok.encode(prefix)
    assert not set(ids) & set(markers.values())
    assert tok.decode(ids) == prefix
    # The engine lays the hole out with each marker once, where the layout puts it.
    context = base_engine.runner._context_ids(ids, tok.encode(suffix), 16).tolist()
    assert [context.count(i) for i in markers.values()] == [1, 1, 1]
    fill = base_engine.infill(InfillRequest(holes=[Hole(prefix=prefix, suffix=suffix, max_tokens=12,
                                                        stop=("\n",))])).holes[0]
    assert fill.finish_reason in ("end", "stop", "length")
    assert cfg.extra.get("base") == "smollm2-135m"
