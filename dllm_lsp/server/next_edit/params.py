"""The params of `dllm/nextEdit`, `dllm/acceptEdit` and `dllm/rejectEdit`, checked strictly.

pygls hands a custom method's params over as loose objects; they are turned back
into JSON-shaped data and validated here with pydantic in strict mode (a string
version or a float line is refused, as the daemon refuses it), so a bad request
gets one InvalidParams error naming the field and nothing else runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

UInteger = Annotated[int, Field(ge=0, le=2**31 - 1)]


class _Params(BaseModel):
    # LSP clients add fields of their own (workDoneToken...): ignored, not refused.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class VersionedDocument(_Params):
    uri: Annotated[str, Field(min_length=1)]
    version: int


class Position(_Params):
    line: UInteger
    character: UInteger


class NextEditParams(_Params):
    textDocument: VersionedDocument
    position: Position


class EditFeedbackParams(_Params):
    """`dllm/acceptEdit` / `dllm/rejectEdit`: about the proposal last given for this version."""

    textDocument: VersionedDocument


class InvalidParams(ValueError):
    pass


def plain(value: Any) -> Any:
    """pygls's params objects (named tuples of named tuples) as dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def parse(schema: type[_Params], raw: Any) -> Any:
    try:
        return schema.model_validate(plain(raw))
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)[:3]
        raise InvalidParams("; ".join(f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}"
                                      for e in errors)) from None
