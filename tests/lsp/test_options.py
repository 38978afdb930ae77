"""Initialization options: camelCase in, typed dataclasses out, bad values reported and defaulted."""

from __future__ import annotations

from dllm_lsp.server.options import ServerOptions, parse_options, to_json


def test_defaults_round_trip_through_camel_case_json():
    defaults = ServerOptions()
    data = to_json(defaults)
    assert data["debounceMs"] == 20 and data["engine"]["openaiModel"] is None
    assert data["context"] == {"prefixTokens": 768, "suffixTokens": 256, "snippetTokens": 0, "nearTokens": 384}
    parsed, problems = parse_options(data)
    assert parsed == defaults and problems == []


def test_values_are_read_and_nested_sections_merge():
    opts, problems = parse_options({
        "engine": {"mode": "daemon", "socket": "/tmp/x.sock"},
        "context": {"suffixTokens": 64},
        "languages": {"go": False},
        "diffusion": {"threshold": 1, "confidence": "margin"},
    })
    assert problems == []
    assert opts.engine.mode == "daemon" and opts.engine.socket == "/tmp/x.sock"
    assert opts.context.suffix_tokens == 64 and opts.context.prefix_tokens == 768
    assert opts.languages["go"] is False and opts.languages["python"] is True
    assert opts.diffusion.threshold == 1.0 and isinstance(opts.diffusion.threshold, float)


def test_each_bad_value_keeps_its_default_and_is_named():
    opts, problems = parse_options({
        "enable": "yes", "debounceMs": 10_000, "engine": {"mode": "cloud"}, "diffusion": {"seed": -1},
        "context": 5, "mystery": 1,
    })
    assert opts == ServerOptions()
    joined = " | ".join(problems)
    for name in ("enable", "debounceMs", "engine.mode", "diffusion.seed", "context", "mystery"):
        assert f"'{name}'" in joined
    assert len(problems) == 6


def test_base_settings_are_overridden_not_lost():
    base, _ = parse_options({"engine": {"mode": "openai", "url": "http://h"}})
    opts, problems = parse_options({"engine": {"openaiModel": "m"}}, base)
    assert problems == []
    assert (opts.engine.mode, opts.engine.url, opts.engine.openai_model) == ("openai", "http://h", "m")


def test_non_object_settings():
    opts, problems = parse_options(["nope"])
    assert opts == ServerOptions() and problems
    assert parse_options(None) == (ServerOptions(), [])
