"""GET /v1/models: the one model a daemon serves, under the names clients ask for.

"Change only the base URL" must hold: Continue asks for `mercury-edit-2`, the openai
SDK examples for `gpt-3.5-turbo-instruct`, so by default any `model` value is served
by the loaded model and echoed back in the answer. `--served-model-name` lists the
names the daemon advertises (vLLM's flag of that name does the same); with
`--strict-model-names` any other name is a 404, for setups that route by model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .chat_template import find_chat_template
from .errors import model_not_found
from .schemas import MAX_FILL_TOKENS

OWNED_BY = "dllm-lsp"
# The product's own models get a name that says whose they are (a bare "default" is no help in a picker).
NATIVE_NAMES = {"default": "dllm-lsp-default", "small": "dllm-lsp-small"}
# Inception's model card adds these to OpenAI's; Kilo Code's Inception provider reads them and
# fails on a card without `pricing` (src/api/providers/fetchers/inception.ts). Served locally, it is free.
FREE = {"prompt": 0.0, "completion": 0.0, "image": 0.0, "request": 0.0, "input_cache_reads": 0.0,
        "input_cache_writes": 0.0}
SAMPLING = ["max_tokens", "temperature", "top_p", "seed", "stop", "n"]


@dataclass(frozen=True)
class ServedModels:
    aliases: tuple[str, ...] = ()
    strict: bool = False
    created: int = field(default_factory=lambda: int(time.time()))  # OpenAI's `created`: when we started serving

    def names(self, engine) -> list[str]:
        own = NATIVE_NAMES.get(engine.model_name, engine.model_name)
        return list(dict.fromkeys((own, *self.aliases)))

    def resolve(self, engine, asked: str | None) -> str:
        """The name to answer with: the one asked for when it is served (or any, unless strict)."""
        served = self.names(engine)
        if not asked:
            return served[0]
        if self.strict and asked not in served:
            raise model_not_found(asked, served)
        return asked

    def card(self, engine, name: str) -> dict:
        cfg = engine.loaded.config
        chat = find_chat_template(engine.loaded.path) is not None  # /v1/chat/completions works
        return {
            "id": name,
            "object": "model",
            "created": self.created,
            "owned_by": OWNED_BY,
            **self._inception_fields(engine, cfg, chat),
            # Our extras under one namespaced key, so no client mistakes them for OpenAI fields.
            "dllm_lsp": {
                "model": self.names(engine)[0],
                "family": cfg.family,
                "context_window": cfg.max_position_embeddings,
                "mask_token_id": cfg.mask_token_id,
                "parameters": cfg.num_params,
                "chat": chat,
            },
        }

    def _inception_fields(self, engine, cfg, chat: bool) -> dict:
        return {
            "name": self.names(engine)[0],
            "input_modalities": ["text"],
            "output_modalities": ["text"],
            "context_length": cfg.max_position_embeddings,
            "max_output_length": MAX_FILL_TOKENS,
            "pricing": FREE,
            "suported_sampling_parameters": SAMPLING,  # sic: Inception's spelling, which its clients read
            "supported_features": ["fim", "apply_edit", "next_edit"] + (["chat"] if chat else []),
            "supports_prefix_caching": True,  # the engine's context cache is a prefix cache
        }

    def listing(self, engine) -> dict:
        return {"object": "list", "data": [self.card(engine, n) for n in self.names(engine)]}
