"""The Lessons page's parts: the index of lessons, one step of a lesson, and the link flags.

The link is the lesson's whole state, as TensorFlow Playground's is: `lesson=NAME&step=N` (N from 1)
opens a lesson at a step, and Back and Next rewrite `step`; `present=1` is presenter mode (no sidebar,
no control the step does not use, larger text and charts for a projector); `lock=1` is for students'
links (the settings a lesson fixes for a run to train cannot be changed). A bad value is a message
that says what is allowed, and the lesson opens at its first step.
"""

from __future__ import annotations

import logging

import streamlit as st

from ui.address import in_link, set_in_link
from ui.lessons.elements import render
from ui.lessons.files import ELEMENTS, LESSON_PRESETS, Lesson, Step, load_lessons
from ui.state import plain, select_run

LOG = logging.getLogger(__name__)
LESSON_PAGE = "pages/lessons.py"
LESSON, STEP, PRESENT, LOCK = "lesson", "step", "present", "lock"
LAST_STEP_KEY = "_lesson_last_step"  # (name, title, step) of the lesson step this session showed last
# Presenter mode: the words (text, caption, question) and the element side by side; on a step that trains, a
# live training's four charts take more of the width.
PRESENT_COLUMNS, TRAIN_COLUMNS = (2, 3), (3, 5)

# Presenter mode, for a 1024×768 projector: no sidebar or its toggle, no toolbar, no CSV buttons; margins and
# gaps tight so that a step (its title beside Back and Next, its text, caption and question beside the chart)
# fits the screen without scrolling; every text, an input's value as its label, in one readable size.
PRESENT_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stHeader"], [data-testid="stToolbar"], [data-testid="stDecoration"], [data-testid="stDownloadButton"] {
    display: none !important;
}
[data-testid="stMainBlockContainer"] { max-width: 100% !important; padding: 0.25rem 1.25rem 0.2rem !important; }
[data-testid="stMainBlockContainer"] [data-testid="stVerticalBlock"] { gap: 0.5rem !important; }
.st-key-lesson-element-train-form [data-testid="stVerticalBlock"] { gap: 0.25rem !important; }  /* the live view:
   its status, controls and two rows of 300 px charts fit 768 px */
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li, [data-testid="stExpander"] summary p,
[data-testid="stWidgetLabel"] p, [data-testid="stNumberInputField"], [data-testid="stSelectbox"] input, button p,
[data-testid="stMetricValue"] div, [data-testid="stProgress"] p {
    font-size: 1.1rem !important; line-height: 1.35 !important;
}
[data-testid="stCaptionContainer"], [data-testid="stCaptionContainer"] p,
[data-testid="stAlertContentSuccess"] p, [data-testid="stAlertContentWarning"] p, [data-testid="stAlertContentInfo"] p,
[data-testid="stMetricDelta"] p, [data-testid="stMetricLabel"] p {
    font-size: 0.95rem !important; line-height: 1.35 !important;
}
[data-testid="stAlert"] > div { padding: 0.45rem 0.75rem !important; }
[data-testid="stHeading"] h1 { font-size: 2rem !important; padding: 0 !important; }
[data-testid="stHeading"] h2 { font-size: 1.8rem !important; padding: 0 !important; }
[data-testid="stHeading"] { margin-bottom: 0.4rem !important; }
.st-key-lesson-element-train-form [data-testid="stCaptionContainer"],
.st-key-lesson-element-train-form [data-testid="stCaptionContainer"] p { font-size: 0.85rem !important; }
.st-key-lesson-notes [data-testid="stWidgetLabel"] p, .st-key-lesson-notes [data-testid="stNumberInputField"],
.st-key-lesson-notes [data-testid="stSelectbox"] input { font-size: 1rem !important; }
.st-key-lesson-notes [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] {  /* a Train form beside its */
    flex: 1 1 40% !important; min-width: 40% !important;                              /* chart: two settings a row */
}
[data-testid="stButton"] button { min-height: 2.2rem !important; padding: 0.1rem 0.75rem !important; }
</style>"""


def flag(name: str) -> bool:
    """A link flag: on when the link says `name=1` (or true)."""
    return st.query_params.get(name, "").lower() in ("1", "true")


def presenting() -> bool:
    return flag(PRESENT)


def present_style() -> None:
    """Presenter mode's CSS (app.py calls it on every page when the link says present=1: a lesson's step, and the
    page a step's Open shows)."""
    st.html(PRESENT_CSS)


@st.cache_resource(show_spinner=False)
def checked_at_start() -> tuple[str, ...]:
    """Every lesson file is read and checked once when the server starts (app.py); what is wrong is logged
    for whoever runs the server, and shown on the Lessons page."""
    _, problems = load_lessons()
    for problem in problems:
        LOG.warning("lesson file not shown: %s", problem)
    return tuple(problems)


def index(lessons: dict[str, Lesson], problems: list[str]) -> None:
    """Each lesson: its title, summary, number of steps and the runs it needs, and its link."""
    for problem in problems:
        st.error(f"This lesson file is not shown: {plain(problem)}", icon=":material/error:")
    if not lessons:
        st.info("No lessons here: a lesson is a .toml file in assets/lessons/ (docs/lessons.md).")
    for name, lesson in lessons.items():
        with st.container(border=True):
            st.subheader(lesson.title)
            st.markdown(lesson.summary)
            st.caption(f"{len(lesson.steps)} steps · runs it needs: {', '.join(lesson.runs()) or 'none'} · "
                       f"link: `?lesson={name}&step=1` (add `&present=1` for a projector, `&lock=1` for students)")
            left, right = st.columns(2)
            left.button("Open", icon=":material/play_arrow:", key=f"lesson-open-{name}", width="stretch",
                        on_click=_open, args=(name, False), help=f"Open this lesson at step 1: ?lesson={name}&step=1")
            right.button("Present", icon=":material/slideshow:", key=f"lesson-present-{name}", width="stretch",
                         on_click=_open, args=(name, True),
                         help=f"Presenter mode, for a projector: ?lesson={name}&step=1&present=1")


def _open(name: str, present: bool) -> None:
    """Open lesson `name` at step 1 on this page; the address bar then holds its whole link, to copy or share
    (a page link's parameters would open it without showing them)."""
    st.query_params.from_dict({LESSON: name, STEP: "1", **({PRESENT: "1"} if present else {})})


def step_number(lesson: Lesson) -> int:
    """The step the link names (from 1); a bad one is a message and step 1."""
    text = (in_link(STEP) or ["1"])[-1]
    if text.isdigit() and 1 <= int(text) <= len(lesson.steps):
        return int(text)
    st.warning(f"Link parameter 'step' is {plain(text[:20])!s}: this lesson has steps 1 to {len(lesson.steps)}; "
               "showing step 1.", icon=":material/link_off:")
    set_in_link(STEP, "1")  # the address names the step shown
    return 1


def _go(number: int) -> None:
    set_in_link(STEP, str(number))  # the link follows the step (written as the run ends: ui.address)


def _back_and_next(number: int, count: int, back, forward) -> None:
    back.button("Back", icon=":material/arrow_back:", disabled=number == 1, on_click=_go, args=(number - 1,),
                key="lesson-back", width="stretch")
    forward.button("Next", icon=":material/arrow_forward:", disabled=number == count, on_click=_go,
                   args=(number + 1,), key="lesson-next", width="stretch")


def _question(step: Step) -> None:
    with st.container(border=True, key="lesson-question"):
        st.markdown(f"**Question.** {step.question}")
        with st.expander("Show the answer"):
            st.markdown(step.answer)


def _element(step: Step, notes=None) -> None:
    if len(step.presets) == 1:  # the other pages open on the run this step is about
        select_run(LESSON_PRESETS[step.presets[0]].run_id())
    with st.container(key=f"lesson-element-{step.element}"):
        render(step, flag(LOCK), notes)


def show_step(lesson: Lesson, number: int) -> None:
    """Step `number` of `lesson`: where it is, its text, its element, its question and Back / Next. In
    presenter mode all of it on one screen: Back and Next beside the title, the text and the question beside
    the element."""
    step, count = lesson.steps[number - 1], len(lesson.steps)
    where = f"{plain(lesson.title)} · **Step {number} of {count}**"
    if presenting():
        bar, back, forward = st.columns([6, 1, 1], vertical_alignment="center")
        bar.caption(where)
        bar.header(step.title)
        _back_and_next(number, count, back, forward)
        words, element = st.columns(TRAIN_COLUMNS if step.config is not None else PRESENT_COLUMNS,
                                     gap="medium")
        with words:
            st.markdown(step.text)
            if step.config is not None:  # the question before the form, whose messages grow as it trains
                _question(step)
            notes = st.container(key="lesson-notes")  # the chart's caption (or the Train form), beside it
            if step.config is None:
                _question(step)
        with element:
            _element(step, notes)
        return
    st.caption(where)
    st.header(step.title)
    st.markdown(step.text)
    _element(step)
    _question(step)
    back, _, forward = st.columns([1, 3, 1])
    _back_and_next(number, count, back, forward)


def lessons_page() -> None:
    """The index, or the step a link names; a link to a lesson that is not here says which are."""
    lessons, problems = load_lessons()
    name = st.query_params.get(LESSON)
    if name is None:  # the page drew the title and its lead
        st.caption(f"A lesson is a file in `assets/lessons/`: its steps can use {len(ELEMENTS)} elements of the "
                   "pages (docs/lessons.md).")
        index(lessons, problems)
        return
    if name not in lessons:
        bad = next((p for p in problems if p.startswith(f"{name}.toml")), None)
        st.error(f"This lesson cannot be opened: {plain(bad)}" if bad else
                 f"There is no lesson named {plain(name[:60])!s} here: allowed {', '.join(lessons) or 'none'}.",
                 icon=":material/error:")
        index(lessons, [])
        return
    number = step_number(lessons[name])
    st.session_state[LAST_STEP_KEY] = (name, lessons[name].title, number)  # for "Back to the lesson" elsewhere
    show_step(lessons[name], number)


def back_to_lesson(lessons_page) -> None:
    """In presenter mode on another page (a step's Open): a link back to the step the class left, presenter mode
    kept; nothing when this session opened no lesson."""
    if (last := st.session_state.get(LAST_STEP_KEY)) is None:
        return
    name, title, number = last
    st.page_link(lessons_page, label=f"Back to the lesson: {title}, step {number}", icon=":material/arrow_back:",
                 query_params={LESSON: name, STEP: str(number), PRESENT: "1"})
