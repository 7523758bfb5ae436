"""Run configuration: frozen, typed, validated dataclasses.

They are the only currency between the UI, the run store, the cache and the core: every entry
point turns its input into a `RunConfig` (through `RunConfig.from_dict` at I/O edges) and the
validation here is the one place where limits are enforced, so a command line, a URL or a widget
cannot get past them. `__post_init__` validates and does nothing else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lengen_core.frequencies import MIN_GAP, carrier_gap

TaskName = Literal["retrieval", "shift", "delay-copy", "selective-copy"]
DELAY_TASKS = ("delay-copy", "selective-copy")  # the context length stays fixed; the delay is what changes (docs/science.md)
EncodingName = Literal["rope", "learned", "sinusoidal", "alibi", "nope"]
AttentionName = Literal["softmax", "linear"]
LengthMode = Literal["fixed", "sampled"]
DeviceName = Literal["auto", "cpu", "cuda", "mps"]
InitName = Literal["random", "constructed"]

# Limits, enforced here and nowhere else. They keep a run trainable in minutes on a CPU and an
# evaluation inside a laptop's memory.
MAX_VOCAB = 64
MAX_TRAIN_LENGTH = 512
MAX_D_MODEL = 512
MAX_LAYERS = 8
MAX_HEADS = 16
MAX_POSITIONS = 65_536
MAX_STEPS = 50_000
MAX_BATCH_SIZE = 4_096
MAX_EVAL_LENGTH = 1 << 20
MAX_EVAL_SAMPLES = 4_096
MAX_SEED = 2**31 - 1
MAX_SWEEP_LENGTHS = 64  # lengths in one evaluation or prediction request
MAX_SWEEP_TOKENS = 1 << 31  # samples × the sum of the lengths in one evaluation request (~1 min of 2 cores)
MAX_DELAY = MAX_TRAIN_LENGTH - 1  # the source must lie inside the context (delay < training length)
MAX_DELAY_SPEC = 200  # characters of a delays spec
_DELAY_PART = re.compile(r"(\d{1,6})(?:\s*-\s*(\d{1,6}))?")
RUN_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")  # a stored run's id (no separators; '..' excluded apart)


class ConfigError(ValueError):
    """A configuration value a user supplied is not allowed; the message says what is."""


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{name} {value} is out of range: allowed {low} to {high}")


def _check_float(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if isinstance(value, int) and abs(value) > 1e300:  # beyond any float: math.isfinite would overflow
        raise ConfigError(f"{name} is out of range: allowed {low:g} to {high:g}")
    if not math.isfinite(value) or not low <= value <= high:
        raise ConfigError(f"{name} {value} is out of range: allowed {low:g} to {high:g}")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"unknown {name} {value!r}: allowed {', '.join(allowed)}")


@dataclass(frozen=True)
class Setting:
    """One setting of a run, as every entry point spells it: the command line's flag, a link's query
    key and the messages' label, with the bounds or choices the config enforces. The command line,
    the link parser and the Train form are built from `SETTINGS`, so they cannot disagree with it."""

    name: str  # the flat name of `with_changes`
    section: str  # "task", "model" or "train"
    label: str  # in messages and forms
    flag: str  # --flag on the command line
    query: str  # key in a link
    main: bool  # always written to a link (the others only when they differ from the default)
    low: float | None = None
    high: float | None = None
    kind: type = int  # int, float, bool or str (a choice)
    choices: tuple[str, ...] = ()
    default: Any = None

    def check(self, value: Any) -> None:
        if self.choices:
            _check_choice(self.label, value, self.choices)
        elif self.kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{self.label} must be true or false, got {value!r}")
        elif self.kind is int:
            _check_int(self.label, value, int(self.low), int(self.high))
        elif self.name == "delays":
            parse_delays(value)
        elif self.kind is str:  # a run id, or "" for none
            if not isinstance(value, str) or (value and (not RUN_ID.fullmatch(value) or ".." in value)):
                raise ConfigError(f"{self.label} must be a run id (lowercase letters, digits, '.', '_' or '-') "
                                  f"or empty, got {value!r:.80}")
        else:
            _check_float(self.label, value, self.low, self.high)


# name -> (label, flag, query, main, low, high); choices and types come from the dataclasses below.
_SETTINGS = {
    "task": ("task", "task", "task", True, None, None),
    "vocab_size": ("vocab size", "vocab", "vocab", True, 2, MAX_VOCAB),
    "offset": ("offset", "offset", "offset", True, 1, MAX_TRAIN_LENGTH),
    "train_length": ("training length", "train-length", "train_length", True, 2, MAX_TRAIN_LENGTH),
    "length_mode": ("length mode", "length-mode", "length_mode", True, None, None),
    "delays": ("delays", "delays", "delays", False, None, None),
    "encoding": ("encoding", "encoding", "encoding", True, None, None),
    "attention": ("attention", "attention", "attention", True, None, None),
    "d_model": ("d_model", "d-model", "d_model", True, 4, MAX_D_MODEL),
    "n_layers": ("layers", "layers", "layers", True, 0, MAX_LAYERS),
    "n_heads": ("heads", "heads", "heads", True, 1, MAX_HEADS),
    "max_positions": ("max positions", "max-positions", "max_positions", False, 2, MAX_POSITIONS),
    "rope_base": ("rope base", "rope-base", "rope_base", False, 2.0, 1e9),
    "qk_init": ("query-key init scale", "qk-init", "qk_init", True, 1e-3, 10.0),  # main: see LEGACY_DEFAULTS
    "steps": ("steps", "steps", "steps", True, 0, MAX_STEPS),
    "batch_size": ("batch size", "batch-size", "batch", False, 1, MAX_BATCH_SIZE),
    "learning_rate": ("learning rate", "lr", "lr", True, 1e-6, 1.0),
    "weight_decay": ("weight decay", "weight-decay", "weight_decay", False, 0.0, 1.0),
    "seed": ("seed", "seed", "seed", True, 0, MAX_SEED),
    "target_accuracy": ("target accuracy", "target-accuracy", "target_accuracy", False, 0.0, 1.0),
    "patience": ("patience", "patience", "patience", False, 1, MAX_STEPS),
    "keep_training": ("keep training", "keep-training", "keep_training", False, None, None),
    "init": ("initialisation", "init", "init", False, None, None),
    "continues": ("continues run", "continues", "continues", False, None, None),
}
# Settings added after runs were stored, at their legacy value: the value every run stored before the
# setting existed was made with. A setting at its legacy value is left out of the run id, so old ids stay
# valid, and a stored config without it reads as that value (`RunConfig.from_stored`). The legacy value is
# not always today's default: qk_init's default became 0.1 with the recipe (docs/horizon.md).
_ADDED_LATER = {"task": {"delays": ""}, "train": {"init": "random", "continues": ""}, "model": {"qk_init": 1.0}}
# The defaults before the recipe (d_model 128, qk_init 0.1) became the default, for what was written then:
# a link without qk_init (every link written since carries it; lengen.share).
LEGACY_DEFAULTS = {"model": {"d_model": 64, "qk_init": 1.0}}


def parse_delays(text: Any) -> tuple[int, ...]:
    """The delays a spec names, sorted and distinct: "" (none: the retrieval and shift tasks), a range
    "2-8", a list "2,4,8" or both ("2-4,8"). Each delay is 1 to `MAX_DELAY`; a run's delays must besides
    fit its training length (`TaskConfig`). `ConfigError` says what is wrong and what is allowed."""
    if not isinstance(text, str):
        raise ConfigError(f"delays must be text such as '2-8' or '2,4,8', got {text!r:.80}")
    if len(text) > MAX_DELAY_SPEC:
        raise ConfigError(f"delays is too long ({len(text)} characters, at most {MAX_DELAY_SPEC})")
    if not text.strip():
        return ()
    delays: set[int] = set()
    for part in text.split(","):
        match = _DELAY_PART.fullmatch(part.strip())
        if match is None:
            raise ConfigError(f"delays {text!r}: {part.strip()!r} is not a delay or a range; write e.g. '2-8', "
                              "'2,4,8' or '2-4,8'")
        low, high = int(match[1]), int(match[2] or match[1])
        if low > high:
            raise ConfigError(f"delays {text!r}: the range {low}-{high} runs backwards; write {high}-{low}")
        if low < 1 or high > MAX_DELAY:
            raise ConfigError(f"delays {text!r}: each delay must be 1 to {MAX_DELAY}")
        delays.update(range(low, high + 1))
    return tuple(sorted(delays))


def format_delays(delays: Any) -> str:
    """The shortest spec of a set of delays: runs of consecutive delays as ranges ("2-8,12")."""
    ordered, parts = sorted(set(delays)), []
    for delay in ordered:
        if parts and parts[-1][1] == delay - 1:
            parts[-1][1] = delay
        else:
            parts.append([delay, delay])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in parts)


def _validate(section: Any) -> None:
    for item in dataclasses.fields(section):
        SETTINGS[item.name].check(getattr(section, item.name))


MIN_DELAY_VOCAB = {"delay-copy": 3, "selective-copy": 4}
DELAY_VOCAB_WHY = {"delay-copy": "the last token is the filler, the rest are content",
                   "selective-copy": "the upper half are the marked copies of the lower half"}


@dataclass(frozen=True)
class TaskConfig:
    """What is learned: `retrieval` (answer x[L-1-offset] at the last position), `shift`, or a delay task
    (`delay-copy`, `selective-copy`: the answer lies a delay back, drawn per sequence from `delays`; the
    context length stays the training length; lengen_core.tasks)."""

    task: TaskName = "retrieval"
    vocab_size: int = 16
    offset: int = 3
    train_length: int = 16
    length_mode: LengthMode = "fixed"
    delays: str = ""  # the delay tasks' training delays, e.g. "2-8"; "" for retrieval and shift

    def __post_init__(self) -> None:
        _validate(self)
        if self.offset >= self.train_length:
            raise ConfigError(
                f"offset {self.offset} must be smaller than the training length {self.train_length}"
            )
        delays = parse_delays(self.delays)
        if self.task not in DELAY_TASKS:
            if delays:
                raise ConfigError(f"delays apply to the {' and '.join(DELAY_TASKS)} tasks only; the {self.task} "
                                  "task answers at its offset: leave delays empty")
            return
        if not delays:
            raise ConfigError(f"the {self.task} task needs its training delays, e.g. delays 2-8")
        if delays[-1] >= self.train_length:
            raise ConfigError(f"delays {self.delays!r}: the longest delay {delays[-1]} must be smaller than the "
                              f"training length {self.train_length} (the source lies inside the context)")
        if self.length_mode != "fixed":
            raise ConfigError(f"the {self.task} task keeps the context length fixed: length mode must be fixed")
        if self.vocab_size < MIN_DELAY_VOCAB[self.task]:
            raise ConfigError(f"the {self.task} task needs vocab size ≥ {MIN_DELAY_VOCAB[self.task]} "
                              f"({DELAY_VOCAB_WHY[self.task]})")
        if self.task == "selective-copy" and self.vocab_size % 2:
            raise ConfigError(f"the selective-copy task needs an even vocab size ({DELAY_VOCAB_WHY[self.task]}), "
                              f"got {self.vocab_size}")

    @property
    def delay_set(self) -> tuple[int, ...]:
        """The training delays, sorted (empty for retrieval and shift)."""
        return parse_delays(self.delays)


@dataclass(frozen=True)
class ModelConfig:
    """The network: `n_layers == 0` is the minimal single head of docs/science.md §3."""

    encoding: EncodingName = "rope"
    attention: AttentionName = "softmax"
    d_model: int = 128  # with qk_init 0.1, the recipe of docs/horizon.md (64 and 1.0 before it)
    n_layers: int = 0
    n_heads: int = 1
    max_positions: int = 4_096
    rope_base: float = 10_000.0
    qk_init: float = 0.1  # W_Q and W_K drawn this many times their usual scale (initial logits × its square)

    def __post_init__(self) -> None:
        _validate(self)
        if self.minimal and self.n_heads != 1:
            raise ConfigError("the minimal model (layers 0) has exactly one head; use layers ≥ 1 for more")
        if self.d_model % (2 * self.n_heads) != 0:
            raise ConfigError(
                f"d_model {self.d_model} must be divisible by 2 × heads ({2 * self.n_heads}) "
                "so every head has an even width for the rotary pairs"
            )

    @property
    def minimal(self) -> bool:
        """The minimal single head of docs/science.md §3 (layers 0: one head, no residual, no MLP), on
        any task. The one test of it: the model registry, the budgets, the verdict and the app read this;
        the closed-form analyses need `RunConfig.single_head` besides (the retrieval task)."""
        return self.n_layers == 0


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation. `target_accuracy` held for `patience` steps stops early unless `keep_training`."""

    steps: int = 1_500
    batch_size: int = 128
    learning_rate: float = 3e-3
    weight_decay: float = 0.0
    seed: int = 0
    target_accuracy: float = 1.0
    patience: int = 200
    keep_training: bool = False
    init: InitName = "random"  # constructed: the learned-table head built to implement the relative rule
    continues: str = ""  # the stored run whose weights this one starts from ("train longer"); "" = none

    def __post_init__(self) -> None:
        _validate(self)
        if self.steps == 0 and self.init != "constructed":
            raise ConfigError("steps 0 is allowed only for a constructed start (init constructed): "
                              "a random start needs at least 1 step")
        if self.continues and self.init != "random":
            raise ConfigError("a run that continues another starts from that run's weights: init must be random")


def _build_settings() -> dict[str, Setting]:
    settings = {}
    for section, section_cls in (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig)):
        hints = typing.get_type_hints(section_cls)
        for item in dataclasses.fields(section_cls):
            label, flag, query, main, low, high = _SETTINGS[item.name]
            hint = hints[item.name]
            choices = tuple(get_args(hint)) if typing.get_origin(hint) is Literal else ()
            settings[item.name] = Setting(item.name, section, label, flag, query, main, low, high,
                                          str if choices else hint, choices, item.default)
    return settings


def check_constructible(vocab_size: int, d_model: int, max_positions: int, rope_base: float) -> None:
    """`ConfigError` unless d_model leaves enough position pairs after the V token features for the
    constructed head (lengen_core.models.construct) to have a carrier margin ≥ `MIN_GAP` over the whole
    table; the message names a d_model that would do."""
    pairs = (d_model - vocab_size) // 2
    if pairs >= 1 and carrier_gap(pairs, rope_base, max_positions) >= MIN_GAP:
        return
    needed = next((vocab_size + 2 * m + (vocab_size % 2) for m in range(max(pairs + 1, 1), MAX_D_MODEL)
                   if vocab_size + 2 * m <= MAX_D_MODEL and carrier_gap(m, rope_base, max_positions) >= MIN_GAP),
                  None)
    what = (f"d_model {d_model} leaves {max(pairs, 0)} position pair(s) after the {vocab_size} token features, "
            f"too few for the constructed head to tell the {max_positions} positions apart (carrier margin "
            f"below {MIN_GAP})")
    if needed is None:
        raise ConfigError(f"{what}; no d_model up to {MAX_D_MODEL} does at rope base {rope_base:g}: "
                          "use fewer max positions or a smaller vocab")
    raise ConfigError(f"{what}; the smallest d_model above it that works is {needed} (or use fewer max positions)")


SETTINGS: dict[str, Setting] = {}  # filled below, once the sections are defined


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run; its hash is the run id."""

    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        if self.train.init == "constructed" and not (
            self.model.encoding == "learned" and self.single_head and self.model.attention == "softmax"
        ):
            raise ConfigError("init constructed builds a learned-position head that implements the relative rule: "
                              "it needs encoding learned, attention softmax, layers 0 and the retrieval task")
        if self.train.init == "constructed":  # enough position pairs after the token features (lengen_core.models.construct)
            check_constructible(self.task.vocab_size, self.model.d_model, self.model.max_positions,
                                self.model.rope_base)
        if self.model.encoding == "learned" and self.model.max_positions < self.task.train_length:
            raise ConfigError(
                f"max positions {self.model.max_positions} must cover the training length "
                f"{self.task.train_length}"
            )

    @property
    def single_head(self) -> bool:
        """The minimal head (no layers) on the retrieval task: one query whose n keys share one softmax,
        which the closed-form analyses (O(L) evaluation to 2^20, the carrier from the weights, the
        prediction, the dilution law) read. A 0-layer shift run is not: it answers at every position,
        so it is evaluated and analysed like a transformer."""
        return self.model.minimal and self.task.task == "retrieval"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> RunConfig:
        """Build from plain JSON-like data; unknown keys and wrong types raise `ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError("a run config must be an object with task, model and train sections")
        unknown = set(data) - {"task", "model", "train"}
        if unknown:
            raise ConfigError(f"unknown config section(s): {', '.join(sorted(map(str, unknown)))}")
        sections = {
            name: _section_from_dict(section_cls, data.get(name, {}), name)
            for name, section_cls in (("task", TaskConfig), ("model", ModelConfig), ("train", TrainConfig))
        }
        return cls(**sections)

    @classmethod
    def from_stored(cls, data: Any) -> RunConfig:
        """Build a config written by the store (or any record of a past run): `from_dict`, with a setting
        added after the record was written read as its legacy value (`_ADDED_LATER`: qk_init 1.0, not
        today's default), so the record keeps meaning the run it was written for, and its run id."""
        if isinstance(data, dict):
            data = dict(data)
            for name, legacy in _ADDED_LATER.items():
                if isinstance(data.get(name, {}), dict):
                    data[name] = {**legacy, **data.get(name, {})}
        return cls.from_dict(data)

    @classmethod
    def legacy_defaults(cls) -> RunConfig:
        """The default config before the recipe became the default: d_model 64, qk_init 1.0 (`LEGACY_DEFAULTS`)."""
        return cls.from_dict(LEGACY_DEFAULTS)

    def run_id(self) -> str:
        """A stable id from the config and seed: the same request maps to the same stored run."""
        data = self.to_dict()
        for section, legacy in _ADDED_LATER.items():
            for name, value in legacy.items():
                if data[section][name] == value:
                    del data[section][name]
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
        return f"{self.model.encoding}-{self.model.attention}-{self.task.task}-s{self.train.seed}-{digest}"


SETTINGS.update(_build_settings())


def _section_from_dict(section_cls: type, data: Any, name: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"config section {name!r} must be an object")
    hints = typing.get_type_hints(section_cls)
    known = {f.name for f in dataclasses.fields(section_cls)}
    unknown = set(data) - known
    if unknown:
        raise ConfigError(f"unknown {name} setting(s): {', '.join(sorted(map(str, unknown)))}")
    values = {}
    for key, value in data.items():
        # JSON has one number type: accept 3.0 for an int field and 3 for a float field.
        if hints[key] is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if hints[key] is float and isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1e300:
            value = float(value)
        values[key] = value
    return section_cls(**values)


def with_changes(config: RunConfig, **changes: Any) -> RunConfig:
    """A copy of `config` with flat setting names changed, e.g. `with_changes(c, offset=5, seed=1)`."""
    data = config.to_dict()
    for key, value in changes.items():
        section = next((s for s in ("task", "model", "train") if key in data[s]), None)
        if section is None:
            raise ConfigError(f"unknown setting {key!r}")
        data[section][key] = value
    return RunConfig.from_dict(data)
