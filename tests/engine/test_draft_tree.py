"""Draft trees (draft_tree.py): the pure tree building and walking, then one pass of a real
(tiny, random, fp32) shifted-logit model checking a tree, against the same model checking
each chain on its own: a branch's logits and the K/V that join the context are the chain's."""

import torch

from dllm_engine.draft_tree import BranchNode, PathStep, build_tree, walk


def test_the_first_chain_is_the_trunk_and_later_chains_add_where_they_leave_it():
    trunk, branches = build_tree([[5, 6, 7], [5, 6, 9], [4, 8], [5, 6, 7]], current=10, room=3)
    assert trunk == [5, 6, 7]
    assert branches == [
        BranchNode(9, 12, -1),  # leaves the trunk after 5 6: hangs off the trunk's row for slot 11
        BranchNode(4, 10, -1),  # leaves it at once
        BranchNode(8, 11, 1),  # then follows its own parent
    ]  # the repeated chain adds nothing


def test_chains_are_cut_to_the_room_and_the_tree_to_its_budget():
    trunk, branches = build_tree([[], [1, 2, 3, 4], [7, 8, 9]], current=0, room=2)
    assert trunk == [1, 2] and branches == [BranchNode(7, 0, -1), BranchNode(8, 1, 0)]
    trunk, branches = build_tree([[1, 2, 3], [7, 8, 9], [6]], current=0, room=3, budget=4)
    assert trunk == [1, 2, 3] and branches == [BranchNode(7, 0, -1)]  # the rest of the budget's worth
    assert build_tree([], 0, 3) == ([], []) and build_tree([[1]], 0, 0) == ([], [])


def test_the_walk_commits_the_longest_path_the_model_agrees_with():
    trunk, branches = build_tree([[5, 6, 7], [5, 6, 9], [4, 8]], current=0, room=3)
    # model: 4 at slot 0, then after branch node 4 (index 1) 8, after node 8 (index 2) 3
    picks_after_trunk = [6, 0, 0]
    branch_picks = [0, 8, 3]
    tokens, path = walk(4, 0, trunk, picks_after_trunk, branches, branch_picks)
    assert tokens == [4, 8, 3] and path == [PathStep(0, 1), PathStep(1, 2)]
    # along the trunk, then off it where the model chose the branch's token
    tokens, path = walk(5, 0, trunk, [6, 9, 0], branches, [2, 0, 0])
    assert tokens == [5, 6, 9, 2] and path == [PathStep(0), PathStep(1), PathStep(2, 0)]
    # the model agrees with nothing: its own token alone
    tokens, path = walk(1, 0, trunk, [6, 7, 8], branches, [0, 8, 3])
    assert tokens == [1] and path == []


def test_a_branch_hanging_off_the_trunk_is_not_reachable_from_another_branch():
    branches = [BranchNode(4, 0, -1), BranchNode(9, 1, -1)]  # 9 hangs off the trunk's row for slot 0
    tokens, path = walk(4, 0, [5], [9], branches, [9, 7])
    assert tokens == [4, 9] and path == [PathStep(0, 0)]  # after branch 4, 9 is the model's, not a draft


# fp32 products of different row counts sum in different orders (GEMM blocking differs by CPU:
# an AMD EPYC differed by 1.5e-5 where an Intel Xeon matched to 1e-5); a wrong mask or K/V
# moves logits by orders of magnitude more.
CLOSE = {"atol": 1e-4, "rtol": 1e-4}


def _runner_and_context(model_dir, prefix_ids):
    from dllm_engine.checkpoint import load
    from dllm_engine.families.family_runner import make_runner

    loaded = load(str(model_dir), "cpu", torch.float32)
    runner = make_runner(loaded, 1 << 26)
    ctx = runner.encode_context(prefix_ids, [11, 12, 13], canvas_room=8)
    return runner, ctx


def test_a_tree_pass_gives_each_branch_the_logits_and_kv_its_own_chain_gets(tiny_shifted_model):
    from dllm_engine.draft_tree import BranchNode

    prefix = [30, 31, 32, 33, 34, 35]
    tree_runner, tree_ctx = _runner_and_context(tiny_shifted_model, prefix)
    chain_runner, chain_ctx = _runner_and_context(tiny_shifted_model, prefix)
    mask = tree_runner.config.mask_token_id
    width = 8
    canvases = torch.full((1, width), mask)
    lens = torch.tensor([width])
    rows = torch.zeros(1, width, dtype=torch.bool)
    rows[0, :3] = True  # the current slot, and the slots after the two draft tokens
    trunk = torch.full((1, width), -1)
    trunk[0, :2] = torch.tensor([40, 41])
    branches = [[BranchNode(50, 0, -1), BranchNode(51, 1, 0), BranchNode(52, 1, -1)]]
    logits, branch_logits = tree_runner.canvas_logits([tree_ctx], canvases, lens, rows, compact=True, absorb=True,
                                                      drafts=trunk, branches=branches)
    assert logits.shape[0] == 3 and branch_logits.shape[0] == 3
    # The same pass with the trunk alone gives the canvas rows' logits unchanged
    alone = chain_runner.canvas_logits([chain_ctx], canvases, lens, rows, compact=True, absorb=True, drafts=trunk)
    chain_runner.last_pass = None
    torch.testing.assert_close(logits, alone, **CLOSE)
    # Chain 50 51 as the trunk: its rows' logits are the branch nodes' 50 and 51
    other = torch.full((1, width), -1)
    other[0, :2] = torch.tensor([50, 51])
    chained = chain_runner.canvas_logits([chain_ctx], canvases, lens, rows, compact=True, absorb=True, drafts=other)
    torch.testing.assert_close(branch_logits[:2], chained[1:], **CLOSE)
    # Chain 40 52 (52 hangs off the trunk's row for slot 0): node 52's logits are its slot 2's
    mixed = torch.full((1, width), -1)
    mixed[0, :2] = torch.tensor([40, 52])
    tree_like = _runner_and_context(tiny_shifted_model, prefix)
    out = tree_like[0].canvas_logits([tree_like[1]], canvases, lens, rows, compact=True, absorb=True, drafts=mixed)
    torch.testing.assert_close(branch_logits[2], out[2], **CLOSE)
    # Commits 50 51 z through the branch: the context that results is the one the chain makes
    committed = canvases.clone()
    committed[0, :3] = torch.tensor([50, 51, 60])
    tree_runner.fold_committed(committed, {0: (0, [PathStep(0, 0), PathStep(1, 1)])})
    chain_runner.fold_committed(committed)
    assert tree_ctx.ids.tolist() == chain_ctx.ids.tolist() and tree_ctx.last_id == chain_ctx.last_id == 60
    assert tree_ctx.absorbed == chain_ctx.absorbed == 3
    torch.testing.assert_close(tree_ctx.kv, chain_ctx.kv, **CLOSE)


def test_an_encode_can_keep_the_last_tokens_hidden_state(tiny_shifted_model):
    """EncodedContext.last_hidden (a draft head's start for a canvas's first pass): the final
    normed hidden state of the context's last cached token, as a full forward computes it,
    and kept for a context the cache serves whole."""
    from dllm_engine import ops

    runner, _ = _runner_and_context(tiny_shifted_model, [1, 2])
    runner.context_hidden = True
    ctx = runner.encode_context([30, 31, 32, 33], [11, 12], canvas_room=8)
    ids = torch.cat((ctx.ids, torch.tensor([ctx.last_id])))[None]
    model = runner.model
    model.keep_hidden = True
    want = torch.zeros_like(ids, dtype=torch.bool)
    want[0, -2] = True  # the row that chose the held-out last token
    model(ids, torch.arange(ids.shape[1])[None], mask=ops.CAUSAL, logits_rows=want, compact=True)
    torch.testing.assert_close(ctx.last_hidden, model.last_hidden[0], **CLOSE)
    again = runner.encode_context([30, 31, 32, 33], [11, 12], canvas_room=8)
    assert again.reused == again.length and again.last_hidden is not None
    torch.testing.assert_close(again.last_hidden, ctx.last_hidden)
    runner.context_hidden = False
    assert runner.encode_context([30, 31, 40], [11, 12], canvas_room=8).last_hidden is None
