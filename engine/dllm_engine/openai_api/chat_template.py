"""A checkpoint's chat template: found where Hugging Face keeps it, rendered by transformers.

The template is Jinja in `tokenizer_config.json` (`chat_template`: a string, or a
list of named templates of which "default" is used) or in `chat_template.jinja`.
It is rendered by transformers' own renderer (`render_jinja_template`, what
`apply_chat_template` calls: a sandboxed Jinja environment, never `eval`), so a
template renders here exactly as it does for the model's authors.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..protocol import ProtocolError


def find_chat_template(folder: Path) -> str | None:
    folder = Path(folder)
    if not folder.is_dir():
        return None
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = _tokenizer_config(folder)
    template = config.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) and template.strip() else None


def render_chat(folder: Path, template: str, messages: list[dict]) -> str:
    """The prompt for the assistant's next turn."""
    from jinja2 import TemplateError
    from transformers.utils.chat_template_utils import render_jinja_template

    config = _tokenizer_config(Path(folder))
    specials = {key: _token_text(config.get(key)) for key in ("bos_token", "eos_token", "pad_token", "unk_token")}
    try:
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=template,
                                            add_generation_prompt=True, **specials)
    except TemplateError as exc:  # a template's own raise_exception("...") (wrong role order...) or a bad one
        raise ProtocolError(f"messages: the model's chat template refused them: {exc}") from None
    return rendered[0]


def _tokenizer_config(folder: Path) -> dict:
    try:
        data = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _token_text(value) -> str:
    if isinstance(value, dict):  # {"content": "<s>", "lstrip": false, ...}
        value = value.get("content")
    return value if isinstance(value, str) else ""
