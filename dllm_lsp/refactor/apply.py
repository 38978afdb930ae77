"""Fills -> edits -> a new file: shaping, the parse check, the diff, and the atomic write.

A file is written only whole (temporary file in the same folder, then
os.replace), only when it is still byte-for-byte what was read, and with its
mode bits, encoding and line endings. Each fill goes through the syntax
layer's `shape_completion`; the edits of a file together must add no syntax
error (`new_error_count`), else fills are kept one by one while they add none.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass

from dllm_lsp.refactor.planner import TEMP_SUFFIX, FilePlan, PlannedHole
from dllm_lsp.syntax.languages import language_named
from dllm_lsp.syntax.parse_check import new_error_count
from dllm_lsp.syntax.shaping import shape_completion


@dataclass
class HoleFill:
    """What the engine answered for one hole."""

    text: str
    passes: int
    finish_reason: str
    elapsed_ms: float


@dataclass
class HoleOutcome:
    hole: PlannedHole
    fill: HoleFill | None
    replacement: str | None = None  # the text written in place of the span (template included)
    applied: bool = False
    reason: str | None = None  # why not applied


@dataclass
class Edit:
    start: int
    end: int
    text: str
    outcome: HoleOutcome


def _edit_for(text: str, outcome: HoleOutcome, language) -> Edit | None:
    hole, fill = outcome.hole, outcome.fill
    doc, offset = hole.opened_document(text)
    shaped = shape_completion(doc, offset, fill.text, hole.ctx, language)
    if shaped is None:
        outcome.reason = "dropped by shaping (empty, repeated, duplicates the suffix, or adds syntax errors)"
        return None
    consumed = shaped.replace_end - offset  # closers already in the document that the fill reuses
    after, end = hole.after, hole.end
    if consumed <= len(after):
        after = after[consumed:]
    else:
        after, end = "", end + consumed - len(after)
    return Edit(hole.start, end, hole.before + shaped.text + after, outcome)


def _splice(text: str, edits: list[Edit]) -> str:
    out, pos = [], 0
    for e in edits:
        out += [text[pos : e.start], e.text]
        pos = e.end
    out.append(text[pos:])
    return "".join(out)


def build_edit(plan: FilePlan, fills: list[HoleFill | None]) -> tuple[str, list[HoleOutcome]]:
    """The new text of the file and one outcome per hole (applied, or why not)."""
    language = language_named(plan.language)
    outcomes = [HoleOutcome(h, f) for h, f in zip(plan.holes, fills)]
    edits: list[Edit] = []
    for outcome in outcomes:
        if outcome.fill is None:
            outcome.reason = outcome.reason or "no fill from the engine"
            continue
        edit = _edit_for(plan.text, outcome, language)
        if edit is None:
            continue
        if edits and edit.start < edits[-1].end:
            outcome.reason = "overlaps the previous fill"
            continue
        edits.append(edit)
    new_text = _splice(plan.text, edits)
    if edits and new_error_count(plan.text, new_text, language) > 0:
        # Together they break the parse: keep fills one by one while they add no error.
        kept: list[Edit] = []
        for edit in edits:
            if new_error_count(plan.text, _splice(plan.text, kept + [edit]), language) == 0:
                kept.append(edit)
            else:
                edit.outcome.reason = "adds syntax errors together with the other fills"
        edits, new_text = kept, _splice(plan.text, kept)
    for edit in edits:
        edit.outcome.applied, edit.outcome.replacement = True, edit.text
    return new_text, outcomes


def unified_diff(plan: FilePlan, new_text: str) -> str:
    name = os.path.normpath(plan.path).lstrip(os.sep)  # git-style a/ and b/ names, also for absolute paths
    lines = difflib.unified_diff(plan.text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                 fromfile=f"a/{name}", tofile=f"b/{name}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _still_as_read(path: str, plan: FilePlan) -> bool:
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if (st.st_mtime_ns, st.st_size) != (plan.signature.mtime_ns, plan.signature.size):
                return False
            return hashlib.sha256(f.read()).hexdigest() == plan.signature.sha256
    except OSError:
        return False


def write_atomic(plan: FilePlan, new_text: str) -> str | None:
    """Replace the file with ``new_text``; None when written, else the reason it was not."""
    target = os.path.realpath(plan.path)  # a symlink stays a symlink; its target gets the new text
    if not _still_as_read(target, plan):
        return "changed on disk since it was read; not overwritten (rerun to retry)"
    data = new_text.encode(plan.encoding)
    folder, name = os.path.split(target)
    try:
        st = os.stat(target)
        mode = stat.S_IMODE(st.st_mode)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=TEMP_SUFFIX)
    except OSError as exc:
        return f"cannot write next to the file: {exc.strerror or exc}"
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
            try:  # keep the owner when we may (root editing a user's checkout)
                os.chown(tmp, st.st_uid, st.st_gid)
            except PermissionError:
                pass
        if not _still_as_read(target, plan):  # checked again right before the rename
            os.unlink(tmp)
            return "changed on disk since it was read; not overwritten (rerun to retry)"
        os.replace(tmp, target)  # atomic: readers see the old file or the new one, never a mix
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            return f"write failed: {exc.strerror or exc}"
        raise
    return None
