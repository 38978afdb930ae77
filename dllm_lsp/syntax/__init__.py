"""Syntax layer: tree-sitter context extraction and output shaping (pure functions, no LSP types)."""
