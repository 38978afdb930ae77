"""`dllm-lsp serve`, ended by `os._exit` as soon as the file named by $SERVE_EXIT_FLAG exists.

For bench_heap_sites.py: heaptrack reports what is still allocated when the process ends, so
the server must end with everything it holds still held: before `shutdown` (which closes the
engine and frees its caches) and without the interpreter's teardown.
"""

import os
import sys
import threading
import time


def _watch(flag: str) -> None:
    while not os.path.exists(flag):
        time.sleep(0.2)
    os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=_watch, args=(os.environ["SERVE_EXIT_FLAG"],), daemon=True).start()
    from dllm_lsp.cli import main

    sys.exit(main(["serve"]))
