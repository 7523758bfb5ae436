"""What a request costs, estimated from its config before any work, and the budgets it must fit.

    cost = training_cost(config)           # Cost(memory_bytes, seconds, what)
    check(cost)                            # BudgetError naming the knob to turn, or nothing

Every training, evaluation, heatmap, per-head analysis, carrier extraction and prediction from the
weights is checked here before the serving side calls the science (`check_training` in the training
pool and the command line; `check_attention_map`, `check_sequence_evaluation`,
`check_single_head_evaluation`, `check_head_analysis`, `check_absolute_position`, `check_transfer`, `check_carrier` and `check_prediction` in the
command line and the app's analyses), so a command, a link and the Train form all meet the same limits. The
budgets are the operator's, from the environment, with defaults that keep one request well inside
a 2-core, 8 GB container:

    LENGEN_REQUEST_MEMORY_MB   peak memory of one request             default 3072
    LENGEN_REQUEST_SECONDS     one evaluation or analysis              default 120
    LENGEN_TRAIN_SECONDS       one training (also its wall-clock limit) default 1800

How the estimates are made. Memory: the activations a step keeps (per layer: the residual stream
and the projections, B·T·C floats ×12; one block of attention logits, weights and their masks,
B·H·T² floats ×3 while training, `QUERY_BLOCK_ELEMENTS` ×3 otherwise; the MLP, B·T·4C ×4), the
parameters with their gradients and Adam's two moments (16 bytes each), and the interpreter with
torch loaded (`BASE_BYTES`). Time: floating-point operations at `FLOPS_PER_SECOND` plus floats
written at `FLOATS_PER_SECOND` (for a training, with Adam's `OPTIMIZER_FLOATS` per parameter), the
rates of a busy 2-core CPU; a training's time counts its pace (`lengen.stepping.Pace`),
and the Train form's estimate scales it by this machine's measured speed
(`lengen.calibration`); the checks keep the model's machine-independent time. Measured against the peak resident
memory of two training steps on five transformer configs (1–8 layers, 4–16 heads, d_model 128–512,
lengths 64–512), the estimate was 1.7–2× the measurement; against their step times on 2 busy
cores, 0.6–1.7× (docs/serving.md).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lengen.runtime import env_whole_number
from lengen.stepping import Pace
from lengen_core.analysis.absolute import PROBE_BASELINE_SEEDS, PROBE_SAMPLES, SINK_MULTIPLE, sink_length_of
from lengen_core.analysis.argmax_count import GAUSSIAN_DRAWS
from lengen_core.analysis.carrier import BASELINE_SEEDS, RECURRENCE_LIMIT, SEARCH_CHUNK
from lengen_core.analysis.dilution import DOMINANT_KEYS, KEY_CHUNK
from lengen_core.analysis.evaluate import TOKEN_BLOCK, chunk_bytes, chunk_sizes, cpu_workers, doublings, token_dtype
from lengen_core.analysis.horizon import NEAR_MULTIPLE
from lengen_core.analysis.mask import DENOMINATOR_SAMPLES
from lengen_core.analysis.sequence import tokens_per_batch
from lengen_core.config import ConfigError, RunConfig
from lengen_core.models.attention import QUERY_BLOCK_ELEMENTS
from lengen_core.models.encodings import ENCODING_CLASSES
from lengen_core.training import PROBE_SHARE

MEMORY_ENV, SECONDS_ENV, TRAIN_SECONDS_ENV = "LENGEN_REQUEST_MEMORY_MB", "LENGEN_REQUEST_SECONDS", "LENGEN_TRAIN_SECONDS"
DEFAULT_MEMORY_MB, DEFAULT_SECONDS, DEFAULT_TRAIN_SECONDS = 3_072, 120, 1_800
BASE_BYTES = 512 << 20  # python, torch and their libraries (300-420 MB measured), with room
FLOPS_PER_SECOND = 10e9
FLOATS_PER_SECOND = 1e9
FLOAT = 4  # bytes
SAMPLE_KEY_WORK = 40  # the single-head evaluation's per-sample step for one key, in FLOPS_PER_SECOND's units
OPTIMIZER_FLOATS = 12  # per parameter and step: Adam reads and writes the weight, its gradient and both moments
STARTUP_SECONDS = 2.0  # an analysis's first calls and small steps: 3.5 s measured for the smallest carrier, busy machine
# The carrier extraction on one busy core (measured 2026-12-03, docs/serving.md; each about half the rate measured):
CARRIER_STARTUP_SECONDS = 0.5  # its first calls in a fresh process: 0.1-0.3 s measured
CARRIER_SVD_WORK = 6  # singular values of an n × n matrix: 6·n³ flops at FLOPS_PER_SECOND (0.31 s measured at n = 1,024)
SEARCH_FLOPS_PER_SECOND = 15e9  # the near-recurrence search's float64 product: 28-34 GFLOP/s measured
DRAW_FLOATS_PER_SECOND = 3e9  # the prediction's readout draws: 6-8e9 of its 12·V³ floats per draw measured, one thread
PREDICTION_SWEEP_SECONDS = 0.12  # a prediction sweep's fixed steps: 0.07 s measured (a learned table, six short sweeps)
PREDICTION_LENGTH_SECONDS = 0.03  # its small steps at each length: 0.02 s measured (V = 8, 14 lengths, one sweep)
SEARCH_VALUES_PER_SECOND = 0.1e9  # s_ab(Δ) values reduced to the best key token, with its index: 0.19-0.23e9 measured


class BudgetError(ConfigError):
    """A request's estimated cost is over a budget; the message names the budget and what to change."""


@dataclass(frozen=True)
class Cost:
    what: str  # "this training", "this heatmap", …
    memory_bytes: float  # estimated peak
    seconds: float  # estimated on this machine class
    knobs: str  # what makes it cheaper, in the form's words
    bound: str = ""  # where `seconds` is the most the work can take, why (said after the estimate)

    def __str__(self) -> str:
        said = f"{self.what}: about {megabytes(self.memory_bytes)} of memory and {duration(self.seconds)}"
        return f"{said} ({self.bound})" if self.bound else said


@dataclass(frozen=True)
class Budgets:
    memory_bytes: int
    seconds: float
    train_seconds: float

    @classmethod
    def unlimited(cls) -> Budgets:
        """No limit: a researcher's own terminal, where the work asked for is the work run."""
        return cls(math.inf, math.inf, math.inf)

    @classmethod
    def from_env(cls) -> Budgets:
        return cls(env_whole_number(MEMORY_ENV, DEFAULT_MEMORY_MB, BudgetError) << 20, float(env_whole_number(SECONDS_ENV, DEFAULT_SECONDS, BudgetError)),
                   float(env_whole_number(TRAIN_SECONDS_ENV, DEFAULT_TRAIN_SECONDS, BudgetError)))


def _layers(config: RunConfig) -> tuple[int, int, int]:
    """(layers, heads, d_model) as the attention sees them: the minimal head is one layer of one head."""
    model = config.model
    return max(1, model.n_layers), 1 if model.minimal else model.n_heads, model.d_model


def parameter_count(config: RunConfig) -> int:
    """Weights, a shared position table once (as `store.weights_bytes` counts them)."""
    layers, _, C = _layers(config)
    V, model = config.task.vocab_size, config.model
    table = model.max_positions * C if model.encoding == "learned" else 0
    if model.minimal:
        return 2 * V * C + 3 * C * C + table
    return 2 * V * C + layers * (12 * C * C + 4 * C) + 2 * C + table


def _forward(config: RunConfig, batch: int, length: int, queries: int, training: bool,
             layers: int | None = None) -> tuple[float, float, float]:
    """(floats kept, floats written, flops) of one forward pass (×3 flops with the backward when
    training) of `batch` sequences of `length` with `queries` queries in the last layer."""
    all_layers, H, C = _layers(config)
    layers = all_layers if layers is None else layers
    tokens, V = batch * length, config.task.vocab_size
    if config.model.minimal:  # projections of the V token rows, gathered; the queries' logits
        logits = batch * queries * length
        kept = 4 * tokens * C + 3 * (logits if training else min(QUERY_BLOCK_ELEMENTS, logits))
        flops = 2 * 4 * V * C * C + 2 * 2 * batch * queries * length * C
        written = 20 * tokens * C + 6 * batch * queries * length  # memory-bound: gathers and rotations
    else:
        block = batch * H * length * length if training else min(QUERY_BLOCK_ELEMENTS, batch * H * length * length)
        kept = layers * (12 * tokens * C + 3 * block + 4 * 4 * tokens * C) if training else \
            12 * tokens * C + 3 * block + 2 * 4 * tokens * C
        flops = layers * batch * (24 * length * C * C + 4 * length * length * C)
        written = layers * (6 * batch * H * length * length + 6 * tokens * C)
    factor = 3 if training else 1
    return kept, factor * written, factor * flops


def _seconds(flops: float, written: float) -> float:
    return flops / FLOPS_PER_SECOND + written / FLOATS_PER_SECOND


def step_seconds(config: RunConfig) -> float:
    """One optimisation step of `config` as the model above prices it (`FLOPS_PER_SECOND`, `FLOATS_PER_SECOND`):
    the forward and backward passes and Adam's update of every parameter. `lengen.calibration`
    scales it by this machine's measured speed."""
    task, train = config.task, config.train
    queries = task.train_length - task.offset if task.task == "shift" else 1
    _, written, flops = _forward(config, train.batch_size, task.train_length, queries, training=True)
    return _seconds(flops, written + OPTIMIZER_FLOATS * parameter_count(config))


def training_cost(config: RunConfig, pace: Pace | None = None, speed: float = 1.0) -> Cost:
    """A training of `config` to its last step (early stopping only shortens it), with its live
    probes for a single head: at most PROBE_SHARE of the steps' time (lengen_core.training.Training).
    `speed`: the measured step time over the modelled one (`lengen.calibration`; 1: the
    model's constants); `pace`: a live training's pace, which makes each step last at least 1 / its
    steps per second."""
    task, train = config.task, config.train
    queries = task.train_length - task.offset if task.task == "shift" else 1
    kept, _, _ = _forward(config, train.batch_size, task.train_length, queries, training=True)
    memory = BASE_BYTES + FLOAT * (kept + 4 * parameter_count(config))
    probes = 1 + PROBE_SHARE if config.single_head else 1
    seconds = (pace or Pace()).seconds(train.steps, probes * speed * step_seconds(config))
    knobs = "fewer steps, a smaller batch, a shorter training length, fewer layers or heads, or a smaller d_model"
    if pace is not None and pace.paced:
        knobs = "a faster pace (more steps per second), or " + knobs
    return Cost("this training", memory, seconds, knobs)


def transfer_cost(config: RunConfig, pretrain: RunConfig | None = None) -> Cost:
    """The transfer measurement (lengen_core.transfer): `config` (delays B) trained twice to its last step at
    most (from A's weights and from scratch; early stopping only shortens them), after `pretrain` (delays A)
    when it is trained too (None: A is a stored run). Run inline by the app, it is an on-demand request:
    `check` holds it to the request's time, not a training's."""
    trainings = [config, config] + ([pretrain] if pretrain is not None else [])
    costs = [training_cost(each) for each in trainings]
    return Cost("this transfer measurement", max(cost.memory_bytes for cost in costs),
                sum(cost.seconds for cost in costs), "fewer steps on delays B, or a run with a smaller d_model",
                "each training's every step; early stopping ends most sooner")


def shortest_training_steps(config: RunConfig) -> int:
    """The fewest steps a training of `config` can take: early stopping needs the target accuracy held for
    `patience` steps, so no run stops before that (a run that keeps training takes all its steps)."""
    train = config.train
    return train.steps if train.keep_training else min(train.steps, train.patience)


def evaluation_cost(config: RunConfig, lengths: Sequence[int], samples: int, tokens_per_batch: int) -> Cost:
    """A forward evaluation of `samples` sequences at each length, in batches of at most
    `tokens_per_batch` tokens (the transformer's and the shift task's evaluation)."""
    memory, seconds = 0.0, 0.0
    for length in lengths:
        batch = max(1, min(samples, tokens_per_batch // max(length, 1)))
        kept, written, flops = _forward(config, batch, length, length, training=False)
        memory = max(memory, kept)
        seconds += math.ceil(samples / batch) * _seconds(flops, written)
    return Cost("this evaluation", BASE_BYTES + FLOAT * (memory + parameter_count(config)), seconds,
                "fewer samples, or a shorter longest length")


def single_head_evaluation_cost(config: RunConfig, lengths: Sequence[int], samples: int) -> Cost:
    """The minimal head's chunked evaluation of its last query (lengen_core.analysis.evaluate): one pass over
    each sequence's keys, a chunk at a time, on each of torch's threads (`evaluate._workers`), so memory is
    one chunk a thread as `evaluate.chunk_bytes` estimates it for the sizes `evaluate.chunk_sizes` picks
    (within EVAL_MEMORY_BYTES at any length), each thread's sums and its block of tokens; time grows with
    the logit tables' products, V·min(V, samples)·d_model per key, plus samples × Σ lengths per-sample
    steps (gather, max, exp, scatter) and token draws, counted as SAMPLE_KEY_WORK each (the default run, 256
    samples at 2^20: 3–4 s with 6.9 CPU s measured on 2 busy cores before the evaluation reused its buffers,
    1.7–1.9 s with 3.3–3.8 CPU s on 2 quiet cores since; this estimate gives 4.5 s, a busy machine's, as the
    rest of this model)."""
    V, C = config.task.vocab_size, config.model.d_model
    group, keys = chunk_sizes(V, C, samples)
    threads = cpu_workers()
    # per sample and thread: the attention mass per key token, the positional sums and the readout (V each),
    # ten scalars; per thread a block of narrow tokens as drawn and its transposed copy (the chunk's int64
    # columns are in `chunk_bytes`)
    state = threads * (FLOAT * samples * (3 * V + 10) + 2 * samples * TOKEN_BLOCK * token_dtype(V).itemsize)
    work = sum(lengths) * (V * min(V, samples) * C + SAMPLE_KEY_WORK * samples)
    return Cost("this evaluation",
                BASE_BYTES + threads * chunk_bytes(V, C, group, keys) + state + FLOAT * parameter_count(config),
                work / FLOPS_PER_SECOND, "fewer samples, or a shorter longest length")


def attention_map_cost(config: RunConfig, length: int, layer: int, samples: int = 1) -> Cost:
    """Heatmaps and per-head maps: `samples` sequences one at a time, the layers up to `layer`."""
    kept, written, flops = _forward(config, 1, length, length, training=False, layers=layer + 1)
    return Cost("this attention map", BASE_BYTES + FLOAT * (kept + parameter_count(config)),
                samples * _seconds(flops, written), "a shorter length, or a lower layer")


def absolute_position_cost(config: RunConfig, length: int, samples: int = PROBE_SAMPLES,
                           seeds: int = PROBE_BASELINE_SEEDS) -> Cost:
    """`lengen_core.analysis.absolute.analyse_absolute_position`: full forward passes over `samples`
    sequences at `length` for the run, its `seeds` untrained initialisations and two interventions, each
    keeping every layer's residual stream (S·T·C floats a layer) for the probe's ridge fits (C² per row),
    then a quarter of the samples at the sink's length; and the exact denominators, H·V²·D per offset."""
    layers, H, C = _layers(config)
    V, sink = config.task.vocab_size, sink_length_of(config, SINK_MULTIPLE)
    passes = evaluation_cost(config, [length], samples, tokens_per_batch(config))
    reading = evaluation_cost(config, [sink], max(4, samples // 4), tokens_per_batch(config))
    streams = (layers + 1) * samples * length * C
    probe = (3 + seeds) * (layers + 1) * _seconds(2 * samples * length * C * C + C**3, 2 * samples * length * C)
    exact = _seconds(4 * H * V * V * C * sink, 4 * H * V * V * sink)
    memory = max(passes.memory_bytes, reading.memory_bytes) + FLOAT * (3 * streams + 3 * H * V * V * sink)
    seconds = STARTUP_SECONDS + (3 + seeds) * passes.seconds + reading.seconds + probe + exact
    return Cost("this position probe", memory, seconds, "fewer samples, or a shorter probe length")


def mask_share_cost(config: RunConfig, length: int, samples: int = DENOMINATOR_SAMPLES) -> Cost:
    """`lengen_core.analysis.mask.mask_share`: forward passes over `samples` sequences at `length`, and the
    exact denominators from the weights, H·V²·D per offset."""
    _, H, C = _layers(config)
    V = config.task.vocab_size
    passes = evaluation_cost(config, [length], samples, tokens_per_batch(config))
    exact = _seconds(4 * H * V * V * C * length, 4 * H * V * V * length)
    return Cost("this denominator reading", passes.memory_bytes + FLOAT * 3 * H * V * V * length,
                STARTUP_SECONDS + passes.seconds + exact, "fewer samples, or a shorter length")


def _encoding_traits(config: RunConfig) -> type:
    """The encoding's class, whose flags (rotary, relative, additive, trained_positions) say which
    path the carrier and the prediction take (lengen_core.models.encodings.ENCODING_CLASSES)."""
    return ENCODING_CLASSES[config.model.encoding]


def _expected_matrix(config: RunConfig, length: int) -> tuple[float, float]:
    """(floats kept, seconds) of `carrier.expected_logit_matrix` at `length`: the mean query and key
    at each position (length × C² multiply-adds each), their products (length² × C) and the diagonal."""
    C = config.model.d_model
    kept = 2 * length * length + 6 * length * C + 2 * C * C
    flops = 2 * (3 * length * C * C + length * length * C + config.task.vocab_size * C * C)
    return kept, _seconds(flops, 4 * length * length)


def carrier_cost(config: RunConfig, search_length: int, baseline_seeds: int = BASELINE_SEEDS) -> Cost:
    """`lengen_core.analysis.carrier.extract_carrier`, for the run and the `baseline_seeds` untrained
    initialisations of its baseline range (the same argument as the extraction's), as one thread does it.

    Each model: the expected logit matrix at L_train for the Toeplitz fraction, the positional matrix at the
    offsets shown (`_carrier_size`: RoPE's from s(Δ), an expected logit matrix otherwise) and its singular
    values (`CARRIER_SVD_WORK` × size³). For RoPE, then, the near-recurrence search: s_ab(Δ) for every
    token pair at Δ = L_train … search_length, a chunk of offsets at a time, one float64 product of
    V² × d_model × offsets multiply-adds (`SEARCH_FLOPS_PER_SECOND`) and a max over the key tokens of its
    V² × offsets values (`SEARCH_VALUES_PER_SECOND`). The search ends at its `RECURRENCE_LIMIT`-th
    near-recurrence, which the weights decide, not the config: the estimate is for a search that runs
    to its end, the most it can take (an untrained head's ends in its first chunk; docs/serving.md)."""
    V, C, L = config.task.vocab_size, config.model.d_model, config.task.train_length
    encoding = _encoding_traits(config)
    size = L if encoding.trained_positions else max(128, 2 * L)
    kept, seconds = _expected_matrix(config, L)  # the Toeplitz fraction's matrix
    seconds += CARRIER_SVD_WORK * size**3 / FLOPS_PER_SECOND
    if not encoding.rotary:  # measured: the expected logit matrix at the offsets shown
        measured, more = _expected_matrix(config, size)
        kept, seconds = max(kept, measured), seconds + more
    seconds += _seconds(0, parameter_count(config))  # drawing an initialisation's weights
    seconds *= 1 + max(1, baseline_seeds)  # the trained model and the untrained initialisations
    bound = ""
    if encoding.rotary:
        offsets = max(0, search_length - L)
        chunk = min(SEARCH_CHUNK, offsets)
        kept = max(kept, 2 * (2 * V * V * chunk + 3 * chunk * C + V * V * C))  # float64
        seconds += offsets * (2 * V * V * C / SEARCH_FLOPS_PER_SECOND + (V * V + C) / SEARCH_VALUES_PER_SECOND)
        bound = f"at most: the search ends at its {RECURRENCE_LIMIT}th near-recurrence" if offsets > chunk else ""
    memory = BASE_BYTES + FLOAT * (kept + 2 * parameter_count(config) + 2 * size * size * 3)
    knobs = "a shorter near-recurrence search" if encoding.rotary else \
        "a run with a shorter training length or a smaller d_model (every metric is computed for the run and its untrained initialisations)"
    return Cost("this carrier extraction", memory, CARRIER_STARTUP_SECONDS + seconds, knobs, bound)


def _ruled(rule) -> bool:
    """Whether an inference rule (lengen_core.analysis.rules) changes anything: then every length has its own sweep."""
    return rule is not None and not rule.trivial


def prediction_cost(config: RunConfig, lengths: Sequence[int], rule=None) -> Cost:
    """`lengen_core.analysis.dilution.predict` at `lengths`: one sweep over the keys of the last query (to the
    longest length for a relative encoding read as trained; one per length otherwise, and under any
    inference `rule` but none, whose carrier changes with the length), a (V, V, KEY_CHUNK) block at a
    time, with V³ sums per key; then at each length the readout's GAUSSIAN_DRAWS draws, twice (the
    model's readout and the ideal one), about 12·V³ floats written per draw (`DRAW_FLOATS_PER_SECOND`)
    and `PREDICTION_LENGTH_SECONDS`, and `PREDICTION_SWEEP_SECONDS` a sweep: at V = 64 the argmax dominates. Priced from one thread's CPU time on
    six configs (docs/prediction.md, "The price"; tests/unit/test_prediction_price.py holds it to them)."""
    V, C = config.task.vocab_size, config.model.d_model
    encoding = _encoding_traits(config)
    one_sweep = encoding.relative and not _ruled(rule)
    keys = max(lengths, default=0) if one_sweep else sum(lengths)
    sweeps = 1 if one_sweep else len(lengths)
    per_key = 2 * V**3 * (3 if encoding.additive else 1) + 2 * V * V * (C + 1)
    sweep = _seconds(keys * per_key, keys * V * V * (12 if encoding.additive else 8))
    draws = GAUSSIAN_DRAWS
    # the readout's argmax against each target's best rival: V passes over (V, V, draws) scores, memory-bound
    per_length = PREDICTION_LENGTH_SECONDS + 2 * (10 * V**4 / FLOPS_PER_SECOND + 12 * V**3 * draws / DRAW_FLOATS_PER_SECOND)
    chunk = min(KEY_CHUNK, max(keys, 1))
    kept = V * V * chunk * (6 if encoding.additive else 3) + 2 * (8 * V**3 + 4 * V * V * draws + V * DOMINANT_KEYS * draws)
    return Cost("this prediction", BASE_BYTES + FLOAT * (kept + parameter_count(config)),
                sweep + sweeps * PREDICTION_SWEEP_SECONDS + len(lengths) * per_length,
                "fewer lengths, or a shorter longest length")


SERVER_LIFT = "the operator raises {env}"  # how a server's limit is lifted: the variable, by whoever runs it


def check(cost: Cost, budgets: Budgets | None = None, lift: str = SERVER_LIFT) -> Cost:
    """`cost` if it fits the budgets; else BudgetError naming the budget, the estimate, what to change and
    how the limit is lifted (`lift`, with the variable for {env})."""
    budgets = budgets or Budgets.from_env()
    training = cost.what == "this training"
    limit, knob = (budgets.train_seconds, TRAIN_SECONDS_ENV) if training else (budgets.seconds, SECONDS_ENV)
    if cost.memory_bytes > budgets.memory_bytes:
        raise BudgetError(f"{cost.what} would need about {megabytes(cost.memory_bytes)} of memory, over this "
                          f"server's budget of {megabytes(budgets.memory_bytes)} per request ({MEMORY_ENV}): "
                          f"choose {cost.knobs}, or {lift.format(env=MEMORY_ENV)}")
    if cost.seconds > limit:
        said = f"{duration(cost.seconds)} ({cost.bound})" if cost.bound else duration(cost.seconds)
        raise BudgetError(f"{cost.what} would take about {said}, over this server's limit of "
                          f"{duration(limit)} ({knob}): choose {cost.knobs}, or {lift.format(env=knob)}")
    return cost


def megabytes(size: float) -> str:
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:,.0f} MB"


def duration(seconds: float) -> str:
    """'8.5 s', '2.5 min', '12 min', '2.5 h'."""
    if seconds < 90:
        return f"{max(seconds, 0.1):.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 600:
        return f"{seconds / 60:.1f} min"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# The checks the serving side runs before it calls the science (which knows nothing of budgets).

BUDGET_ENVS = (MEMORY_ENV, SECONDS_ENV, TRAIN_SECONDS_ENV)


@dataclass(frozen=True)
class Pricer:
    """Prices each request before its work and checks it against `budgets`: None reads this server's from
    the environment at each check (the app, a sweep's cells); `Budgets.unlimited()` refuses nothing (a
    researcher's own terminal). `told` hears each cost priced (the command line prints it); `lift` says
    in a refusal how the limit is lifted. `lengen_core.measure` takes one as its `prices`."""

    budgets: Budgets | None = None
    told: Callable[[Cost], None] | None = None
    lift: str = SERVER_LIFT

    def check(self, cost: Cost, budgets: Budgets | None = None) -> Cost:
        if self.told is not None:
            self.told(cost)
        return check(cost, budgets or self.budgets, self.lift)

    def check_training(self, config: RunConfig, budgets: Budgets | None = None) -> Cost:
        return self.check(training_cost(config), budgets)

    def check_sequence_evaluation(self, config: RunConfig, lengths: Sequence[int], samples: int) -> Cost:
        return self.check(evaluation_cost(config, lengths, samples, tokens_per_batch(config)))  # the batches it runs

    def check_single_head_evaluation(self, config: RunConfig, lengths: Sequence[int], samples: int) -> Cost:
        return self.check(single_head_evaluation_cost(config, lengths, samples))

    def check_attention_map(self, config: RunConfig, length: int, layer: int = 0, samples: int = 1) -> Cost:
        return self.check(attention_map_cost(config, length, layer, samples))

    def check_head_analysis(self, config: RunConfig, samples: int = 256) -> Cost:
        """`lengen_core.analysis.heads.analyse_heads`: `samples` sequences at L_train, a quarter of them at 4 × L_train."""
        L = config.task.train_length
        cost = evaluation_cost(config, [L, 4 * L], samples, tokens_per_batch(config))  # the batches it runs
        return self.check(Cost("this per-head analysis", cost.memory_bytes, cost.seconds, cost.knobs))

    def check_transfer(self, config: RunConfig, pretrain: RunConfig | None = None) -> Cost:
        return self.check(transfer_cost(config, pretrain))

    def check_absolute_position(self, config: RunConfig, length: int, samples: int = PROBE_SAMPLES) -> Cost:
        return self.check(absolute_position_cost(config, length, samples))

    def check_mask_share(self, config: RunConfig, length: int, samples: int = DENOMINATOR_SAMPLES) -> Cost:
        return self.check(mask_share_cost(config, length, samples))

    def check_carrier(self, config: RunConfig, search_length: int, baseline_seeds: int = BASELINE_SEEDS) -> Cost:
        return self.check(carrier_cost(config, search_length, baseline_seeds))

    def check_prediction(self, config: RunConfig, lengths: Sequence[int], rule=None) -> Cost:
        return self.check(prediction_cost(config, lengths, rule))

    def check_horizon(self, config: RunConfig, ceiling: int, rule=None) -> Cost:
        return self.check(horizon_cost(config, ceiling, rule))

    def prediction_fits(self, config: RunConfig, budgets: Budgets | None = None, rule=None):
        """`afford(lengths)` for lengen_core.analysis.horizon: whether the prediction at `lengths` (under
        `rule`) fits the budgets. Each step of a search is not told: the search as a whole was."""
        chosen = budgets or self.budgets or Budgets.from_env()

        def afford(lengths: Sequence[int]) -> bool:
            try:
                check(prediction_cost(config, lengths, rule), chosen)
            except BudgetError:
                return False
            return True

        return afford


SERVER = Pricer()  # this server's budgets, from the environment
check_training = SERVER.check_training
check_sequence_evaluation = SERVER.check_sequence_evaluation
check_single_head_evaluation = SERVER.check_single_head_evaluation
check_attention_map = SERVER.check_attention_map
check_head_analysis = SERVER.check_head_analysis
check_carrier = SERVER.check_carrier
check_absolute_position = SERVER.check_absolute_position
check_transfer = SERVER.check_transfer
check_mask_share = SERVER.check_mask_share
check_prediction = SERVER.check_prediction
check_horizon = SERVER.check_horizon
prediction_fits = SERVER.prediction_fits


def horizon_cost(config: RunConfig, ceiling: int, rule=None) -> Cost:
    """The first call of `lengen_core.analysis.horizon.predicted_horizon` up to `ceiling`: the prediction at the
    doublings of the training length up to NEAR_MULTIPLE × it. Every later call (the doublings beyond, each
    round of the bisection) is priced on its own before it starts (`prediction_fits`), and a call over
    the budget ends the search with the bracket found so far, so no step starts unchecked and a search
    is never refused for what its worst case might cost."""
    L = config.task.train_length
    near = list(doublings(L, 64, longest=min(ceiling - 1, NEAR_MULTIPLE * L))) or [min(L, ceiling)]
    first = prediction_cost(config, near, rule)
    return Cost("this horizon search", first.memory_bytes, first.seconds, "a run with a smaller vocabulary or d_model")


def budgets_set_in_env() -> list[str]:
    """The budget variables this environment sets (the command line's opt-in to the server's limits)."""
    return [name for name in BUDGET_ENVS if os.environ.get(name, "").strip()]
