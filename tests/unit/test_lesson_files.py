"""Lesson files: every shipped lesson loads, and every mistake a teacher can make in one is a message that
names the file, the step, what is wrong and what is allowed (ui.lessons.files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lengen.presets import PRESETS
from lengen_core.config import RunConfig, with_changes
from ui.lessons.files import ELEMENTS, LESSON_PRESETS, LESSON_ROOT, LessonError, load_lessons, parse_lesson

GOOD_STEP = """
[[steps]]
title = "A step"
text = "Some sentences."
element = "carrier-chart"
preset = "RoPE"
question = "Why?"
answer = "Because."
"""
HEAD = 'title = "A lesson"\nsummary = "What it is about."\n'


def parse(text: str, name: str = "mine.toml"):
    return parse_lesson(text, Path(name))


def error_of(text: str, name: str = "mine.toml") -> str:
    with pytest.raises(LessonError) as raised:
        parse(text, name)
    return str(raised.value)


def test_every_shipped_lesson_loads_with_the_runs_it_names():
    lessons, problems = load_lessons()
    assert problems == []
    assert list(lessons)[:3] == ["why-rope-generalises", "what-sets-the-horizon", "one-head-to-a-transformer"]
    assert len(list(LESSON_ROOT.glob("*.toml"))) == len(lessons)
    for lesson in lessons.values():
        for step in lesson.steps:
            assert step.element in ELEMENTS
            assert all(label in LESSON_PRESETS for label in step.presets)
            assert (step.config is not None) == (ELEMENTS[step.element].runs == "config")


def test_the_renderers_are_the_registry():
    from ui.lessons.elements import RENDERERS

    assert set(RENDERERS) == set(ELEMENTS)


def test_a_good_lesson_parses_with_its_config_and_fixed_settings():
    lesson = parse(HEAD + GOOD_STEP + """
[[steps]]
title = "Train"
text = "Train it."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
encoding = "learned"
seed = 4
""", "walk.toml")
    assert lesson.name == "walk" and len(lesson.steps) == 2
    assert lesson.steps[0].presets == ("RoPE",)
    assert lesson.steps[1].config == with_changes(RunConfig(), encoding="learned", seed=4)
    assert lesson.steps[1].fixed == ("encoding", "seed")
    assert lesson.runs() == ["Preset: RoPE", "to train: encoding learned, seed 4"]


def test_continues_may_name_a_preset():
    lesson = parse(HEAD + """
[[steps]]
title = "Longer"
text = "Train it longer."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
continues = "RoPE"
steps = 100
""")
    config = lesson.steps[0].config
    assert config.train.continues == PRESETS["RoPE"].run_id() and config.train.keep_training
    assert config.train.steps == 100 and config.model == PRESETS["RoPE"].model
    assert lesson.runs() == [f"to train: steps 100, continues run {PRESETS['RoPE'].run_id()}"]


def test_a_delay_element_reads_a_delay_preset_and_a_length_element_a_length_one():
    delay = error_of(HEAD + GOOD_STEP.replace('element = "carrier-chart"', 'element = "delay-curve"'))
    assert "element 'delay-curve' reads a delay preset, and 'RoPE' is not: allowed 'Delay-copy RoPE'" in delay, delay
    length = error_of(HEAD + GOOD_STEP.replace('preset = "RoPE"', 'preset = "Delay-copy RoPE"'))
    assert "element 'carrier-chart' reads a length preset, and 'Delay-copy RoPE' is not: allowed 'RoPE'" in length


@pytest.mark.parametrize("change, expected", [
    ('element = "carrier-chart"', 'mine.toml, step 1 (\'A step\'): unknown element \'dilution\': allowed accuracy-overlay'),
    ('preset = "RoPE"', "mine.toml, step 1 ('A step'): unknown preset 'Rope': allowed 'RoPE', 'Learned (APE)'"),
])
def test_a_missing_element_or_unknown_preset_says_the_file_step_and_what_is_allowed(change, expected):
    wrong = {'element = "carrier-chart"': 'element = "dilution"', 'preset = "RoPE"': 'preset = "Rope"'}[change]
    message = error_of(HEAD + GOOD_STEP.replace(change, wrong))
    assert message.startswith(expected), message


def test_a_bad_config_names_the_setting_and_its_range():
    message = error_of(HEAD + """
[[steps]]
title = "Train"
text = "Train it."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
offset = 40
""")
    assert message == ("mine.toml, step 1 ('Train'): bad config: offset 40 must be smaller than the training "
                       "length 16")
    message = error_of(HEAD + GOOD_STEP.replace('preset = "RoPE"', "").replace("carrier-chart", "train-form")
                       + "[steps.config]\nlayers = 2\n")
    assert "unknown setting(s) layers in [steps.config]: allowed task, vocab_size" in message


@pytest.mark.parametrize("text, part", [
    (HEAD + GOOD_STEP.replace('preset = "RoPE"', 'preset = "Transformer RoPE"'),
     "element 'carrier-chart' reads a single head, and 'Transformer RoPE' is not: allowed 'RoPE'"),
    (HEAD + GOOD_STEP.replace('preset = "RoPE"', ""), "element 'carrier-chart' needs one preset ('preset')"),
    (HEAD + GOOD_STEP.replace('question = "Why?"', ""), "'question' must be non-empty text (a question for the class)"),
    (HEAD + GOOD_STEP + "[steps.options]\nmultiple = 4\n", "this element takes no option 'multiple': allowed none"),
    (HEAD + GOOD_STEP.replace("carrier-chart", "heatmap") + "[steps.options]\nmultiple = 3\n",
     "option multiple = 3 is not allowed: allowed 1, 2, 4, 8, 16"),
    (HEAD + GOOD_STEP.replace("question", "qestion"), "unknown key(s) qestion: allowed title, text, element"),
    (HEAD, "mine.toml: a lesson needs 1 to 20 [[steps]] tables, got none"),
    ('title = "x"\n' + GOOD_STEP, "mine.toml: 'summary' must be non-empty text"),
    (HEAD + "[[steps]\n", "mine.toml: not valid TOML"),
    ("order = 0\n" + HEAD + GOOD_STEP, "mine.toml: 'order' must be a whole number from 1 to 999, got 0"),
])
def test_every_mistake_is_a_message(text, part):
    assert part in error_of(text)


def test_a_bad_file_is_a_message_and_the_good_ones_still_load(tmp_path):
    (tmp_path / "good.toml").write_text(HEAD + GOOD_STEP, encoding="utf-8")
    (tmp_path / "bad.toml").write_text(HEAD + GOOD_STEP + GOOD_STEP.replace("RoPE", "Nope"), encoding="utf-8")
    lessons, problems = load_lessons(tmp_path)
    assert list(lessons) == ["good"]
    assert problems == ["bad.toml, step 2 ('A step'): unknown preset 'Nope': allowed "
                        + ", ".join(map(repr, LESSON_PRESETS))]


TRAIN_STEP = """
[[steps]]
title = "Train"
text = "Train it."
element = "train-form"
question = "Q?"
answer = "A."
[steps.config]
seed = 4
"""


def test_a_training_step_sets_its_pace_beside_the_settings_and_the_run_stays_the_same():
    from lengen.stepping import Pace

    lesson = parse(HEAD + TRAIN_STEP + "start_paused = true\nsteps_per_second = 12.5\n")
    step = lesson.steps[0]
    assert step.pace == Pace(start_paused=True, steps_per_second=12.5)
    assert step.config == with_changes(RunConfig(), seed=4) and step.fixed == ("seed",)  # not settings of the run
    assert parse(HEAD + TRAIN_STEP).steps[0].pace == Pace()


@pytest.mark.parametrize("line, part", [
    ("steps_per_second = -3", ("mine.toml, step 1 ('Train'): steps_per_second = -3 in [steps.config] is not allowed: "
                              "steps per second must be 0 (as fast as possible) or a number from 0.2 to 1,000")),
    ("steps_per_second = 5000", "steps_per_second = 5000 in [steps.config] is not allowed"),
    ('steps_per_second = "fast"', "steps_per_second = 'fast' in [steps.config] is not allowed"),
    ("start_paused = 1", "start_paused = 1 in [steps.config] is not allowed: start paused must be true or false"),
    ("start_pause = true", "unknown setting(s) start_pause in [steps.config]: allowed task"),
])
def test_a_bad_pace_names_the_file_the_step_and_what_is_allowed(line, part):
    assert part in error_of(HEAD + TRAIN_STEP + line + "\n")


def test_the_shipped_training_steps_go_at_a_pace_a_class_can_follow():
    """Each shipped live training starts paused or is paced so that its fewest steps (early stopping needs
    `patience` of them) take 20 s or more to watch."""
    from lengen.budget import shortest_training_steps

    lessons, _ = load_lessons()
    for lesson in lessons.values():
        for step in lesson.steps:
            if step.config is not None:
                assert step.pace.start_paused or step.pace.seconds(shortest_training_steps(step.config), 0) >= 20, step.title
