"""`dllm-lsp model logits`: raw forward logits to safetensors, with left padding."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from ckpt_reference import reference_logits
from ckpt_writers import SPECS, write_checkpoint
from dllm_lsp.cli import main


def _run(tmp_path, family, ids, mask=None, tokenizer=False, extra=()):
    tensors = write_checkpoint(tmp_path / "m", family, tokenizer=tokenizer)
    (tmp_path / "ids.json").write_text(json.dumps(ids))
    argv = ["model", "logits", str(tmp_path / "m"), "--ids", str(tmp_path / "ids.json"), "--out", str(tmp_path / "out.safetensors"), *extra]
    if mask is not None:
        (tmp_path / "mask.json").write_text(json.dumps(mask))
        argv += ["--attention-mask", str(tmp_path / "mask.json")]
    return main(argv), tensors


def test_logits_cli_shifted_family_left_padding(tmp_path):
    ids = [[3, 9, 27, 81, 14, 5], [0, 0, 7, 7, 60, 2]]
    mask = [[1] * 6, [0, 0, 1, 1, 1, 1]]
    rc, tensors = _run(tmp_path, "dream", ids, mask)  # config.json + weights only
    assert rc == 0
    out = load_file(str(tmp_path / "out.safetensors"))
    assert list(out) == ["logits"] and out["logits"].dtype == torch.float32
    assert out["logits"].shape == (2, 6, SPECS["dream"]["config"]["vocab_size"])
    want = reference_logits("dream", tensors, SPECS["dream"]["config"], ids, mask)  # unshifted rows
    real = torch.tensor(mask, dtype=torch.bool)
    assert (out["logits"].double() - want).abs()[real].max() < 1e-4


def test_logits_cli_without_tokenizer_for_tokenizer_only_mask(tmp_path):
    rc, tensors = _run(tmp_path, "fast_dllm_v2", [[1, 2, 3, 4, 5]])
    assert rc == 0
    want = reference_logits("fast_dllm_v2", tensors, SPECS["fast_dllm_v2"]["config"], [[1, 2, 3, 4, 5]], [[1] * 5])
    assert (load_file(str(tmp_path / "out.safetensors"))["logits"].double() - want).abs().max() < 1e-4


def test_logits_cli_bf16(tmp_path):
    rc, _ = _run(tmp_path, "llada", [[1, 2, 3]], extra=("--dtype", "bfloat16"))
    assert rc == 0 and load_file(str(tmp_path / "out.safetensors"))["logits"].dtype == torch.float32


def test_logits_cli_rejects_ragged_ids(tmp_path, capsys):
    rc, _ = _run(tmp_path, "dream", [[1, 2, 3], [1, 2]])
    assert rc == 2 and "same length" in capsys.readouterr().err
    assert not (tmp_path / "out.safetensors").exists()


def test_logits_cli_rejects_bad_mask(tmp_path, capsys):
    rc, _ = _run(tmp_path, "dream", [[1, 2, 3]], mask=[[1, 2, 1]])
    assert rc == 2 and "0 or 1" in capsys.readouterr().err
    rc, _ = _run(tmp_path, "dream", [[1, 2, 3]], mask=[[1, 1]])
    assert rc == 2 and "differs from --ids" in capsys.readouterr().err


def test_logits_cli_rejects_out_of_vocab(tmp_path, capsys):
    rc, _ = _run(tmp_path, "dream", [[1, 2, 999]])
    assert rc == 2 and "outside the vocabulary" in capsys.readouterr().err


def test_logits_cli_bad_checkpoint(tmp_path, capsys):
    (tmp_path / "ids.json").write_text("[[1]]")
    rc = main(["model", "logits", str(tmp_path), "--ids", str(tmp_path / "ids.json"), "--out", str(tmp_path / "o.st")])
    assert rc == 1 and "config.json: missing" in capsys.readouterr().err
