"""Shareable links and run archives: a config (and view settings) to and from a URL query string.

    config_to_query(config)        -> {"encoding": "rope", "offset": "3", ..., "seed": "0"}
    config_from_query(params)      -> RunConfig, or ConfigError naming the parameter at fault
    run_id_from_query(params)      -> a safe run id or None, or StoreError / ConfigError
    view_int(params, "samples", 64, 1024, 256)  -> a bounded view setting
    view_run_ids(params, "compare", known)      -> the runs a repeated parameter names, and what was dropped
    run_archive_chunks(store, run_id) -> the run's three files as a zip, piece by piece as they are read

Query values arrive as strings (or lists of strings when a key repeats) from anyone who can paste
a link, so everything here is strict: a number must look like a number before it is converted (no
'1_000', 'nan', 'inf' or 4,000-digit integers reach `int`/`float`), a key given twice is an
error rather than a guess, and every range is the core's own (`RunConfig.__post_init__`).

Keys that are not config keys are ignored by `config_from_query`, not reported: the same query
string carries `run` and each page's view settings, and links pick up tracking parameters.
The main keys are always written; the rarely changed ones (batch size, rope base, ...) only when
they differ from the defaults, so a link stays short and `config_from_query(config_to_query(c))`
is `c` for every valid config.

Links written before the recipe became the default (d_model 128, qk_init 0.1; docs/horizon.md) keep
opening the run they named. Then the defaults were d_model 64 and qk_init 1.0, and qk_init was written
only when it was not 1.0. Since the switch `qk_init` is a main key, written in every link, so a link
that has config keys but no `qk_init` was written before it: its missing settings are read against the
defaults of that time (`RunConfig.legacy_defaults()`: qk_init 1.0, and d_model 64 for a hand-written
link without d_model), not today's. A link written by hand today names `qk_init` to get today's
defaults (`?qk_init=0.1&seed=4` is the recipe at seed 4; `?seed=4` is the old default at seed 4).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import time
import zipfile
from collections.abc import Collection, Iterator, Mapping, Sequence

from lengen.store import CONFIG_FILE, METRICS_FILE, WEIGHTS_FILE, RunStore, StoreError, check_run_id
from lengen_core.config import SETTINGS, ConfigError, RunConfig, with_changes

QueryParams = Mapping[str, "str | Sequence[str]"]

# query key -> setting name in `with_changes`, from the config's own table (lengen_core.config.SETTINGS);
# the main settings are always written, the others only when they differ from the default.
MAIN_KEYS = {setting.query: name for name, setting in SETTINGS.items() if setting.main}
EXTRA_KEYS = {setting.query: name for name, setting in SETTINGS.items() if not setting.main}
CONFIG_KEYS = {**MAIN_KEYS, **EXTRA_KEYS}
RUN_KEY = "run"
MAX_VALUE_LENGTH = 64  # longer than any valid value; keeps hostile input out of messages too
MAX_LINKED_RUNS = 16  # runs one link may name (Compare)

_INT = re.compile(r"[+-]?\d{1,18}")
_FLOAT = re.compile(r"[+-]?(\d{1,20}(\.\d{0,20})?|\.\d{1,20})([eE][+-]?\d{1,4})?")
_BOOL = {"true": True, "1": True, "false": False, "0": False}
_DEFAULTS = RunConfig()
_LEGACY = RunConfig.legacy_defaults()  # what a link without qk_init was written against (module docstring)
LEGACY_MARKER = SETTINGS["qk_init"].query  # every link written since the switch carries it


def config_to_query(config: RunConfig) -> dict[str, str]:
    """Flat string parameters that `config_from_query` turns back into exactly `config`."""
    flat = _flat(config)
    defaults = _flat(_DEFAULTS)
    query = {key: _format(flat[name]) for key, name in MAIN_KEYS.items()}
    query.update({key: _format(flat[name]) for key, name in EXTRA_KEYS.items() if flat[name] != defaults[name]})
    return query


def has_config(params: QueryParams) -> bool:
    return any(key in params for key in CONFIG_KEYS)


def config_from_query(params: QueryParams, base: RunConfig | None = None) -> RunConfig:
    """The config a link describes: `base` with the link's settings; `ConfigError` names what is wrong.

    Without `base`, the defaults of the link's time: today's, or the legacy ones for a link with config
    keys but no `qk_init`, written before the recipe became the default (module docstring)."""
    if base is None:
        base = _LEGACY if has_config(params) and LEGACY_MARKER not in params else _DEFAULTS
    changes = {}
    for key, name in CONFIG_KEYS.items():
        if key in params:
            changes[name] = _parse(key, _single(params, key), type(_flat(base)[name]))
    try:
        return with_changes(base, **changes)
    except ConfigError as error:
        raise ConfigError(f"{_culprits(base, changes)}: {error}") from None


def run_id_from_query(params: QueryParams) -> str | None:
    """The `run` parameter, checked by the store's own rule; a path-like id raises `StoreError`."""
    if RUN_KEY not in params:
        return None
    value = _single(params, RUN_KEY)
    if len(value) > MAX_VALUE_LENGTH * 4:
        raise StoreError(f"link parameter 'run' is too long ({len(value)} characters)")
    try:
        return check_run_id(value)
    except StoreError as error:
        raise StoreError(f"link parameter 'run': {error}") from None


def view_int(params: QueryParams, name: str, low: int, high: int, default: int,
             choices: Collection[int] | None = None) -> int:
    """A whole-number view setting in [low, high] (and among `choices` if given), else `default`."""
    if name not in params:
        return default
    value = _parse(name, _single(params, name), int)
    if not low <= value <= high:
        raise ConfigError(f"link parameter '{name}' is {value}: allowed {low} to {high}")
    if choices is not None and value not in choices:
        shown = ", ".join(map(str, sorted(choices)[:8])) + (", …" if len(choices) > 8 else "")
        raise ConfigError(f"link parameter '{name}' is {value}: allowed {shown}")
    return value


def view_ints(params: QueryParams, name: str, low: int, high: int, default: Sequence[int],
              max_count: int = 16) -> tuple[int, ...]:
    """A comma-separated list of whole numbers in [low, high], at most `max_count`, without repeats."""
    if name not in params:
        return tuple(default)
    raw = _single(params, name)
    parts = raw.split(",")
    if len(parts) > max_count:
        raise ConfigError(f"link parameter '{name}' has {len(parts)} values: at most {max_count}")
    values = tuple(dict.fromkeys(_parse(name, part, int) for part in parts))
    bad = [v for v in values if not low <= v <= high]
    if bad:
        raise ConfigError(f"link parameter '{name}' has {bad[0]}: allowed {low} to {high}")
    return values


def view_bool(params: QueryParams, name: str, default: bool) -> bool:
    """An on/off view setting: true/false (or 1/0), else `default` when absent."""
    return default if name not in params else bool(_parse(name, _single(params, name), bool))


def view_choice(params: QueryParams, name: str, choices: Sequence[str], default: str) -> str:
    """A view setting that must be one of `choices` (names such as a head's 'L0H1'), else `default`."""
    if name not in params:
        return default
    value = _single(params, name)
    if value not in choices:
        shown = ", ".join(choices[:8]) + (", …" if len(choices) > 8 else "")
        raise ConfigError(f"link parameter '{name}' is {_shown(value)}: allowed {shown}")
    return value


def view_run_ids(params: QueryParams, name: str, known: Collection[str],
                 max_count: int = MAX_LINKED_RUNS) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The runs a repeated parameter names (`compare=A&compare=B`), in order without repeats, and one
    message for each value dropped: not a run id, not among `known`, or past `max_count`.

    A bad value costs only itself: the others are kept. Absent, it is `((), ())`.
    """
    if name not in params:
        return (), ()
    raw = params[name]
    values = [raw] if isinstance(raw, str) else list(raw)
    kept: list[str] = []
    dropped: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            dropped.append(f"link parameter '{name}' has an empty value: give a run id")
            continue
        value = value.strip()
        if len(value) > MAX_VALUE_LENGTH * 4:
            dropped.append(f"link parameter '{name}' has a value {len(value)} characters long: a run id has "
                           "at most 128")
            continue
        try:
            check_run_id(value)
        except StoreError as error:
            dropped.append(f"link parameter '{name}': {error}")
            continue
        if value not in known:
            dropped.append(f"link parameter '{name}' names the run {_shown(value)}, which is not stored here: "
                           f"allowed are the {len(known)} presets and stored runs listed under Runs")
        elif value not in kept:
            if len(kept) == max_count:
                dropped.append(f"link parameter '{name}' names more than {max_count} runs: dropped {_shown(value)}")
            else:
                kept.append(value)
    return tuple(kept), tuple(dropped)


ARCHIVE_CHUNK_BYTES = 1 << 20


def run_archive_chunks(store: RunStore, run_id: str, chunk_bytes: int = ARCHIVE_CHUNK_BYTES) -> Iterator[bytes]:
    """The stored run's config, weights and metrics as one zip (the files at the top level), made
    while the files are read: about `chunk_bytes` at a time, so a 1 GB run never sits in memory or
    in a temporary file. The weights are stored as they are (safetensors do not compress: deflating
    a 1.3 GB file took 40 s for nothing), the JSON deflated; sizes and checksums follow each file
    (zip data descriptors), as they are known only once it is read.

    A bad id or a missing file raises `StoreError` here, before the first piece. The three files
    are opened at once, so a run evicted or replaced during a download is still sent whole, as it
    was. A download counts as a use of the run for the store's quota (`RunStore.mark_used`).
    """
    directory = store.run_dir(run_id)  # checks the id before any path is built
    files = contextlib.ExitStack()
    try:
        opened = [(name, files.enter_context((directory / name).open("rb"))) for name in _ARCHIVED]
    except OSError as error:
        files.close()
        raise StoreError(f"run {run_id} cannot be read: {error.strerror}") from None
    store.mark_used(run_id)
    return _zip_pieces(opened, files, chunk_bytes)


_ARCHIVED = (CONFIG_FILE, WEIGHTS_FILE, METRICS_FILE)


class _Pipe(io.RawIOBase):
    """A write-only, unseekable sink: what zipfile wrote since the last `take`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def _zip_pieces(opened, files: contextlib.ExitStack, chunk_bytes: int) -> Iterator[bytes]:
    pipe = _Pipe()
    with files, zipfile.ZipFile(pipe, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        for name, source in opened:
            stat = os.fstat(source.fileno())  # of the file opened, whatever the path holds now
            entry = zipfile.ZipInfo(name, date_time=time.localtime(stat.st_mtime)[:6])
            entry.file_size = stat.st_size  # decides zip64 up front
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_STORED if name == WEIGHTS_FILE else zipfile.ZIP_DEFLATED
            with archive.open(entry, "w") as member:
                while chunk := source.read(chunk_bytes):
                    member.write(chunk)
                    yield pipe.take()
    yield pipe.take()  # the central directory, written when the archive closes


def _flat(config: RunConfig) -> dict[str, object]:
    data = config.to_dict()
    return {name: value for section in ("task", "model", "train") for name, value in data[section].items()}


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _shown(value: str) -> str:
    return repr(value if len(value) <= MAX_VALUE_LENGTH else value[:MAX_VALUE_LENGTH] + "…")


def _single(params: QueryParams, key: str) -> str:
    value = params[key]
    if not isinstance(value, str):
        values = list(value)
        if len(values) != 1:
            raise ConfigError(f"link parameter '{key}' is given {len(values)} times: give it once")
        value = values[0]
    if not isinstance(value, str):
        raise ConfigError(f"link parameter '{key}' must be text, got {type(value).__name__}")
    if not value.strip():
        raise ConfigError(f"link parameter '{key}' is empty")
    return value.strip()


def _parse(key: str, value: str, kind: type) -> object:
    if len(value) > MAX_VALUE_LENGTH:
        raise ConfigError(f"link parameter '{key}' is too long ({len(value)} characters)")
    if kind is bool:
        if value.lower() not in _BOOL:
            raise ConfigError(f"link parameter '{key}' must be true or false, got {_shown(value)}")
        return _BOOL[value.lower()]
    if kind is int:
        if not _INT.fullmatch(value):
            too_big = re.fullmatch(r"[+-]?\d+", value) is not None
            raise ConfigError(f"link parameter '{key}' " + ("is far too large" if too_big else
                              f"must be a whole number, got {_shown(value)}"))
        return int(value)
    if kind is float:
        number = float(value) if _FLOAT.fullmatch(value) else math.nan
        if not math.isfinite(number):
            raise ConfigError(f"link parameter '{key}' must be a finite number, got {_shown(value)}")
        return number
    return value  # a choice: the core names the allowed values


def _culprits(base: RunConfig, changes: dict[str, object]) -> str:
    """The link parameters that cannot stand alone, or all of them when only their combination fails."""
    names = {name: key for key, name in CONFIG_KEYS.items()}
    alone = []
    for name, value in changes.items():
        try:
            with_changes(base, **{name: value})
        except ConfigError:
            alone.append(names[name])
    keys = alone or [names[name] for name in changes]
    return "link parameter" + ("s " if len(keys) > 1 else " ") + ", ".join(f"'{k}'" for k in keys)
