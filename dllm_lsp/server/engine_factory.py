"""The engine client for the configured mode (in-process, daemon, remote, OpenAI FIM)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .options import EngineOptions

if TYPE_CHECKING:  # dllm_engine.clients imports httpx (~0.3 s): imported when a client is made
    from dllm_engine.clients import EngineClient


def create_client(opts: EngineOptions) -> "EngineClient":
    """The client for `opts.mode`. Raises ValueError for settings that cannot work."""
    from dllm_engine.clients import DaemonClient, InProcessClient, OpenAIFimClient

    if opts.mode == "inProcess":
        return InProcessClient(model=opts.model)
    if opts.mode == "daemon":
        return DaemonClient(socket_path=opts.socket, token=opts.token, spawn=True, model=opts.model)
    if opts.mode == "remote":
        if not opts.url:
            raise ValueError("engine.mode 'remote' needs engine.url (the daemon's http://host:port)")
        return DaemonClient(url=opts.url, token=opts.token)
    if opts.mode == "openai":
        if not opts.url:
            raise ValueError("engine.mode 'openai' needs engine.url (the endpoint's base URL, without /v1)")
        return OpenAIFimClient(base_url=opts.url, model=opts.openai_model or opts.model or "default", api_key=opts.token)
    raise ValueError(f"unknown engine mode {opts.mode!r}")


def describe_model(opts: EngineOptions) -> str:
    if opts.mode == "openai":
        return opts.openai_model or opts.model or "default"
    return opts.model or "default"
