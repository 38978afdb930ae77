"""User text never becomes a control token (tokenizer.py): a file that spells one encodes as
its characters, and decodes back to the same text."""

from pathlib import Path

import pytest

from dllm_engine.tokenizer import TextTokenizer

SMALL_TOKENIZER = Path(__file__).resolve().parents[2] / "engine" / "dllm_engine" / "default_model" / "tokenizer.json"


@pytest.mark.parametrize("spelled", ["<eos>", "<mask>", "<suf>", "<pre>", "<pad>"])
def test_spelled_control_tokens_stay_text(spelled):
    tok = TextTokenizer(SMALL_TOKENIZER)
    control = tok.token_id(spelled)
    assert control is not None  # the small model's tokenizer has it as a special token
    text = f'MARK = "{spelled}"  # {spelled}\n'
    ids = tok.encode(text)
    assert control not in ids
    assert tok.decode(ids) == text
    assert tok.encode_with_offsets(text)[0] == ids
