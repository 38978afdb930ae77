"""Regenerate selection, fill holes, code actions and quick fixes over the protocol."""

from __future__ import annotations

from lsprotocol import types

from .conftest import command, open_doc, pos, start

URI = "file:///tmp/project/edit.py"
TEXT = "def f(x):\n    y = x + 1\n    return y\n"
SELECTION = types.Range(start=pos(1, 8), end=pos(1, 13))  # `x + 1`


def edits_of(edit: types.WorkspaceEdit) -> list[types.TextEdit]:
    return [e for change in edit.document_changes for e in change.edits]


async def regenerate(client, fake, rule: tuple[str, str], first: int, last: int = 13) -> dict:
    """Regenerate line 1's characters first..last of TEXT, the fake engine filling by `rule`."""
    fake.fim.rules = [rule]
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    return await command(client, "dllm.regenerateSelection", URI, {
        "start": {"line": 1, "character": first}, "end": {"line": 1, "character": last}})


async def test_regenerate_selection_applies_a_workspace_edit(client, fake):
    result = await regenerate(client, fake, ("y = ", "x * 2"), 8)
    assert result["applied"] is True
    [edit] = client.applied_edits
    [text_edit] = edits_of(edit)
    assert text_edit.range == SELECTION and text_edit.new_text == "x * 2"
    sent = fake.fim.seen[-1]
    assert sent.prompt.endswith("    y = ") and sent.suffix.startswith("\n    return y")


async def test_regenerate_writes_the_line_at_the_selections_depth(client, fake):
    """A selection that starts where a line's code starts: the engine may hand back a fill that
    goes deeper than the blanks before it (it keeps that for a span cut inside the indentation),
    but here the user chose the line's depth, and the edit keeps it (the deeper line would not
    parse, and the regenerate would have been dropped)."""
    result = await regenerate(client, fake, ("    ", "    y = x - 1"), 4)
    assert result["applied"] is True
    [text_edit] = edits_of(client.applied_edits[0])
    assert text_edit.new_text == "y = x - 1"


async def test_regenerate_drops_a_fill_that_breaks_the_parse(client, fake):
    result = await regenerate(client, fake, ("y = ", "x * ("), 8)
    assert result == {"applied": False}
    assert client.applied_edits == []


async def test_code_action_resolves_to_an_edit(client, fake):
    fake.fim.rules = [("y = ", "x - 1")]
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), range=SELECTION,
        context=types.CodeActionContext(diagnostics=[])))
    [action] = [a for a in actions if a.title == "Regenerate selection with dllm"]
    assert action.kind == types.CodeActionKind.RefactorRewrite and action.edit is None
    assert fake.fim.seen == []  # listing is free; the engine runs on resolve
    resolved = await client.code_action_resolve_async(action)
    [text_edit] = edits_of(resolved.edit)
    assert text_edit.range == SELECTION and text_edit.new_text == "x - 1"


async def test_quick_fix_from_a_suspicious_token_diagnostic(client, fake):
    await start(client, fake.url)
    open_doc(client, URI, TEXT)
    diagnostic = types.Diagnostic(range=types.Range(start=pos(2, 11), end=pos(2, 12)), message="unlikely",
                                  source="dllm", severity=types.DiagnosticSeverity.Hint, data={"replacement": "x"})
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=URI), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix])))
    [fix] = actions
    assert fix.kind == types.CodeActionKind.QuickFix
    assert list(fix.edit.changes[URI]) == [types.TextEdit(range=diagnostic.range, new_text="x")]


async def test_fill_holes_fills_every_placeholder_in_one_request(client, fake):
    fake.fim.rules = [("def area(r):\n    ", "return 3.14159 * r * r"), ("def perimeter(r):\n    ", "return 2 * 3.14159 * r")]
    await start(client, fake.url)
    text = "def area(r):\n    pass\n\n\ndef perimeter(r):\n    ...\n\n\ndef keep():\n    return 1\n"
    open_doc(client, URI, text)
    result = await command(client, "dllm.fillHoles", URI)
    assert result["applied"] is True
    [edit] = client.applied_edits
    got = sorted((e.range.start.line, e.range.end.line, e.new_text) for e in edits_of(edit))
    assert got == [(1, 2, "    return 3.14159 * r * r\n"), (5, 6, "    return 2 * 3.14159 * r\n")]
    assert len(fake.fim.seen) == 2  # the fake endpoint gets one HTTP request per hole of the batch


async def test_bad_command_arguments_are_an_error_not_a_crash(client, fake):
    await start(client, fake.url)
    try:
        await command(client, "dllm.regenerateSelection", 42)
    except Exception as exc:
        assert "URI" in str(exc)
    else:
        raise AssertionError("expected an error response")
    assert (await command(client, "dllm.engineStatus"))["state"] in ("ready", "loading")
