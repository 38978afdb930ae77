"""Syntax layer: tree-sitter context extraction and output shaping.

Pure functions over text, str offsets (code points) and tree-sitter trees: no
LSP types, no engine types, no torch. Shared by the language server and the
batch refactor command.

- languages.py: the language table, ``language_for``, ``parser_for``, ``grammar_for`` (for queries)
- document_tree.py: ``DocumentTree`` (text + incrementally updated tree)
- context.py: ``completion_context``, ``range_context``, ``with_snippets``
  (windows.py: statement-aligned windows; snippets.py: cross-file snippets)
- shaping.py: ``shape_completion`` (steps in shaping_steps.py, brackets.py, indentation.py)
- parse_check.py: ``new_error_count``
"""
