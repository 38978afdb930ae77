"""The daemon's OpenAI- and Inception-compatible surface (docs/api.md): bodies, errors,
model names, streaming; mounted by daemon.py through `routes.openai_routes`."""
