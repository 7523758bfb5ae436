"""lengen_core: the pure science engine of lengen: models, tasks, training and analysis (no streamlit, no
printing, no network). The application that stores, queues, prices and serves runs is `lengen`, one
layer above; nothing here imports it."""
