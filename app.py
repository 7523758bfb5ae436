"""lengen: length generalisation in attention, live: the router of its pages. Served by `streamlit run
serve.py` (this app plus the route that streams a run's zip); `streamlit run app.py` serves it alone."""

import sys

import streamlit as st

from ui import early
from ui.address import remember_gestures, write_link

st.set_page_config(page_title="lengen", page_icon=early.FAVICON, layout="wide")
remember_gestures()  # Back and Forward: one history entry per navigation a person makes (ui.address)
# Before the seconds of importing torch, pandas and the lab: the browser starts loading plotly.js (ui.early)
plotly_early = early.load_plotly_early()
early.wait_for_the_lab()  # serve.py imports what follows as the server starts: wait for it, not import it twice

import ui.training.pool  # after the early chart, on purpose
from lengen.runtime import limit_heap_growth, one_torch_thread
from ui.lessons.view import LESSON, LESSON_PAGE, back_to_lesson, checked_at_start, present_style, presenting
from ui.state import run_sidebar
from ui.widgets import readable_layout

# The server's event loop (health checks, static files, websockets) shares the interpreter lock with
# every session's script thread; handing the lock on every 1 ms instead of 5 ms keeps it answering
# while a class's pages run (load test, 20 sessions, one run each: worst health check 1.8 s -> 0.4 s).
sys.setswitchinterval(0.001)
limit_heap_growth()  # long attention blocks give their memory back (lengen.runtime)
one_torch_thread()  # the analyses on one thread: several times faster when the cores are shared (lengen.runtime)
readable_layout()  # metric labels wrap, side-by-side charts stack on narrow screens
lessons = st.Page(LESSON_PAGE, title="Lessons", icon=":material/school:")
page = st.navigation([
    st.Page("pages/start.py", title="Start", icon=":material/home:", default=True),
    lessons,
    st.Page("pages/train.py", title="Train", icon=":material/model_training:"),
    st.Page("pages/attention.py", title="Attention", icon=":material/grid_on:"),
    st.Page("pages/carrier.py", title="Carrier", icon=":material/ssid_chart:"),
    st.Page("pages/dilution.py", title="Dilution", icon=":material/trending_down:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
    st.Page("pages/sweeps.py", title="Sweeps", icon=":material/grid_view:"),
    st.Page("pages/transformer.py", title="Transformer", icon=":material/stacks:"),
    st.Page("pages/delays.py", title="Delays", icon=":material/timer:"),
    st.Page("pages/theory.py", title="Theory", icon=":material/functions:"),
], position="hidden" if presenting() else "sidebar")  # presenter mode: no page list either
checked_at_start()  # every lesson file is checked once, when the server starts (ui.lessons.view)
on_lessons = page.title == lessons.title  # (titles are unique; the url paths stay st.navigation's own)
if not on_lessons and LESSON in st.query_params:  # /?lesson=NAME&step=N opens the lesson
    st.switch_page(lessons, query_params=st.query_params.to_dict())
if presenting():  # a projector: presenter mode's layout on a lesson and on the page a step opened
    present_style()
if not on_lessons:  # a lesson picks its own runs: no run picker, and the link is the lesson's
    run_sidebar()  # the selected run, shown and switchable on every page
    if presenting():
        back_to_lesson(lessons)
try:
    page.run()  # a page that stops early writes its link first (ui.address.stop); a rerun or a page switch leaves
    # its changes to the next run
finally:
    early.done(plotly_early)  # the page's own charts are drawn (or it stopped): the early chart goes
write_link()  # the run's link, in one step (ui.address)
ui.training.pool.usable_pool()  # the training processes start after the first page is drawn, and warm up
