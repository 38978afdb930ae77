"""Next-edit suggestions in the server: after a didChange, ask the engine for the edit the
user will make next in a region around it, filter it, and deliver it (`dllm/nextEdit`,
inline completion items with a range) until the next keystroke.

- `history.py`: the user's recent edits, coalesced from didChange texts;
- `region.py`: the editable region (tree-sitter nodes, or lines) and renamed names' uses;
- `filters.py`: why a proposal is dropped;
- `params.py`: the custom requests' params, validated strictly;
- `feature.py`: the debounced pipeline, the handlers, accept / reject.
"""
