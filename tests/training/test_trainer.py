"""The trainer learns, and a resumed run continues exactly where it stopped."""

from __future__ import annotations

import torch

from dllm_engine.checkpoint import load
from dllm_engine.training.batches import StreamConfig
from dllm_engine.training.trainer import Trainer, TrainConfig, lr_at

from dllm_engine.checkpoint import SMALL_MODEL_DIR

TOKENIZER = SMALL_MODEL_DIR / "tokenizer.json"

TINY = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}


def _cfg(tiny_data, out, **kw) -> TrainConfig:
    base = dict(out_dir=out, data_dir=tiny_data / "train", heldout_dir=tiny_data / "heldout", tokenizer=TOKENIZER,
                model=TINY, stream=StreamConfig(batch_size=4, context_budget=48, seed=1), lr=1e-2,
                warmup_steps=2, max_steps=6, eval_every=3, eval_batches=2, save_every_s=1e9)
    base.update(kw)
    return TrainConfig(**base)


def test_training_steps_reduce_loss_on_a_fixed_batch(tiny_data, tmp_path):
    torch.manual_seed(0)
    tr = Trainer(_cfg(tiny_data, tmp_path / "run", warmup_steps=1))
    tr.stream.batch = lambda step, with_mask=True, _b=tr.stream.batch(0): _b  # same batch, same masks below
    losses = []
    for _ in range(8):
        tr.step = 0  # fixed masking generator too
        losses.append(tr.train_step()["loss"])
    assert losses[-1] < 0.8 * losses[0], losses


def test_resume_restores_state_exactly(tiny_data, tmp_path):
    straight = Trainer(_cfg(tiny_data, tmp_path / "a"))
    straight.run(on_log=lambda row: None)

    half = Trainer(_cfg(tiny_data, tmp_path / "b", max_steps=3))
    half.run(on_log=lambda row: None)
    resumed = Trainer(_cfg(tiny_data, tmp_path / "b"))
    assert resumed.load_state() and resumed.step == 3
    resumed.run(on_log=lambda row: None)

    assert resumed.step == straight.step == 6
    for (name, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)
    sa, sb = straight.opt.state_dict()["state"], resumed.opt.state_dict()["state"]
    torch.testing.assert_close(sa[0]["exp_avg"], sb[0]["exp_avg"], atol=0, rtol=0)
    assert [r["step"] for r in straight.log.rows()] == [r["step"] for r in resumed.log.rows()]


def test_run_writes_curve_and_loadable_native_checkpoints(tiny_data, tmp_path):
    tr = Trainer(_cfg(tiny_data, tmp_path / "run", max_steps=3))
    tr.run(on_log=lambda row: None)
    out = tmp_path / "run"
    assert (out / "loss.csv").read_text().startswith("split,step")
    assert (out / "loss.svg").exists() or (out / "loss.png").exists()
    for name in ("best", "last"):
        loaded = load(str(out / name))
        assert loaded.config.hidden_size == 32 and loaded.tokenizer is not None
        assert loaded.model.lm_head.weight.data_ptr() == loaded.model.model.embed_tokens.weight.data_ptr()


def test_schedule_warms_up_then_decays_by_steps_or_time(tiny_data, tmp_path):
    cfg = _cfg(tiny_data, tmp_path, lr=1.0, min_lr_ratio=0.1, warmup_steps=10, max_steps=110)
    assert lr_at(cfg, 0, 0) == 0.1 and lr_at(cfg, 9, 0) == 1.0
    assert abs(lr_at(cfg, 60, 0) - 0.55) < 1e-9 and abs(lr_at(cfg, 110, 0) - 0.1) < 1e-9
    cfg.time_budget_s = 100.0
    assert abs(lr_at(cfg, 20, 100.0) - 0.1) < 1e-9  # the wall-clock budget ends the schedule


def test_init_continues_from_a_checkpoint_and_keeps_its_history(tiny_data, tmp_path):
    """--init: step 0 holds the given checkpoint's weights; the export records the earlier training."""
    import json

    import torch

    from dllm_engine.checkpoint import SMALL_MODEL_DIR, load
    from dllm_engine.training.batches import StreamConfig
    from dllm_engine.training.trainer import Trainer, TrainConfig

    tiny = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    common = dict(data_dir=tiny_data / "train", tokenizer=SMALL_MODEL_DIR / "tokenizer.json", model=tiny,
                  stream=StreamConfig(batch_size=2, context_budget=32), eval_every=1000)
    first = Trainer(TrainConfig(out_dir=tmp_path / "a", max_steps=2, **common))
    first.run(on_log=lambda r: None)
    second = Trainer(TrainConfig(out_dir=tmp_path / "b", max_steps=1, init_from=tmp_path / "a" / "last", **common))
    saved = load(str(tmp_path / "a" / "last"), dtype=torch.float32).model.state_dict()
    for name, value in second.model.state_dict().items():
        assert torch.equal(value, saved[name].to(value.dtype)), name
    second.run(on_log=lambda r: None)
    facts = json.loads((tmp_path / "b" / "last" / "training.json").read_text())
    assert facts["step"] == 1 and facts["previous"]["step"] == 2 and facts["previous"]["tokens"] > 0


def test_exported_config_records_the_trained_context(tiny_data, tmp_path):
    """The engine trims contexts to config.extra.context_tokens: every export must carry it."""
    import json

    from dllm_engine.checkpoint import SMALL_MODEL_DIR
    from dllm_engine.training.batches import StreamConfig
    from dllm_engine.training.trainer import Trainer, TrainConfig

    tiny = {"hidden_size": 32, "num_layers": 2, "num_heads": 2, "num_kv_heads": 1, "intermediate_size": 64}
    Trainer(TrainConfig(out_dir=tmp_path / "a", data_dir=tiny_data / "train", tokenizer=SMALL_MODEL_DIR / "tokenizer.json",
                        model=tiny, stream=StreamConfig(batch_size=2, context_budget=48), max_steps=1,
                        eval_every=1000)).run(on_log=lambda r: None)
    cfg = json.loads((tmp_path / "a" / "last" / "config.json").read_text())["dllm_lsp_config"]
    assert cfg["extra"]["context_tokens"] == 48
