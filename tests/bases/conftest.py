import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def base_engine():
    """The engine on the default model as it ships (a pretrained base in our layout, int4, its
    own adapter). Its first load builds the weight cache (~15 s on 2 cores); later sessions
    memory-map it."""
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(model="default", threads=1))
    yield e
    e.shutdown()


@pytest.fixture(scope="session")
def fp32_engine():
    """The default model's base with fp32 weights ("auto" would run int4, through bf16 kernels
    below 8 rows, whose sums round with the row count): the tests that compare fills token for
    token share it (its context cache changes no output, only the time). Without the shipped
    adapter (bases/lora/): these tests check the engine's stop, end and healing rules on holes
    chosen for how the bare base fills them (one that runs on past its hole, a line its draft
    head ends), and the rules are the same whatever adapter runs; `base_engine` runs it."""
    from dllm_engine.engine import Engine, EngineConfig

    e = Engine(EngineConfig(model="default", threads=1, dtype="float32", weights="native", base_adapter="none"))
    yield e
    e.shutdown()
