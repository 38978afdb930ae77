"""The resident engine: schedule -> run the model -> denoise -> commit, in one thread.

```python
engine = Engine(EngineConfig())            # the embedded default model
result = engine.infill(InfillRequest(holes=[Hole(prefix, suffix)]))
handle = engine.submit(request)             # handle.future, handle.cancel()
```

The engine thread owns the model (it loads it, runs every pass, and serves scoring and
next edit between passes: engine_calls.py); callers on any thread submit requests and
get a `concurrent.futures.Future`. Cancellation and deadlines are checked
between passes.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field

import torch

from .candidates import branch_text, choose, expand, outlasted, sampling_for
from .canvas_rules import advance, fill_tokens, forget_rewritten, remask, stop_slots, stop_token_mask
from .checkpoint import LoadedModel, load
from .context_cache import context_budget_bytes
from .denoise import SpecialIds, denoise_pass, sample_tokens
from .draft_adapter import attach as attach_draft_adapter
from .engine_activity import ActivityLog
from .engine_calls import EngineCalls
from .fill_end import choose_end, chosen_end, settled_end
from .head_end import bracket_open, ends_here
from .dedent_stop import dedent_cut
from .line_cap import line_cap_cut
from .repeat_stop import loop_seen, repeat_cut, typed_indent
from .draft_head import attach as attach_draft_head
from .low_rank import attach as attach_base_adapter
from .draft_tree import walk
from .drafting import accepted_run, canvas_drafts, history_of, long_match, row_drafts
from .cpu_features import native_bf16
from .healing import TokenHealer, heal, unheal
from .heap_trim import HeapTrimmer
from .metrics import EngineMetrics
from .near_context import CatchUp, near_ids
from .row_buckets import bucket_linears
from .protocol import (
    MASK_GLYPH,
    CanvasEvent,
    Hole,
    HoleResult,
    InfillRequest,
    InfillResult,
    ProtocolError,
    RequestCancelled,
    ScoreRequest,
    ScoreResult,
    SettledText,
)
from .scoring import score_span
from .families.defaults import DEFAULTS, defaults_for
from .families.family_runner import make_runner
from .scheduler import ActiveHole, RequestState, Scheduler
from .unsure_stop import unsure_slot
from .start_ban import StartBans, starts_banned
from .suffix_stop import suffix_cut, suffix_head
from .trailing_indent import trailing_indent_cut

log = logging.getLogger("dllm_engine")

# A scoring window waits at most this long for the engine to go idle (Engine.score).
SCORE_PATIENCE_S = 2.0
STOP_CACHE_ENTRIES = 64  # stop-string sets whose token masks are kept (one bool [V] each)


# The draft tree's size by device (EngineConfig.draft_tree_tokens). A CPU pays for every row
# a pass runs, so one chain. On a GPU a pass of a few rows is bound by kernel launches and
# reading the weights once, so a bigger tree costs about nothing (not measured yet: the GPU
# run that would was not lent to the session that built the tree).
DRAFT_TREE_TOKENS = {"cpu": 0, "cuda": 12}


@dataclass
class EngineConfig:
    model: str | None = None  # folder or HF repo id; None: the embedded default model
    device: str = "auto"  # auto: cuda when available, else cpu
    dtype: str = "auto"  # auto: bf16 on cuda and on CPUs with native bf16 (cpu_features.py), else fp32
    max_batch: int = 32  # canvases per pass
    max_queue: int = 256  # waiting requests before EngineBusy
    cache_mb: int | None = None  # context K/V cache budget; None: 32 full contexts of the model, <= 512 (context_cache.py)
    threads: int | None = None  # torch CPU threads (None: torch's default)
    buckets: tuple[int, ...] = (8, 16, 32, 64, 128)
    kernels: str = "auto"  # auto: Triton on CUDA, torch elsewhere; "triton" / "torch" to force
    # Bidirectional families: refresh the approximate context cache every N passes
    # (1 = exact, full recompute each pass; None = the family's recommended schedule).
    refresh_every: int | None = None
    # Token healing (healing.py): trailing blanks and a partial last word of the
    # prefix move into the hole, so every fill starts on a token boundary.
    heal: bool = True
    # "int8": dynamically quantized projections and head on the CPU (quantize.py); "int4":
    # weight-only int4 projections in Q4_1's blocks and an int8 head (weight_only.py);
    # "native": as loaded; "auto": what the model's config asks for on a CPU (its
    # `cpu_weights`: int4 for a base whose GGUF projections are all Q4_1), else native.
    weights: str = "auto"
    # Shifted-logit models decoded in blocks of 1: guess up to this many next tokens from the
    # text and check them in the same pass (drafting.py; greedy output unchanged). 0: off.
    # 3 keeps a pass under weight_only.DENSE_ROWS rows, where the int4 kernel is the fast one
    # (bench_default_decoding.py: 3 drafts 422 ms, 6 559 ms, none 649 ms per cached line).
    draft_tokens: int = 3
    # Draft rows (draft_adapter.py): this many masked slots after the last draft token run in
    # each pass with the model's draft adapter, and their guesses are the next pass's draft
    # when the text has none (greedy output unchanged). 0: off; no effect without an adapter.
    # Off by default: the shipped adapter (420 CPU steps) saved under 1% of passes on
    # bench_default_decoding.py's holes while a pass cost 25-50% more (RESULTS.md, eighth session).
    draft_rows: int = 0
    # The draft adapter: "shipped" (the one in the package for the model's base, if any),
    # "none", or a folder holding draft_adapter.json / .safetensors.
    draft_adapter: str = "shipped"
    # The draft head (draft_head.py): "shipped" (the package's head for the model's base, if
    # any), "none", or a folder holding draft_head.json / .safetensors. After each pass it
    # guesses the next `draft_tokens` tokens from the base's hidden state at the newest
    # committed token (a canvas's first pass: at the context's last token); the next pass
    # checks them (drafting.chains_for). The default model's head (bases/heads/smollm2-135m,
    # trained on one GPU), one chain a pass: HumanEval single-line passes 0.86x, p95 0.76x
    # (benchmarks/RESULTS.md, twenty-seventh session).
    draft_head: str = "shipped"
    # The base's own low-rank adapter (low_rank.py): "shipped" (the package's for the model's
    # base, if any), "none", or a folder holding lora.json / lora.safetensors. It runs beside
    # the projections (a CPU-trained adapter's change rounds away in the int4 blocks).
    base_adapter: str = "shipped"
    # A draft tree (draft_tree.py): each pass checks the text lookup's chains and the draft
    # head's `draft_branches` likeliest chains together, at most `draft_tree_tokens` draft
    # tokens a canvas, and commits the longest the model agrees with (greedy output
    # unchanged). 0: one chain a pass (drafting.chains_for's first: a lookup match of 2+
    # tokens, else the head's, else a 1-token match). None: by device (DRAFT_TREE_TOKENS): on
    # a CPU every row of a pass costs (~4 ms each on 2 cores with int4 weights), and a tree's
    # extra rows cost more than its saved passes (HumanEval single-line: 2.12 fill tokens a
    # pass against 1.81, but 220 against 185 ms a line; benchmarks/RESULTS.md, twenty-eighth
    # session; with the thirty-fourth session's ranking 2.21 against 1.95, 167 against 130 ms).
    draft_branches: int = 3
    draft_tree_tokens: int | None = None
    # A greedy fill with stop strings (a single line) ends without a pass of its own when the
    # draft head gives at least this probability to its next token beginning with a stop
    # string (head_end.py): the pass that would only commit the line break is not run. The
    # one place the head decides instead of checking; 0: off (every token the base's). 0.8
    # since the shipped base adapter (forty-second session): all 1,033 HumanEval lines the
    # same pass@1 as at 0.9 (0 won / 0 lost, 5 fills changed), 2.4% fewer passes.
    head_end_prob: float = 0.8

    def __post_init__(self) -> None:
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.dtype == "auto":  # bf16 on CUDA, and on CPUs that multiply bf16 natively
            self.dtype = "bfloat16" if self.device.startswith("cuda") or native_bf16() else "float32"
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"dtype must be float32, bfloat16 or float16, got {self.dtype!r}")
        if self.kernels not in ("auto", "triton", "torch"):
            raise ValueError(f"kernels must be auto, triton or torch, got {self.kernels!r}")
        if self.weights not in ("auto", "native", "int8", "int4"):
            raise ValueError(f"weights must be auto, native, int8 or int4, got {self.weights!r}")
        if self.draft_tokens < 0:
            raise ValueError(f"draft_tokens must be 0 (off) or more, got {self.draft_tokens!r}")
        if self.draft_rows < 0:
            raise ValueError(f"draft_rows must be 0 (off) or more, got {self.draft_rows!r}")
        if self.draft_tree_tokens is None:
            self.draft_tree_tokens = DRAFT_TREE_TOKENS["cuda" if self.device.startswith("cuda") else "cpu"]
        if self.draft_branches < 1 or self.draft_tree_tokens < 0:
            raise ValueError(f"draft_branches must be 1 or more and draft_tree_tokens 0 (off) or more, "
                             f"got {self.draft_branches!r} and {self.draft_tree_tokens!r}")
        if not 0.0 <= self.head_end_prob <= 1.0:
            raise ValueError(f"head_end_prob must be between 0 (off) and 1, got {self.head_end_prob!r}")
        if self.max_batch < 1 or self.max_queue < 1:
            raise ValueError("max_batch and max_queue must be at least 1")
        self.buckets = tuple(sorted(self.buckets))


@dataclass
class RequestHandle:
    request_id: str
    future: Future
    _state: RequestState = field(repr=False)
    _engine: "Engine" = field(repr=False)

    def cancel(self) -> None:
        self._state.cancelled.set()
        self._engine._wake()

    def result(self, timeout: float | None = None) -> InfillResult:
        return self.future.result(timeout)


def _stopper(ref: "weakref.ref[Engine]"):
    """An exit hook that shuts the engine down if it is still alive (a weak reference: the
    hook keeps no engine alive)."""
    def stop() -> None:
        engine = ref()
        if engine is not None:
            engine.shutdown()
    return stop


class Engine:
    def __init__(self, config: EngineConfig | None = None, loaded: LoadedModel | None = None) -> None:
        """`loaded` serves an already built model (benchmarks with random weights) instead of loading."""
        self.config = config or EngineConfig()
        self._cond = threading.Condition()
        # Scoring, next edit and cache drops run on the engine thread too (engine_calls.py).
        # What the engine thread does, span by span: a request's wait, split by what held it.
        self._activity = ActivityLog()
        self._calls = EngineCalls(self._cond, self._activity)
        self._stopping = False
        # The engine thread loads the model as well as running it: one OpenMP team for all of
        # the model's work (engine_calls.py says why). Load errors are raised here.
        ready: Future = Future()
        self._thread = threading.Thread(target=self._boot, args=(loaded, ready), name="dllm-engine", daemon=True)
        self._calls.owner = self._thread
        self._thread.start()
        ready.result()
        # A process that ends without shutdown() while a pass runs aborted ("terminate called
        # without an active exception": the interpreter finalized under the engine thread's
        # native work); stopping the thread first lets it end between passes.
        self._stop_at_exit = _stopper(weakref.ref(self))
        atexit.register(self._stop_at_exit)

    def _boot(self, loaded: LoadedModel | None, ready: Future) -> None:
        try:
            self._build(loaded)
        except BaseException as exc:
            self._calls.close(RuntimeError("engine failed to start"))
            ready.set_exception(exc)
            return
        ready.set_result(None)
        self._loop()

    def _build(self, loaded: LoadedModel | None) -> None:
        if self.config.threads:
            torch.set_num_threads(self.config.threads)
        t0 = time.perf_counter()
        self.loaded = loaded or load(self.config.model, self.config.device, getattr(torch, self.config.dtype))
        if self.loaded.tokenizer is None:
            raise ProtocolError(f"{self.loaded.path}: no tokenizer.json; the engine needs one to infill text")
        self.loaded.model.use_kernels(None if self.config.kernels == "auto" else self.config.kernels)
        self.draft_rows = 0
        if self.config.draft_rows and self.config.draft_tokens:
            adapter = attach_draft_adapter(self.loaded, self.config.draft_adapter)
            self.draft_rows = min(self.config.draft_rows, adapter.config.rows) if adapter is not None else 0
        self.draft_head = None
        if self.config.draft_tokens and self.config.draft_head != "none":
            self.draft_head = attach_draft_head(self.loaded, self.config.draft_head)
        if hasattr(self.loaded.model, "keep_hidden"):
            self.loaded.model.keep_hidden = self.draft_head is not None
        if hasattr(self.loaded.model, "fuse_projections"):  # q/k/v and gate/up: one GEMM each
            self.loaded.model.fuse_projections()
        self.weights = self._weights_for(self.loaded)
        if self.weights == "int8":
            from .quantize import quantize_int8

            quantize_int8(self.loaded.model)
        elif self.weights == "int4":
            from .weight_only import open_kept_blocks, quantize_int4

            packed = self.loaded.path / f"int4-packed-torch{torch.__version__}-{self.config.dtype}.safetensors"
            with open_kept_blocks(self.loaded.path) as blocks:
                quantize_int4(self.loaded.model, blocks=blocks, packed_file=packed)
        self.base_adapter = attach_base_adapter(self.loaded, self.config.base_adapter,
                                                weight_only=self.weights in ("int8", "int4"))
        if self.draft_head is not None and self.weights in ("int8", "int4"):
            self.draft_head.weight_only()  # its GEMVs through the same CPU kernels as the base's
        bucket_linears(self.loaded.model)  # CPU bf16: a bounded set of row counts, flat memory
        self.load_seconds = time.perf_counter() - t0
        cfg = self.loaded.config
        self.tokenizer = self.loaded.tokenizer
        # The native exact-cache runner, or a family runner (approximate or block cache).
        cache_bytes = (context_budget_bytes(cfg, getattr(torch, self.config.dtype)) if self.config.cache_mb is None
                       else self.config.cache_mb * 2**20)
        self.runner = make_runner(self.loaded, cache_bytes, refresh_every=self.config.refresh_every)
        if hasattr(self.runner, "context_hidden"):  # the head guesses a canvas's first tokens from it
            self.runner.context_hidden = self.draft_head is not None
        if cfg.family in DEFAULTS and cfg.family != "native":
            self.config.buckets = tuple(sorted(defaults_for(cfg.family).buckets))
        ends = [cfg.pad_token_id, cfg.eos_token_id, *cfg.extra.get("end_ids", [])]
        self.special = SpecialIds(
            mask=cfg.mask_token_id,
            # The canonical end (what surplus slots become) first: pad, else EOS.
            end=tuple(dict.fromkeys(i for i in ends if i is not None and i >= 0)),
            banned=tuple(i for i in (cfg.mask_token_id, cfg.suffix_token_id, cfg.prefix_token_id) if i >= 0),
        )
        self.scheduler = Scheduler(self.config.max_batch, self.config.max_queue)
        # Best of N scores fills left to right: a shifted-logit model's own reading order.
        # Other models fill once whatever a request asks (candidates.py).
        self.scores_candidates = bool(getattr(self.runner, "shifted", False)) and hasattr(self.runner, "score_rows")
        self._stop_cache: dict[tuple, torch.Tensor] = {}
        # Draft tokens never run through a layout marker or an end token (drafting.py).
        self._draft_stops = torch.zeros(cfg.vocab_size, dtype=torch.bool)
        self._draft_stops[[*self.special.banned, *self.special.end]] = True
        # Blocks of 1 with drafts: the canvas grows before a draft runs out of slots (advance).
        self._draft_ahead = self.config.draft_tokens if getattr(self.runner, "block", 0) == 1 else 0
        self.healer = TokenHealer(self.tokenizer, cfg.vocab_size, self.runner.device) if self.config.heal else None
        self._start_bans: StartBans | None = None  # Hole.banned_starts' token masks, built on first use
        self.metrics = EngineMetrics()
        self._heap = HeapTrimmer()
        # The whole context of a place first answered from its near part (Hole.near_tokens).
        self._catch_up = CatchUp(self.runner)

    def _weights_for(self, loaded: LoadedModel) -> str:
        """The weights this engine runs: as configured, or under "auto" the model's own CPU
        choice (config extra `cpu_weights`) where this torch has its kernels."""
        if self.config.weights != "auto":
            return self.config.weights
        if self.config.device != "cpu":
            return "native"
        wanted = loaded.config.extra.get("cpu_weights", "native")
        if wanted == "int4":  # an fp32 model too: the kernels run in bf16 (weight_only.kernel_dtype)
            from .weight_only import int4_available

            return "int4" if int4_available() else "native"
        return "native"

    # ------------------------------------------------------------ public API

    @property
    def model_name(self) -> str:
        return self.loaded.name

    def submit(self, request: InfillRequest, on_event=None, on_settled=None) -> RequestHandle:
        """`on_event(CanvasEvent)`: each intermediate canvas (when `request.stream`);
        `on_settled(SettledText)`: each hole's settled run after every pass but its last
        (token streaming; final only with `remask_below` 0). Both run on the engine thread."""
        request.validate()
        n = request.params.candidates if self.scores_candidates else 1
        if n > 1 and on_settled is not None:
            raise ProtocolError("a request with candidates > 1 cannot stream its text: the fill is chosen at the end")
        state = RequestState(request=expand(request, n) if n > 1 else request, future=Future(),
                             on_event=on_event, on_settled=on_settled, candidates=n, holes=request.holes)
        with self._cond:
            if self._stopping:
                raise RuntimeError("engine is shut down")
            self.scheduler.add(state)  # may raise EngineBusy
            self._catch_up.heard()
            self._cond.notify()
        return RequestHandle(request.request_id, state.future, state, self)

    def infill(self, request: InfillRequest, timeout: float | None = None) -> InfillResult:
        return self.submit(request).result(timeout)

    def score(self, request: ScoreRequest) -> ScoreResult:
        """Token-by-token likelihood of existing code (see scoring.py): one call per window of
        the span, between passes; for a `background` request (the language server's hints) each
        once no request is waiting or running (at most SCORE_PATIENCE_S later): a window that met
        a keystroke's request delayed it by the window's ~0.1 s (the keystroke replay's
        single-line p95 168 -> 249-264 ms)."""
        request.validate()
        if not request.background:
            return score_span(self, request, call=lambda fn: self._calls.call(fn, "scoring"))
        return score_span(self, request, call=lambda fn: self._calls.call_when_idle(fn, self.idle, SCORE_PATIENCE_S,
                                                                                   "scoring"))

    def idle(self) -> bool:
        """On the engine thread: no request waiting or running (background work goes now)."""
        return not self.scheduler.active and not self.scheduler.queue_depth

    def between_passes(self, fn, kind: str = "calls"):
        """fn() on the engine thread between two passes, its result returned here: for work
        that runs the model outside a request's passes (next edit's streams); `kind` names it
        in what a request's wait is split into (`InfillResult.queued_for`)."""
        return self._calls.call(fn, kind)

    def prepare(self, request, cancel=None):
        """Encode a place's context into the cache before a request comes there (prepare.py:
        a `PrepareRequest` in, a `PrepareResult` out); blocks the calling thread, stops for any
        request and when `cancel` (a threading.Event) is set."""
        from .prepare import prepare_context

        return prepare_context(self, request, cancel)

    def next_edit(self, request, cancel=None):
        """The edit the user will make next (`next_edit/service.py`: a `NextEditRequest` in, a
        `NextEditResult` out); blocks the calling thread, `cancel` (a threading.Event) stops it."""
        from .next_edit.service import propose

        return propose(self, request, cancel)

    def health(self) -> dict:
        return {
            "status": "ok",
            "model": self.model_name,
            "device": self.config.device,
            "dtype": self.config.dtype,
            "weights": self.weights,
            "parameters": self.loaded.config.num_params,
            "load_seconds": round(self.load_seconds, 3),
            # What runs beside the base's weights (the shipped adapter changes every fill).
            "base_adapter": None if not self.base_adapter else {
                "rank": self.base_adapter["rank"], "targets": self.base_adapter["targets"],
                "steps": self.base_adapter.get("trained", {}).get("steps")},
            **self.metrics.snapshot(self.scheduler.queue_depth, len(self.scheduler.active), self.runner.cache),
        }

    def drop_caches(self) -> None:
        """Forget every cached context and batch buffer (benchmarks that measure a cold start)."""
        def drop() -> None:
            if self.runner.cache is not self.runner:  # family runners keep nothing past the batch
                self.runner.cache.clear()
            self.runner.forget_batch()
            self._catch_up.forget()  # nor encode one behind the caller's back

        self._calls.call(drop)

    def shutdown(self) -> None:
        atexit.unregister(self._stop_at_exit)
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout=10)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    # ------------------------------------------------------------ engine loop

    def _loop(self) -> None:
        torch.set_grad_enabled(False)
        while True:
            with self._cond:
                while (not self._stopping and self.idle() and not self._calls.pending()
                       and not self._catch_up.due()):
                    self._trim_heap()  # a burst's freed heap back to the OS
                    self._cond.wait(timeout=self._catch_up.wait_s(1.0))
                if self._stopping:
                    break
                admissions = self.scheduler.next_admissions()
            self._calls.run_pending()
            try:
                if not admissions and self.idle() and self._catch_up.due():
                    self._catch_up_step()
                    continue
                self._drop_cancelled()
                batch = any(state.request.priority == "batch" for state, _ in admissions)
                with self._activity.span("batch encoding" if batch else "encoding"):
                    self._admit_all(admissions)
                if self.scheduler.active:
                    with self._activity.span("passes"):
                        self._step()
                    self._trim_heap()  # and every few seconds while busy
            except Exception as exc:  # never let one bad pass kill the resident engine
                log.exception("engine pass failed")
                for active in list(self.scheduler.active):
                    self._fail(active.state, exc)
        self._calls.close(RuntimeError("engine is shut down"))
        for state in self.scheduler.waiting_states() + [a.state for a in self.scheduler.active]:
            self._fail(state, RuntimeError("engine shut down"))

    def _trim_heap(self) -> None:
        start = time.monotonic()
        if self._heap.maybe_trim(self._work_done()):
            self._activity.record("heap trim", start, time.monotonic())

    def _work_done(self) -> int:
        """Passes and calls served (next edit's forwards, scoring) so far: what the heap trimmer
        counts, since a burst of either leaves freed heap behind."""
        return self.metrics.passes + self._calls.served

    def _admit_all(self, admissions: list[tuple[RequestState, int]]) -> None:
        """Tokenize every admitted hole, encode their contexts together where the runner
        can (one padded forward for the fresh ones), then put them on canvases.

        Whatever one request raises here fails that request alone (`_fail_admission`):
        the loop's own handler fails every active canvas, and a request that is not
        active yet would keep a future that never completes."""
        prepared = []
        for state, index in admissions:
            if state.future.done():
                continue
            if state.started is None:
                state.started = time.monotonic()
                state.queued_for = self._activity.overlap(state.submitted, state.started)
            try:
                prepared.append((state, index, *self._tokenize(state.request.holes[index])))
            except Exception as exc:
                self._fail_admission(state, index, exc)
        if not prepared:
            return
        prepared = [self._near(p) for p in prepared]
        for (state, index, _, _, typed, healed, first_allowed), ctx in zip(prepared, self._encode_all(prepared)):
            if isinstance(ctx, Exception):
                self._fail_admission(state, index, ctx)
                continue
            # Counted here, not on activation: a request superseded while its context was encoded
            # (a new place's first keystrokes) still had it encoded, and its K/V are kept.
            self.metrics.context_encoded(ctx.length - ctx.reused)
            if not state.future.done():
                try:
                    self._activate(state, index, ctx, typed, healed, first_allowed)
                except Exception as exc:
                    self._fail_admission(state, index, exc)

    def _tokenize(self, hole: Hole) -> tuple:
        prefix, typed = heal(hole.prefix) if self.config.heal else (hole.prefix, "")
        prefix_ids = self.tokenizer.encode(prefix)
        healed, first_allowed = "", None
        if self.healer is not None:  # after typed blanks only a line break is healed (a new line's indentation)
            prefix_ids, healed, first_allowed = self.healer.back_up(prefix_ids, self.tokenizer.decode,
                                                                    words=not typed, indent=typed)
        return prefix_ids, self.tokenizer.encode(hole.suffix), typed, healed, first_allowed

    def _near(self, prepared: tuple) -> tuple:
        """A prepared hole with the near part of its context in place of the whole, where it asks
        for that (Hole.near_tokens) and the near part is the less to encode; the whole is then
        encoded while the engine is idle (near_context.py)."""
        state, index, prefix_ids, suffix_ids, *rest = prepared
        hole = state.request.holes[index]
        # Best of N and a fill whose end is chosen read the fill again against the whole
        # context, which would then be encoded before the answer anyway.
        if (hole.near_tokens is None or state.request.priority != "interactive" or state.candidates > 1
                or (self.scores_candidates and chosen_end(hole) is not None)):
            return prepared
        try:
            near_prefix, near_suffix, whole = near_ids(self.runner, prefix_ids, suffix_ids, hole.near_tokens)
        except ProtocolError:  # a context too long for the model: its encoding says so, to this request alone
            return prepared
        if whole is None:
            # Read whole: at this place the catch-up is done or no cheaper, and a pending one is
            # another place's, which the user has left (its chunks would only hold keystrokes up).
            self._catch_up.forget()
            return prepared
        state.near_holes += 1
        self._catch_up.want(whole)
        return (state, index, near_prefix, near_suffix, *rest)

    def _catch_up_step(self) -> None:
        """One chunk of the near-read place's whole context, the engine idle (near_context.py)."""
        with self._activity.span("catch-up"):
            encoded = self._catch_up.step()
        if encoded:
            self.metrics.context_encoded(encoded)

    def _encode_all(self, prepared: list) -> list:
        """One context (or the exception it raised) per prepared hole."""
        batch_encode = getattr(self.runner, "encode_contexts", None)
        if batch_encode is not None:
            try:
                return batch_encode([(p[2], p[3], p[0].request.holes[p[1]].max_tokens) for p in prepared])
            except Exception:  # one hole broke the batch: encode one at a time, so only it fails
                log.exception("batched context encoding failed; encoding one at a time")
        contexts = []
        for state, index, prefix_ids, suffix_ids, *_ in prepared:
            try:
                contexts.append(self.runner.encode_context(prefix_ids, suffix_ids,
                                                           state.request.holes[index].max_tokens))
            except Exception as exc:
                contexts.append(exc)
        return contexts

    def _fail_admission(self, state: RequestState, index: int, exc: Exception) -> None:
        """Fail one request whose hole could not be admitted, saying which hole and why."""
        hole = state.request.holes[index]
        if isinstance(exc, ProtocolError):
            error: Exception = ProtocolError(f"hole {index}: {exc}")
        elif any(_lone_surrogate(getattr(hole, name, "")) for name in ("prefix", "suffix")):
            error = ProtocolError(f"hole {index}: prefix or suffix holds a lone UTF-16 surrogate, "
                                  "which is not text any tokenizer can encode")
        else:  # a bug, not the caller's fault: log it with its traceback, answer the request anyway
            log.error("admitting hole %d of request %s failed", index, state.request.request_id, exc_info=exc)
            error = RuntimeError(f"hole {index} could not be admitted: {type(exc).__name__}: {exc}")
        self._fail(state, error)

    def _activate(self, state: RequestState, index: int, ctx, typed: str, healed: str, first_allowed) -> None:
        hole = state.request.holes[index]
        state.context_tokens += ctx.length
        state.cached_tokens += ctx.reused
        length = hole.bucket or self._bucket_for(hole.max_tokens)
        length = min(length, hole.max_tokens)
        params = state.request.params
        gen = None
        n = state.candidates
        branch = n > 1 and bool(branch_text(state.holes[index // n], hole))
        temperature = sampling_for(index, n, params.temperature, branch)
        if temperature > 0:
            gen = torch.Generator(device=self.runner.device).manual_seed(params.seed * 1000003 + index)
        canvas = torch.full((length,), self.special.mask, dtype=torch.long, device=self.runner.device)
        self.scheduler.active.append(ActiveHole(
            state=state, index=index, context=ctx, canvas=canvas, max_tokens=hole.max_tokens,
            generator=gen, temperature=temperature, remask_budget=hole.max_tokens if params.remask_below > 0 else 0,
            stop_ids=self._stop_ids(hole.stop) if hole.stop else None, typed=typed,
            indenting=bool(typed) and typed_indent(hole.prefix) == typed,
            healed=healed, first_allowed=first_allowed,
            first_stop_ids=self._first_stop_ids(hole.stop, healed, first_allowed) if hole.stop and healed else None,
            start_ban=self._start_ban(hole, healed),
            suffix_head=suffix_head(hole.suffix) if hole.stop_at_suffix else None,
            chosen_end=chosen_end(hole) if self.scores_candidates else None,
        ))
        self._first_head_draft(self.scheduler.active[-1])

    def _start_ban(self, hole: Hole, healed: str) -> torch.Tensor | None:
        """bool [V] for Hole.banned_starts (start_ban.py), or None. After a healed partial word
        the fill continues that word: it is no fill's start."""
        if not hole.banned_starts or healed.strip():
            return None
        if self._start_bans is None:
            vocab = self.loaded.config.vocab_size
            texts = (self.healer.texts if self.healer is not None
                     else [self.tokenizer.decode([i]) for i in range(min(vocab, self.tokenizer.vocab_size))])
            self._start_bans = StartBans(texts, vocab, self.runner.device)
        return self._start_bans.vocab(hole.banned_starts)

    def _first_stop_ids(self, stop: tuple[str, ...], healed: str, allowed: torch.Tensor) -> torch.Tensor:
        """bool [V]: the tokens slot 0 may take whose text past the healed part holds a stop string
        (kept per (stop set, healed text), like _stop_ids: every keystroke on a fresh line asks again)."""
        key = (stop, "\0" + healed)
        cached = self._stop_cache.get(key)
        if cached is None:
            cached = torch.zeros_like(allowed)
            for i in allowed.nonzero().squeeze(-1).tolist():
                if any(s in self.tokenizer.decode([i])[len(healed):] for s in stop):
                    cached[i] = True
            if len(self._stop_cache) >= STOP_CACHE_ENTRIES:
                self._stop_cache.pop(next(iter(self._stop_cache)))
            self._stop_cache[key] = cached
        return cached

    def _stop_ids(self, stop: tuple[str, ...], leading: bool = False) -> torch.Tensor:
        """bool [V]: the tokens whose text holds a stop string (`leading`: begins with one;
        stop_token_mask), computed once per stop set."""
        key = (stop, leading)
        cached = self._stop_cache.get(key)
        if cached is None:
            cached = stop_token_mask(stop, self.tokenizer, self.loaded.config.vocab_size, self.special,
                                     self.runner.device, leading)
            if len(self._stop_cache) >= STOP_CACHE_ENTRIES:  # a budget: clients choose stop strings freely
                self._stop_cache.pop(next(iter(self._stop_cache)))
            self._stop_cache[key] = cached
        return cached

    def _bucket_for(self, max_tokens: int) -> int:
        return min(self.config.buckets[0], max_tokens)

    def _drop_cancelled(self) -> None:
        now = time.monotonic()

        def expired(s: RequestState) -> bool:
            return s.cancelled.is_set() or (s.deadline is not None and now >= s.deadline)

        for state in self.scheduler.drop_waiting(expired):
            self._finish_early(state, now)
        for active in list(self.scheduler.active):
            if expired(active.state):
                self._finish_early(active.state, now)

    def _finish_early(self, state: RequestState, now: float) -> None:
        if state.cancelled.is_set():
            self.metrics.request_cancelled()
            self._fail(state, RequestCancelled(f"request {state.request.request_id} cancelled"))
            return
        for active in [a for a in self.scheduler.active if a.state is state]:
            self._finish_hole(active, "deadline")
        for i in state.pending_holes:
            state.results[i] = HoleResult(text="", finish_reason="deadline", passes=0, tokens=0)
        state.pending_holes.clear()
        self._complete(state)

    # --------------------------------------------------------------- one pass

    def _step(self) -> None:
        """One denoising pass for every active canvas: one batched forward per width class.

        Canvases are padded to the widest in their batch; grouping by width class
        (next power of two) keeps a 128-token block fill from making every
        16-token line fill pay for 128 slots.
        """
        groups: dict[tuple[int, bool], list[ActiveHole]] = {}
        for a in self.scheduler.active:
            groups.setdefault((width_class(a.canvas.numel()), self._delayed(a)), []).append(a)
        finished = []
        for key in sorted(groups):
            finished += self._step_group(groups[key], delayed=key[1])
        for a, reason in finished:
            self._finish_hole(a, reason)
            if a.state.done:
                self._complete(a.state)

    def _delayed(self, a: ActiveHole) -> bool:
        """Whether this canvas runs with the delayed canvas cache (see DiffusionParams.canvas_cache):
        asked for, a runner that has it, and no re-masking (which reads every slot's logits)."""
        return (a.params.canvas_cache == "delayed" and a.params.remask_below == 0
                and hasattr(self.runner, "canvas_logits_delayed") and getattr(self.runner, "delayed_ok", True))

    def _step_group(self, active: list[ActiveHole], delayed: bool = False) -> list[tuple[ActiveHole, str]]:
        t0 = time.perf_counter()
        lengths = torch.tensor([a.canvas.numel() for a in active], device=self.runner.device)
        width = int(lengths.max())
        canvases = torch.full((len(active), width), self.special.end[0], dtype=torch.long, device=self.runner.device)
        for row, a in enumerate(active):
            canvases[row, : a.canvas.numel()] = a.canvas
        valid = torch.arange(width, device=self.runner.device)[None] < lengths[:, None]
        params = [a.params for a in active]
        masked = (canvases == self.special.mask) & valid
        # Block decoding: only the slots of each canvas's current block may be committed.
        window = self.runner.decode_window(canvases, masked) if hasattr(self.runner, "decode_window") else None
        if window is not None:
            masked &= window
        # The LM head only where a token may be committed, unless re-masking needs every slot.
        rows = None if any(p.remask_below > 0 for p in params) else masked
        compact = rows is not None and getattr(self.runner, "compact_logits", False)  # [M, V]: masked slots only
        drafts = checked = probes = branches = None
        drafting = window is not None and compact and not delayed and self.config.draft_tokens and self.runner.block == 1
        if drafting:
            tree = self._tree_tokens()
            if tree:
                drafts, branches = canvas_drafts(active, canvases, window, self.special.mask,
                                                 self.config.draft_tokens, self._draft_stops, tree)
                if branches is not None and not any(branches):
                    branches = None  # no canvas has a second guess: a plain pass
            else:
                drafts = canvas_drafts(active, canvases, window, self.special.mask, self.config.draft_tokens,
                                       self._draft_stops)
            if self.draft_rows:
                drafts, probes = row_drafts(active, canvases, window, drafts, self.config.draft_tokens,
                                            self.draft_rows)
        if drafts is not None:  # the pass also gives the logits of the slot after each draft token
            checked = torch.zeros_like(masked)
            checked[:, 1:] = drafts[:, :-1] >= 0
            rows = masked | checked
        if probes is not None:  # and of the slots after the draft rows (masked slots, run adapted)
            rows = rows | probes
        canvas_kv = fresh = head_rows = None
        if delayed:
            fresh = valid.clone()
            for row, a in enumerate(active):
                if a.frozen is not None:
                    fresh[row, : a.frozen.numel()] &= ~a.frozen
            logits, canvas_kv = self.runner.canvas_logits_delayed(
                [a.context for a in active], canvases, lengths, masked, fresh, [a.canvas_kv for a in active])
            self._ban_starts(logits, canvases, None, masked, active, compact=True)
        else:  # absorb: under block decoding, finished blocks join each hole's own context
            extra = {"absorb": True} if window is not None else {}
            if compact:
                extra["compact"] = True
            if drafts is not None:
                extra["drafts"] = drafts
            if probes is not None:
                extra["draft_rows"] = True
            if branches is not None:
                extra["branches"] = branches
            logits = self.runner.canvas_logits([a.context for a in active], canvases, lengths, rows, **extra)
            branch_logits = None
            if branches is not None:
                logits, branch_logits = logits
            head_rows = (rows, self.runner.model.last_hidden) if drafting and self.draft_head is not None else None
            if probes is not None:  # the compact rows of the draft rows' slots, set aside
                probe_logits = logits[probes[rows]]
                own_or_checked = ~probes[rows]
                logits = logits[own_or_checked]
                rows = rows & ~probes
            self._ban_starts(logits, canvases, drafts, rows if compact else masked, active, compact)
            if drafts is not None:  # split the compact rows: the current slots, then the checked ones
                own = masked[rows]
                logits, draft_logits = logits[own], logits[~own]
        healed = [row for row, a in enumerate(active) if a.first_allowed is not None]
        if healed:  # a healed prefix: while slot 0 is masked, its token must extend the backed-up word
            self._restrict_first_slot(logits, canvases, masked, active, healed, compact or delayed)
        out = denoise_pass(
            logits, canvases, valid, self.special,
            threshold=torch.tensor([p.threshold for p in params], device=self.runner.device),
            temperature=[a.temperature for a in active],
            top_p=[p.top_p for p in params],
            confidence_kind=[p.confidence for p in params],
            generators=[a.generator for a in active],
            with_token_prob=rows is None,  # re-masking reads the committed tokens' probabilities
            force=None if self.config.kernels == "auto" else self.config.kernels,
            window=window,
        )
        last_pass = torch.tensor([p.max_passes is not None and a.passes + 1 >= p.max_passes
                                  for a, p in zip(active, params)], device=self.runner.device)
        commit = out.commit | (masked & last_pass[:, None])  # the pass cap commits what is left
        new_canvases = torch.where(commit, out.tokens, canvases)
        committed_prob = out.picked_prob
        paths = {}
        if drafts is not None:
            paths = self._accept_drafts(drafts, draft_logits, checked, window, commit, new_canvases, active,
                                        committed_prob, branches, branch_logits)
        if probes is not None:
            self._keep_row_drafts(active, probes, probe_logits, new_canvases)
        head_ends = {}  # {canvas: (slot, token)}: fills the draft head ends after this pass's tokens
        if head_rows is not None and head_rows[1] is not None:
            head_ends = self._keep_head_drafts(active, window, commit, new_canvases, *head_rows, branches, paths)
        if window is not None and not delayed and hasattr(self.runner, "fold_committed"):
            # the pass's committed rows join their contexts (a branch's rows where it carried them)
            self.runner.fold_committed(new_canvases, paths or None)
        committed = commit.sum(-1).tolist()
        for row in head_ends:
            committed[row] += 1
        # Block decoding never re-masks a committed slot: once a healed hole's slot 0 holds its
        # token, the restriction of that slot is spent (it was applied every pass after, ~1.5%
        # of a fill's time on a CPU).
        first_done = commit[:, 0].tolist() if healed and window is not None else None
        self.metrics.pass_done(len(active), sum(committed), time.perf_counter() - t0)
        finished = []
        for row, a in enumerate(active):
            a.passes += 1
            a.committed_per_pass.append(int(committed[row]))
            if first_done is not None and first_done[row]:
                a.first_allowed = None
            n = a.canvas.numel()
            if delayed:  # keep the K/V of slots that went in committed; a slot committed now is kept next pass
                a.canvas_kv = canvas_kv[:, :, row, :, :n]  # a view: the next pass of this batch updates it
                went_in_committed = fresh[row, :n] & ~masked[row, :n]
                a.frozen = went_in_committed if a.frozen is None else a.frozen | went_in_committed
            a.canvas = self.runner.edit_canvas(new_canvases[row, :n].clone(), commit[row, :n], a.max_tokens)
            if self._unsure(a, commit[row, :n], committed_prob[row, :n]):
                finished.append((a, "unsure"))
                continue
            if row in head_ends:  # after the fold: the slot's row ran no such token, and the fill ends here
                slot, token = head_ends[row]
                a.canvas[slot] = token
            if a.remask_budget > 0 and window is None:  # a finished block is final (and may be in the context)
                remask(a, self.special, out.token_prob[row], commit[row])
            reason = advance(a, self.special, self._draft_ahead) or self._stop_rule(a) or ("cancelled" if outlasted(a) else None)
            if a.start_ban is not None and not self._start_bans.live(a.canvas, self.special.mask):
                a.start_ban = None  # the fill began with text that is allowed
            forget_rewritten(a, new_canvases[row, :n])
            if reason:
                finished.append((a, reason))
                continue
            if a.state.on_event is not None:
                self._emit(a)
            if a.state.on_settled is not None:
                self._emit_settled(a)
        return finished

    def _unsure(self, a: ActiveHole, committed: torch.Tensor, probs: torch.Tensor) -> bool:
        """Hole.min_token_prob (unsure_stop.py): when this pass committed a token of the fill
        under it, end the canvas before that token and say so."""
        floor = a.state.request.holes[a.index].min_token_prob
        if floor is None or a.canvas.numel() != committed.numel():  # (a length-editing family: no slot map)
            return False
        ends = torch.zeros_like(committed)
        for end_id in self.special.end:
            ends |= a.canvas == end_id
        if a.stop_ids is not None:  # as advance() reads them
            ends |= stop_slots(a, self.special)
        slot = unsure_slot(committed, probs, ends, floor)
        if slot is None:
            return False
        a.canvas[slot:] = self.special.end[0]  # the fill's text is what came before it (fill_tokens)
        return True

    def _tree_tokens(self) -> int:
        """The most draft tokens a canvas's draft tree holds this pass; 0: one chain (no draft
        tree: turned off, or draft rows, which run after a single chain)."""
        return 0 if self.draft_rows else self.config.draft_tree_tokens

    def _accept_drafts(self, drafts, draft_logits, checked, window, commit, new_canvases, active, probs,
                       branches=None, branch_logits=None) -> dict:
        """Commit, after each canvas's current slot, the model's greedy tokens (a sampling
        canvas's draws) for as long as the draft agreed with them (drafting.accepted_run), in
        place in `commit` / `new_canvases`, with their probabilities under the model in `probs`.
        Slot c + j + 1's logits came from the row holding draft token j, so they hold only
        while every draft token before them matched the model's choice. A canvas with draft-tree
        `branches` follows the longest path of the tree the model agrees with (draft_tree.walk).
        Returns {canvas: (current slot, path)} for the canvases whose commits left the trunk."""
        sub = draft_logits.float()
        if self.special.banned:
            sub[:, list(self.special.banned)] = float("-inf")
        picks = sub.argmax(-1)  # row-major over `checked`
        rows_of = checked.nonzero(as_tuple=True)[0].tolist()
        # A sampling canvas draws each checked slot's token from its own distribution instead
        # (the same generator as its passes): a draft token is kept while the draws agree with
        # it, which is a sample from the model exactly as one token per pass would be.
        for row, a in enumerate(active):
            if a.temperature > 0:
                sel = torch.tensor([i for i, r in enumerate(rows_of) if r == row], dtype=torch.long)
                if sel.numel():
                    logp = (sub[sel] / a.temperature).log_softmax(-1)
                    picks[sel.to(picks.device)] = sample_tokens(logp, a.temperature, a.params.top_p, a.generator)
        # The drafted tokens' probabilities, for Hole.min_token_prob only (a softmax over the vocabulary a row)
        gated = any(a.state.request.holes[a.index].min_token_prob is not None for a in active)
        picked_prob = (sub.gather(-1, picks[:, None]).squeeze(-1) - sub.logsumexp(-1)).exp() if gated else None
        picks = picks.tolist()
        branch_picks, branch_prob = self._branch_picks(branch_logits, gated)
        current = window.float().argmax(-1).tolist()
        drafted = (drafts >= 0).sum(-1).tolist()
        at = node_at = 0
        paths = {}
        for row in range(drafts.shape[0]):
            k = drafted[row]
            nodes = branches[row] if branches is not None else []
            first_node, node_at = node_at, node_at + len(nodes)
            if not k:
                continue
            c = current[row]
            mine = picks[at:at + k]
            at += k
            assert rows_of[at - 1] == row  # the compact rows come canvas by canvas
            if not bool(commit[row, c]):
                continue
            trunk = drafts[row, c:c + k].tolist()
            if nodes:
                model, path = walk(int(new_canvases[row, c]), c, trunk, mine, nodes,
                                   branch_picks[first_node:node_at])
                n = len(model)
                if any(step.branch >= 0 for step in path):
                    paths[row] = (c, path)
            else:
                model, path = [int(new_canvases[row, c]), *mine], None
                n = accepted_run(model, trunk)
            if n > 1:
                new_canvases[row, c + 1:c + n] = torch.tensor(model[1:n], device=new_canvases.device)
                commit[row, c + 1:c + n] = True
                if picked_prob is not None:
                    if path is None:
                        probs[row, c + 1:c + n] = picked_prob[at - k:at - k + n - 1]
                    else:  # each committed token's probability from the row that chose it
                        probs[row, c + 1:c + n] = torch.stack([
                            picked_prob[at - k + step.slot - c] if step.branch < 0
                            else branch_prob[first_node + step.branch] for step in path]).to(probs.dtype)
        return paths

    def _branch_picks(self, branch_logits, gated: bool) -> tuple[list[int], torch.Tensor | None]:
        """The model's greedy token after each draft-tree branch node (and its probability when
        some hole is gated by min_token_prob)."""
        if branch_logits is None or not branch_logits.shape[0]:
            return [], None
        sub = branch_logits.float()
        if self.special.banned:  # (out of place: the pass's logits are inference tensors)
            banned = torch.zeros(sub.shape[-1], dtype=torch.bool, device=sub.device)
            banned[list(self.special.banned)] = True
            sub = sub.masked_fill(banned, float("-inf"))
        picks = sub.argmax(-1)
        prob = (sub.gather(-1, picks[:, None]).squeeze(-1) - sub.logsumexp(-1)).exp() if gated else None
        return picks.tolist(), prob

    def _keep_row_drafts(self, active, probes, probe_logits, new_canvases) -> None:
        """Each canvas's draft rows' greedy guesses become its next pass's draft, when the
        slots before them are all committed now (the rows read the drafts as they stood: a
        rejected draft token makes every guess after it moot)."""
        sub = probe_logits.float()
        sub[:, list(self.special.banned)] = float("-inf")
        picks = sub.argmax(-1)
        stops = self._draft_stops[picks.cpu()].tolist()
        picks = picks.tolist()
        at = 0
        for row, a in enumerate(active):
            slots = probes[row].nonzero().squeeze(-1).tolist()
            mine, stop = picks[at:at + len(slots)], stops[at:at + len(slots)]
            at += len(slots)
            a.row_draft = None
            if not slots or bool((new_canvases[row, :slots[0]] == self.special.mask).any()):
                continue
            n = stop.index(True) if True in stop else len(mine)
            if n:
                a.row_draft = (slots[0], mine[:n])

    def _keep_head_drafts(self, active, window, commit, new_canvases, rows, hidden, branches=None,
                          paths=None) -> dict[int, tuple[int, int]]:
        """The draft head's guesses after each greedy canvas's newest committed token become
        its next pass's draft (drafting.canvas_drafts): from the base's hidden state at the
        row that chose that token (`hidden`: the pass's compact rows of `rows`, then its
        draft-tree branch nodes', canvas by canvas). With a draft tree, the head's
        `draft_branches` likeliest chains; without one, its best chain, and none when the
        next pass drafts from a text match of 2+ tokens anyway (drafting.long_match).
        Returns {canvas: (slot, token)} for the fills the head ends at that slot
        (EngineConfig.head_end_prob, head_end.py)."""
        index = torch.full(rows.shape, -1, dtype=torch.long)
        index[rows.cpu()] = torch.arange(int(rows.sum()))
        node_base, at = [], int(rows.sum())  # where each canvas's branch nodes' states start
        for nodes in branches or [[] for _ in active]:
            node_base.append(at)
            at += len(nodes)
        tree = self._tree_tokens() > 0
        current = window.float().argmax(-1).tolist()
        picked, holes, bans, ends = [], [], [], []
        for row, a in enumerate(active):
            a.head_draft = None
            c, n = current[row], a.canvas.numel()
            if a.temperature > 0 or a.context.ids is None or int(window[row].sum()) != 1 or not bool(commit[row, c]):
                continue
            run = int(commit[row, c:n].int().cumprod(0).sum())  # slots committed in a row from c
            last = c + run - 1
            if last + 1 >= n or bool(self._draft_stops[int(new_canvases[row, last])]):
                continue
            chose = int(index[row, last])  # the row before slot `last`: the trunk's (or the current slot's)
            if paths and row in paths and last > c and paths[row][1][last - c - 1].branch >= 0:
                chose = node_base[row] + paths[row][1][last - c - 1].branch  # a branch node's
            if chose < 0:
                continue
            end = self._head_end_ids(a, new_canvases[row, :last + 1], c)
            # the next pass drafts from the text: no chain needed (the head costs ~2 ms a hole;
            # one step, ~0.3 ms, where only the end is asked)
            chain = tree or not long_match(history_of(a, new_canvases[row], last + 1), self._draft_stops)
            if not chain and end is None:
                continue
            picked.append(chose)
            holes.append((a, row, last, int(new_canvases[row, last]), n - last - 2 if chain else 1, chain))
            # an empty body's ban holds while the fill so far is blank (its line break)
            bans.append(a.start_ban if a.start_ban is not None
                        and self._start_bans.all_blank(new_canvases[row, :last + 1]) else None)
            ends.append(end)
        if not holes:
            return {}
        at = torch.tensor(picked, device=hidden.device)
        tokens = torch.tensor([token for _, _, _, token, _, _ in holes], device=hidden.device)
        rooms = [room for _, _, _, _, room, _ in holes]  # the token after a draft needs a slot; 1: the end alone
        ended = {}
        for (a, row, last, _, _, chain), (kept, end) in zip(holes, self._head_chains(hidden[at], tokens, rooms,
                                                                                    None, bans, ends)):
            if end is not None and not bracket_open(self.tokenizer.decode(new_canvases[row, :last + 1].tolist())):
                ended[row] = (last + 1, end)
            elif chain:
                a.head_draft = (last + 1, *kept) if kept[0] else None
        return ended

    def _head_end_ids(self, a: ActiveHole, canvas: torch.Tensor, first: int) -> torch.Tensor | None:
        """bool [V]: the tokens the draft head may end this greedy fill with next (head_end.py),
        or None where it may not (the setting off, a fill without stop strings, or one whose
        `canvas` (its committed slots) holds a stop from slot `first` on: this pass ended it)."""
        if not self.config.head_end_prob or a.stop_ids is None:
            return None
        if bool(stop_slots(a, self.special, canvas)[first:].any()):
            return None
        return self._stop_ids(a.state.request.holes[a.index].stop, leading=True)

    def _first_head_draft(self, a: ActiveHole) -> None:
        """The draft head's guesses for a new greedy canvas's first slots, from the context's
        own last hidden state (EncodedContext.last_hidden): without them a canvas's first
        pass checks only what the text offers (HumanEval single-line: 1.2 tokens a pass,
        against 2 for the head's guesses later on)."""
        h = getattr(a.context, "last_hidden", None)  # (a family runner's contexts have none)
        if self.draft_head is None or h is None or a.temperature > 0 or a.context.ids is None:
            return
        token = torch.tensor([a.context.last_id], device=h.device)
        # A healed prefix restricts slot 0 to tokens that extend the backed-up text (the newline
        # before an indentation, on every fresh line): the head's first guess must be one of them,
        # or the first pass checks a draft the base cannot take (HumanEval single-line: 50 of 80
        # first passes committed one token, most of them after an unhealed guess such as '\n   '
        # where only '\n\n   ' could stand).
        allowed = None if a.first_allowed is None else a.first_allowed[None]
        kept = self._head_chains(h[None], token, [a.canvas.numel() - 1], allowed, [a.start_ban])[0][0]
        a.head_draft = (0, *kept) if kept[0] else None

    def _head_chains(self, hidden: torch.Tensor, tokens: torch.Tensor, rooms: list[int],
                     first_allowed: torch.Tensor | None = None,
                     bans: list[torch.Tensor | None] | None = None,
                     ends: list[torch.Tensor | None] | None = None,
                     ) -> list[tuple[tuple[list[list[int]], list[float]], int | None]]:
        """Per row, ((chains, the head's probability of each one's first token), the token the
        head ends the fill with next or None): the draft head's chains after `tokens` from
        `hidden` (its `draft_branches` best with a draft tree, else its best), each cut before a
        draft stop token and to the row's room (the token after a draft needs a slot); empty
        chains dropped. `first_allowed`: DraftHead.guess_chains' restriction of the first
        guess; `bans`: per row, its hole's live Hole.banned_starts mask (only blanks committed
        so far), or None; `ends`: per row, the tokens that would end its fill (_head_end_ids),
        or None (head_end.ends_here decides)."""
        asked = bool(ends) and any(e is not None for e in ends)
        steps = min(self.config.draft_tokens, self.draft_head.config.steps, max(*rooms, int(asked)))
        if steps <= 0:
            return [(([], []), None) for _ in rooms]
        width = self.config.draft_branches if self._tree_tokens() else 1
        start_ban = None
        if bans and any(b is not None for b in bans):
            none = torch.zeros(self._start_bans.vocab_size, dtype=torch.bool, device=self.runner.device)
            start_ban = (torch.stack([none if b is None else b for b in bans]), self._start_bans.blank)
        end_ids = None
        if asked:
            none = torch.zeros(self.loaded.config.vocab_size, dtype=torch.bool, device=self.runner.device)
            end_ids = torch.stack([none if e is None else e for e in ends])
        guesses = self.draft_head.guess_chains(hidden, tokens, steps, width, first_allowed, start_ban, end_ids)
        chains, probs = guesses.chains.cpu(), guesses.first_prob.cpu()  # [N, width, steps], [N, width]
        ended = [None] * len(rooms)
        if end_ids is not None:
            ended = [int(t) if ends_here(p, self.config.head_end_prob) else None
                     for p, t in zip(guesses.end_prob.tolist(), guesses.end_token.tolist())]
        stops = self._draft_stops[chains].tolist()
        out = []
        for row_chains, chain_stops, chain_probs, room, end in zip(chains.tolist(), stops, probs.tolist(), rooms, ended):
            cut = [(g[:min(s.index(True) if True in s else len(g), room)], p)
                   for g, s, p in zip(row_chains, chain_stops, chain_probs)]
            out.append((([g for g, _ in cut if g], [p for g, p in cut if g]), end))
        return out

    def _stop_rule(self, a: ActiveHole) -> str | None:
        """"end" once the committed head of a hole holds the code after the hole again
        (`stop_at_suffix`, suffix_stop.py), a line that leaves its block (`stop_indent`,
        dedent_stop.py), a loop (`stop_repeats`, repeat_stop.py), as many lines as it may
        show (`max_lines`, line_cap.py) or as many as its chosen end is chosen among
        (`choose_end`, fill_end.settled_end); _finish_hole cuts the text there."""
        hole = a.state.request.holes[a.index]
        head = a.suffix_head
        if not head and not hole.stop_indent and not hole.stop_repeats and not hole.max_lines and not a.chosen_end:
            return None
        text = self._visible(self.tokenizer.decode(fill_tokens(a, self.special)), a)
        if suffix_cut(text, head, hole.prefix) >= 0:
            return "end"
        if hole.stop_indent and dedent_cut(text, hole.stop_indent) >= 0:
            return "end"
        if hole.max_lines and line_cap_cut(text, hole.max_lines) >= 0:
            return "end"
        if a.chosen_end and settled_end(text, a.chosen_end, hole.suffix) >= 0:
            return "end"
        if hole.stop_repeats:
            looped, a.loop_clean = loop_seen(text, typed_indent(hole.prefix), a.loop_clean)
            if looped:
                return "end"
        return None

    def _ban_starts(self, logits, canvases, drafts, slots, active, compact: bool) -> None:
        """Hole.banned_starts (start_ban.py), in place: no banned token at a slot the logits
        hold (`slots`: the masked slots and, with drafts, the checked ones) where only blanks
        come before it, the draft tokens it was computed after included."""
        bans = {row: a.start_ban for row, a in enumerate(active) if a.start_ban is not None}
        if bans:
            seen = canvases if drafts is None else torch.where(drafts >= 0, drafts, canvases)
            self._start_bans.apply(logits, seen, slots, self.special.mask, bans, compact)

    def _restrict_first_slot(self, logits, canvases, masked, active, healed: list[int], compact: bool) -> None:
        """Ban every token that does not extend the backed-up word at slot 0 of the healed
        rows, while that slot is masked (no host sync: the ban is all-False otherwise)."""
        sel = torch.tensor(healed, device=self.runner.device)
        allowed = torch.stack([active[row].first_allowed for row in healed])  # [R, V]
        banned = ~allowed & (canvases[sel, 0] == self.special.mask)[:, None]
        with torch.inference_mode():  # logits are an inference tensor: edit them in place, no copy
            if compact:  # row r's first masked slot sits after the masked slots of rows < r
                counts = masked.sum(-1)
                first = (counts.cumsum(0) - counts)[sel].clamp(max=logits.shape[0] - 1)
                logits[first] = logits[first].masked_fill(banned, float("-inf"))
            else:
                logits[sel, 0] = logits[sel, 0].masked_fill(banned, float("-inf"))

    @staticmethod
    def _visible(text: str, a: ActiveHole) -> str:
        """The fill as it goes after the user's text: healed text taken back off."""
        if a.healed and text.startswith(a.healed):
            text = text[len(a.healed):]
        return unheal(text, a.typed, a.indenting)

    def _emit(self, a: ActiveHole) -> None:
        ids = a.canvas.tolist()
        text = self._visible("".join(MASK_GLYPH if t == self.special.mask else self.tokenizer.decode([t])
                                     for t in ids if t not in self.special.end), a)
        masked = sum(1 for t in ids if t == self.special.mask)
        try:
            a.state.on_event(CanvasEvent(a.state.request.request_id, a.index, a.passes, text, masked))
        except Exception:  # a broken listener must not break the engine
            log.exception("canvas event listener failed")

    def _emit_settled(self, a: ActiveHole) -> None:
        ids = fill_tokens(a, self.special)
        event = SettledText(a.state.request.request_id, a.index, a.passes, ids,
                            self._visible(self.tokenizer.decode(ids), a))
        try:
            a.state.on_settled(event)
        except Exception:  # a broken listener must not break the engine
            log.exception("settled-text listener failed")

    def _finish_hole(self, a: ActiveHole, reason: str) -> None:
        tokens = fill_tokens(a, self.special)
        text = self._visible(self.tokenizer.decode(tokens), a)
        stop = a.state.request.holes[a.index].stop
        cut = min((i for i in (text.find(s) for s in stop) if i >= 0), default=-1)
        if cut >= 0:
            text, reason = text[:cut], "end"
        hole = a.state.request.holes[a.index]
        cut = suffix_cut(text, a.suffix_head, hole.prefix)
        if cut >= 0:
            text, reason = text[:cut], "end"
        cut = dedent_cut(text, hole.stop_indent) if hole.stop_indent else -1
        if cut >= 0:
            text, reason = text[:cut], "end"
        cut = repeat_cut(text, typed_indent(hole.prefix), final=True) if hole.stop_repeats else -1
        if cut >= 0:
            text, reason = text[:cut], "end"
        cut = line_cap_cut(text, hole.max_lines) if hole.max_lines else -1
        if cut >= 0:
            text, reason = text[:cut], "end"
        cut = settled_end(text, a.chosen_end, hole.suffix) if a.chosen_end else -1
        if cut >= 0:  # the whole fill is one more cut
            text, reason = text[:cut], "end"
        cut = trailing_indent_cut(text, hole.suffix)  # the suffix's first line keeps its own indentation
        if cut >= 0:
            text = text[:cut]
        if not a.healed.strip() and starts_banned(text, hole.banned_starts):  # only re-masking gets here (start_ban.py)
            text, reason = "", "end"
        a.state.results[a.index] = HoleResult(
            text=text, finish_reason=reason, passes=a.passes,
            tokens=len(tokens), committed_per_pass=a.committed_per_pass,
        )
        self.scheduler.active.remove(a)
        self.runner.forget_batch() if not self.scheduler.active else None

    def _complete(self, state: RequestState) -> None:
        if state.future.done() or not state.done:
            return
        now = time.monotonic()
        holes = list(state.results)
        if state.candidates > 1:
            holes = choose(self, state.holes, holes, state.candidates, state.request.holes)
        elif self.scores_candidates:  # (a stream held back all but the first line: openai_api/streaming.py)
            holes = [choose_end(self, hole, r) for hole, r in zip(state.request.holes, holes)]
        result = InfillResult(
            request_id=state.request.request_id,
            holes=holes,
            model=self.model_name,
            elapsed_ms=(now - state.submitted) * 1000,
            queued_ms=((state.started or now) - state.submitted) * 1000,
            queued_for=state.queued_for,
            active_for=self._activity.overlap(state.started or now, now),
            context_tokens=state.context_tokens,
            cached_tokens=state.cached_tokens,
            near_holes=state.near_holes,
        )
        self.metrics.request_done(result)
        state.future.set_result(result)

    def _fail(self, state: RequestState, exc: Exception) -> None:
        self.scheduler.active[:] = [a for a in self.scheduler.active if a.state is not state]
        self.scheduler.drop_waiting(lambda s: s is state)
        state.pending_holes.clear()
        if not state.future.done():
            state.future.set_exception(exc)


def _lone_surrogate(text: object) -> bool:
    """Whether a str holds a surrogate that is not half of a pair (JSON and LSP allow one)."""
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def width_class(length: int) -> int:
    return max(8, 1 << (length - 1).bit_length())

