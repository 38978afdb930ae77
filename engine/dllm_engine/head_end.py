"""A single line's end on the draft head's word (EngineConfig.head_end_prob).

A greedy fill that stops at a stop string (the language server's single line, a client's
`stop: ["\\n"]`) often ends with a pass that commits nothing but the line break: where the
line's last token was a pass's own (not a checked draft), the token after it needs a pass of
its own. On HumanEval single-line (`tasks[::5]`, the shipped decoding) such last passes were
80 of 1,370. The draft head, run after every pass, already holds a distribution for that
token: where its probability that the next token begins with a stop string (summed over them
all: "\\n", "\\n\\n", "\\n    " ... split the mass) was 0.9 or more, the base's next token
began with one in 61 of 64 cases. So there the fill ends at once, with the
head's likeliest such token; the text before the stop is the same whichever of them ends
it (only tokens that *begin* with a stop string count). The head's own top guess was a
poor signal (at 0.9: 2 passes); the sum over every stop-led token is the good one. The one
place the head decides instead of the base checking it: on all 1,033 tasks 6,407 -> 6,042
passes, 1.93 -> 2.03 fill tokens a pass, 16 lines ending sooner (sums before their last
terms, one-line `if x: return y` at the colon), pass@1 31.5% -> 31.2% (1 won, 4 lost);
benchmarks/RESULTS.md, thirty-seventh session. Not where the fill has opened a bracket it has
not closed (one of the first version's 17 changed lines, `return [max(arr[-k:])`; the rule
costs 7 of the 372 passes it saved): there the base checks the line break as before.
With the shipped base adapter (low_rank.py) the default is 0.8 (forty-second session): all
1,033 tasks 5,262 -> 5,138 passes, 1.99 -> 2.02 fill tokens a pass, 5 fills changed (three
runaway comments end sooner, a trailing space, one name cut short: `special_fact` ->
`special`, wrong either way), pass@1 34.4% either way (0 won, 0 lost); this repository's
held-out lines 1 of 194 changed (a comment's last period), exact 10 = 10.
"""

from __future__ import annotations


def ends_here(end_prob: float, threshold: float) -> bool:
    """Whether a fill ends at the head's guess: its probability of a stop-led token reaches
    `threshold` (0: never)."""
    return threshold > 0 and end_prob >= threshold


def bracket_open(text: str) -> bool:
    """Whether `text` (a fill so far) opens more brackets than it closes: a line that may not
    end there in most languages (a string's brackets count too, which only costs a pass)."""
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth > 0
