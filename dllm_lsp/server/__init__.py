"""The dllm-lsp language server (pygls). Importing this package never imports torch.

`create_server()` builds a ready-to-run server; `dllm_lsp.commands.serve` runs it on stdio.
"""

from .server import DllmServer, create_server

__all__ = ["DllmServer", "create_server"]
