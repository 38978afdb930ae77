import json
import os
import tempfile


def load_config(path):
    """Read a JSON configuration file into a dict."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)  # <hole>


if __name__ == "__main__":
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        tmp.write('{"debug": true, "level": 3}')
    try:
        assert load_config(tmp.name) == {"debug": True, "level": 3}
    finally:
        os.unlink(tmp.name)
