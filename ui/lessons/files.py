"""Lessons: a teacher's guided walk through the lab, read from plain TOML files in `assets/lessons/`.

A lesson is a title, a summary and steps; each step is a few sentences, ONE element of the lab's pages
(`ELEMENTS`: its name, the runs it reads and the options it takes), a question with its answer, and
the runs it needs: shipped presets (`preset` or `presets`, by their labels in `lengen.presets.PRESETS`),
which open at once, or a config to train on the shared pool (`[steps.config]`, flat setting names as
`lengen_core.config.with_changes` takes them, and how its live training goes: `PACE_KEYS`).
docs/lessons.md describes every key.

Everything here is plain Python (no Streamlit): a file is parsed and checked once, and every
mistake is a `LessonError` whose message names the file, the step, what is wrong and what is
allowed, so a bad file is a message when the app starts, never a broken step in front of a class.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lengen.lineage import continuation
from lengen.presets import DELAY_PRESETS, LESSON_MULTIPLES, LONGEST_CHOICES, PRESETS
from lengen.stepping import UNPACED, Pace, PaceError
from lengen_core.analysis.rules import RuleError, parse_rule
from lengen_core.config import SETTINGS, ConfigError, RunConfig, with_changes

LESSON_PRESETS = {**PRESETS, **DELAY_PRESETS}  # the runs a step may name: the length presets and the delay ones

LESSON_ROOT = Path(__file__).resolve().parents[2] / "assets" / "lessons"
LESSON_KEYS = {"title": "the lesson's name", "summary": "one or two sentences", "steps": "the [[steps]] tables",
               "order": "its place in the index, a whole number from 1 to 999 (optional)"}
LAST = 999  # a lesson without an order is listed after those with one, by name
STEP_KEYS = {
    "title": "the step's heading", "text": "a few sentences (markdown)", "element": "one element of ELEMENTS",
    "question": "a question for the class", "answer": "its answer, shown on a click",
    "preset": "a preset label", "presets": "a list of preset labels", "config": "a table of settings to train",
    "options": "a table of the element's options",
}
MAX_STEPS = 20
PACE_KEYS = {  # in [steps.config] beside the settings: how the live training goes, not the run (nor its id)
    "start_paused": "true or false: the training waits before its first step for Step or Resume",
    "steps_per_second": "at most this many steps a second (0: as fast as the server trains)",
}


class LessonError(ValueError):
    """A lesson file that cannot be shown; the message says the file, the step, what and what is allowed."""


@dataclass(frozen=True)
class Element:
    """What a lesson element reads: no run, one preset, several presets or a config to train; whether its
    run(s) must be the single head (True), a transformer (False) or either (None); its options and defaults."""

    runs: Literal["none", "one", "several", "config"]
    about: str
    single_head: bool | None = None
    options: tuple[tuple[str, tuple[Any, ...], Any], ...] = ()  # (name, allowed values, default)
    delays: bool = False  # reads the delay presets (lengen.presets.DELAY_PRESETS), not the length ones

    def option(self, name: str, given: dict[str, Any]) -> Any:
        return given.get(name, next(default for option, _, default in self.options if option == name))


class RuleLabels:
    """The values a `rules` option allows: inference rules as links write them, comma separated
    (`log-n,longrope:1x32/4x32`), each one the core parses (lengen_core.analysis.rules), none twice and none
    `none` (the unmodified run is always drawn)."""

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str) or not value.strip():
            return False
        try:
            rules = [parse_rule(part) for part in value.split(",")]
        except RuleError:
            return False
        labels = [rule.label for rule in rules]
        return not any(rule.trivial for rule in rules) and len(set(labels)) == len(labels)

    def __iter__(self):
        yield "rules as a link writes them, comma separated, each once, without none (such as log-n,ntk:4)"


# The registry: element name -> what it needs. The renderers are `ui.lessons.elements.RENDERERS` (same keys).
ELEMENTS: dict[str, Element] = {
    "accuracy-overlay": Element("several", "accuracy against length of several presets (the Start page's picture)",
                                single_head=True),
    "heatmap": Element("one", "attention map at a multiple of the training length (Attention page)",
                       options=(("multiple", LESSON_MULTIPLES, 4),)),
    "argmax-trace": Element("one", "the key each query attends to most (Attention page)", single_head=True,
                            options=(("multiple", LESSON_MULTIPLES, 4),)),
    "carrier-chart": Element("one", "the carrier s(Δ) with its margin beside the untrained one (Carrier page)",
                             single_head=True),
    "dilution-chart": Element("one", "accuracy against length, measured and predicted (Dilution page)",
                              single_head=True, options=(("longest", LONGEST_CHOICES, 1 << 16),)),
    "inverse-mass-chart": Element("one", "1/target mass against length, the law's slope (Dilution page)",
                                  single_head=True,
                                  options=(("longest", LONGEST_CHOICES, 1 << 16),)),
    "horizon": Element("one", "the measured and predicted horizon, with Train longer (Dilution page)",
                       single_head=True, options=(("longest", LONGEST_CHOICES, 1 << 16),)),
    "head-carriers": Element("one", "every head's carrier in a transformer (Transformer page)", single_head=False),
    "head-attention": Element("one", "the carrier head's attention at a multiple of the training length "
                              "(Transformer page)", single_head=False, options=(("multiple", (1, 2, 4), 4),)),
    "accuracy-by-position": Element("one", "a transformer's accuracy by position at 4× (Transformer page)",
                                    single_head=False),
    "position-probe": Element("one", "a linear probe of absolute position per layer against untrained seeds, at 1× "
                              "and 4× the training length (Transformer page)", single_head=False),
    "train-form": Element("config", "the Train form, prefilled, with the live training view (Train page)"),
    "class-runs": Element("several", "the runs trained in this session on the lesson's Train steps beside the "
                          "presets, accuracy against length (Compare page)", single_head=True),
    "rules-chart": Element("one", "accuracy under inference rules beside the unmodified run, measured and predicted "
                           "(Dilution page)", single_head=True,
                           options=(("rules", RuleLabels(), "log-n"), ("longest", LONGEST_CHOICES, 1 << 10))),
    "delay-overlay": Element("several", "accuracy against the delay of several delay presets, trained delays shaded "
                             "(Delays page)", delays=True),
    "delay-curve": Element("one", "a delay preset's accuracy and attention on the source against the delay "
                           "(Delays page)", delays=True),
    "delay-diversity": Element("none", "the shipped data-diversity sweep: accuracy on unseen delays against how many "
                               "delays training saw (Delays and Sweeps pages)"),
    "delay-transfer": Element("one", "the transfer measurement from a delay preset's delays to others, on a click "
                              "(Delays page)", delays=True),
}


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    element: str
    question: str
    answer: str
    presets: tuple[str, ...] = ()  # labels in lengen.presets.PRESETS, in order
    config: RunConfig | None = None  # a run to train on the shared pool
    fixed: tuple[str, ...] = ()  # the settings the lesson sets for that run: locked on a students' link
    options: tuple[tuple[str, Any], ...] = ()
    pace: Pace = UNPACED  # how its live training goes (PACE_KEYS)

    def option(self, name: str) -> Any:
        return ELEMENTS[self.element].option(name, dict(self.options))

    def trains(self) -> str:
        """The run to train, in the settings the lesson sets: 'encoding learned, seed 1'."""
        flat = {name: value for section in self.config.to_dict().values() for name, value in section.items()}
        return ", ".join(f"{SETTINGS[name].label} {flat[name]}" for name in self.fixed) or "the default run"


@dataclass(frozen=True)
class Lesson:
    name: str  # the file's name without .toml: the `lesson=` of a link
    title: str
    summary: str
    steps: tuple[Step, ...]
    order: int = LAST  # its place in the index

    def runs(self) -> list[str]:
        """What the lesson needs, in order, each once: 'Preset: RoPE', or 'to train: encoding learned, seed 1'
        (the settings the lesson sets for it)."""
        needed = [f"Preset: {label}" for step in self.steps for label in step.presets]
        needed += [f"to train: {step.trains()}" for step in self.steps if step.config is not None]
        return list(dict.fromkeys(needed))


def _where(path: Path, index: int | None, title: str | None = None) -> str:
    if index is None:
        return path.name
    return f"{path.name}, step {index + 1}" + (f" ({title!r})" if title else "")


def _text(data: dict, key: str, where: str, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise LessonError(f"{where}: '{key}' must be non-empty text ({STEP_KEYS.get(key) or LESSON_KEYS[key]}), "
                          f"got {'nothing' if value is None else repr(value)[:60]}")
    return value.strip()


def _presets(data: dict, where: str) -> tuple[str, ...]:
    if "preset" in data and "presets" in data:
        raise LessonError(f"{where}: give 'preset' (one) or 'presets' (a list), not both")
    labels = data.get("presets", [data["preset"]] if "preset" in data else [])
    if isinstance(labels, str) or not isinstance(labels, list):
        raise LessonError(f"{where}: 'presets' must be a list of preset labels, got {labels!r}")
    for label in labels:
        if label not in LESSON_PRESETS:
            raise LessonError(f"{where}: unknown preset {label!r}: allowed {', '.join(map(repr, LESSON_PRESETS))}")
    return tuple(labels)


def _pace(settings: dict, where: str) -> Pace:
    """How the step's training goes live, from the PACE_KEYS among its [steps.config] settings."""
    given = {name: settings[name] for name in PACE_KEYS if name in settings}
    for name, value in given.items():
        try:
            Pace(**{name: value})
        except PaceError as error:
            raise LessonError(f"{where}: {name} = {value!r} in [steps.config] is not allowed: {error} "
                              f"({name}: {PACE_KEYS[name]})") from None
    return Pace(**given)


def _config(data: dict, where: str) -> tuple[RunConfig | None, tuple[str, ...], Pace]:
    """The run a step trains: the default config with the step's settings; `continues` may name a preset.
    With it, how its live training goes (`PACE_KEYS`, which are not settings of the run)."""
    settings = data.get("config")
    if settings is None:
        return None, (), UNPACED
    if not isinstance(settings, dict):
        raise LessonError(f"{where}: 'config' must be a table of settings ([steps.config]), got {settings!r}")
    unknown = sorted(set(settings) - set(SETTINGS) - set(PACE_KEYS))
    if unknown:
        raise LessonError(f"{where}: unknown setting(s) {', '.join(unknown)} in [steps.config]: allowed "
                          f"{', '.join(SETTINGS)}, and for its live training {', '.join(PACE_KEYS)}")
    pace = _pace(settings, where)
    settings = {name: value for name, value in settings.items() if name not in PACE_KEYS}
    base = RunConfig()
    try:
        if settings.get("continues") in PRESETS:  # train a shipped preset longer, as its Train longer link does
            base = continuation(PRESETS[settings.pop("continues")])
        config = with_changes(base, **settings)
    except ConfigError as error:
        raise LessonError(f"{where}: bad config: {error}") from None
    return config, tuple(name for name in SETTINGS if name in data["config"]), pace


def _options(data: dict, element: Element, where: str) -> tuple[tuple[str, Any], ...]:
    given = data.get("options", {})
    if not isinstance(given, dict):
        raise LessonError(f"{where}: 'options' must be a table ([steps.options]), got {given!r}")
    allowed = {name: values for name, values, _ in element.options}
    for name, value in given.items():
        if name not in allowed:
            raise LessonError(f"{where}: this element takes no option {name!r}: allowed "
                              f"{', '.join(allowed) or 'none'}")
        if value not in allowed[name]:
            raise LessonError(f"{where}: option {name} = {value!r} is not allowed: allowed "
                              f"{', '.join(map(str, allowed[name]))}")
    return tuple(sorted(given.items()))


def _runs_fit(step: Step, element: Element, where: str) -> None:
    """The step names the runs its element reads: the right number, of the right kind."""
    need = {"none": "no run", "one": "one preset ('preset')", "several": "two or more presets ('presets')",
            "config": "a config to train ([steps.config])"}[element.runs]
    fits = {"none": not step.presets and step.config is None,
            "one": len(step.presets) == 1 and step.config is None,
            "several": len(step.presets) >= 2 and step.config is None,
            "config": step.config is not None and not step.presets}[element.runs]
    if not fits:
        raise LessonError(f"{where}: element {step.element!r} needs {need}")
    for label in step.presets:
        if element.delays != (label in DELAY_PRESETS):
            allowed = DELAY_PRESETS if element.delays else PRESETS
            raise LessonError(f"{where}: element {step.element!r} reads {'a delay' if element.delays else 'a length'} "
                              f"preset, and {label!r} is not: allowed {', '.join(map(repr, allowed))}")
        if element.single_head is not None and PRESETS[label].single_head != element.single_head:
            kinds = [name for name, config in PRESETS.items() if config.single_head == element.single_head]
            raise LessonError(f"{where}: element {step.element!r} reads "
                              f"{'a single head' if element.single_head else 'a transformer'}, and {label!r} is not: "
                              f"allowed {', '.join(map(repr, kinds))}")


def _step(data: Any, path: Path, index: int) -> Step:
    where = _where(path, index, data.get("title") if isinstance(data, dict) else None)
    if not isinstance(data, dict):
        raise LessonError(f"{where}: a step must be a [[steps]] table")
    unknown = sorted(set(data) - set(STEP_KEYS))
    if unknown:
        raise LessonError(f"{where}: unknown key(s) {', '.join(unknown)}: allowed {', '.join(STEP_KEYS)}")
    name = _text(data, "element", where)
    if name not in ELEMENTS:
        raise LessonError(f"{where}: unknown element {name!r}: allowed {', '.join(ELEMENTS)}")
    config, fixed, pace = _config(data, where)
    step = Step(_text(data, "title", where), _text(data, "text", where), name, _text(data, "question", where),
                _text(data, "answer", where), _presets(data, where), config, fixed,
                _options(data, ELEMENTS[name], where), pace)
    _runs_fit(step, ELEMENTS[name], where)
    return step


def parse_lesson(text: str, path: Path) -> Lesson:
    """The lesson in `text` (the contents of `path`), checked; `LessonError` says what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise LessonError(f"{path.name}: not valid TOML: {error}") from None
    where = _where(path, None)
    unknown = sorted(set(data) - set(LESSON_KEYS))
    if unknown:
        raise LessonError(f"{where}: unknown key(s) {', '.join(unknown)} (steps are [[steps]] tables): allowed "
                          f"{', '.join(LESSON_KEYS)}")
    steps = data.get("steps")
    if not isinstance(steps, list) or not 1 <= len(steps) <= MAX_STEPS:
        raise LessonError(f"{where}: a lesson needs 1 to {MAX_STEPS} [[steps]] tables, got "
                          f"{len(steps) if isinstance(steps, list) else 'none'}")
    order = data.get("order", LAST)
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= LAST:
        raise LessonError(f"{where}: 'order' must be a whole number from 1 to {LAST}, got {order!r}")
    return Lesson(path.stem, _text(data, "title", where), _text(data, "summary", where),
                  tuple(_step(step, path, i) for i, step in enumerate(steps)), order)


@functools.lru_cache(maxsize=64)
def _parsed(path: Path, modified: int) -> Lesson | LessonError:
    try:
        return parse_lesson(path.read_text(encoding="utf-8"), path)
    except (LessonError, OSError, UnicodeDecodeError) as error:
        return error if isinstance(error, LessonError) else LessonError(f"{path.name}: cannot be read: {error}")


def load_lessons(root: Path | None = None) -> tuple[dict[str, Lesson], list[str]]:
    """name -> lesson for every good file in `root` (`LESSON_ROOT` by default), in their `order` and then by
    name, and a message for every bad one. A file is parsed again only when it changes, so a teacher's edit shows on the next rerun."""
    root = LESSON_ROOT if root is None else root
    lessons, problems = {}, []
    for path in sorted(root.glob("*.toml")) if root.is_dir() else []:
        try:
            result = _parsed(path, path.stat().st_mtime_ns)
        except OSError as error:
            result = LessonError(f"{path.name}: cannot be read: {error}")
        if isinstance(result, LessonError):
            problems.append(str(result))
        else:
            lessons[result.name] = result
    return dict(sorted(lessons.items(), key=lambda item: (item[1].order, item[0]))), problems
