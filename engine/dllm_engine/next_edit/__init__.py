"""Next-edit suggestions: after an edit, propose the edit the user will make next.

- `request.py`: `NextEditRequest` -> `NextEditResult`, the one entry point shared
  by the language server (in-process or over the daemon's `/v1/next_edit`) and
  the daemon's OpenAI-style `/v1/edit/completions`. No torch.
- `spans.py`: which spans of the editable region to re-mask (pure functions).
- `service.py`: score, select, denoise in one batched infill, read back.
- `http_body.py`: the daemon's strict request body.
"""

from .request import EditSpan, NextEditRequest, NextEditResult, RecentEdit

__all__ = ["EditSpan", "NextEditRequest", "NextEditResult", "RecentEdit"]
