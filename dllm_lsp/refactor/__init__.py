"""Headless batch refactoring: find holes with tree-sitter recipes, fill them with the engine, write diffs or files.

planner (files -> holes) -> runner (holes -> engine, batched) -> apply (shape, parse check, diff / atomic write)
-> report. `dllm_lsp.commands.refactor` is the CLI on top.
"""
