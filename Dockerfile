# lengen: the dashboard, served on port 8501.
#   docker build -t lengen .                                   # CPU build of torch (default)
#   docker build -t lengen-gpu --build-arg TORCH_VARIANT=cu128 .   # a CUDA 12.8 build of torch
#   docker run -p 8501:8501 -v lengen-runs:/data lengen           # add --gpus all for the GPU image
# The GPU image needs the NVIDIA Container Toolkit and a host driver >= 570 on Linux (docs/device.md);
# it trains and analyses on the GPU by default (LENGEN_DEVICE=auto; -e LENGEN_DEVICE=cpu keeps it off).
# A shared instance, with limits (docs/serving.md):
#   docker run --read-only --tmpfs /tmp:rw,size=1g --memory 8g --cpus 2 --pids-limit 512 \
#     -e STREAMLIT_SERVER_ALLOWED_HOSTS=class.example.org -p 8501:8501 -v lengen-runs:/data lengen
FROM python:3.11-slim

ARG TORCH_VARIANT=cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    LENGEN_HOME=/data \
    TMPDIR=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    MALLOC_MMAP_THRESHOLD_=8388608 \
    MALLOC_TRIM_THRESHOLD_=33554432 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    CUBLAS_WORKSPACE_CONFIG=:4096:8
# The NVIDIA runtime exposes the GPUs and their compute libraries to the container (ignored without one);
# cuBLAS is deterministic only with a fixed workspace, so a CUDA training is the same bytes every time.

# tini reaps the training processes and forwards signals: the server is not PID 1's special case.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 lengen \
    && mkdir -p /data \
    && chown lengen:lengen /data

WORKDIR /app
COPY requirements.txt .
# torch first, from the index of the chosen variant; the rest from PyPI (torch==2.13.0 already satisfied).
RUN pip install --index-url "https://download.pytorch.org/whl/${TORCH_VARIANT}" torch==2.13.0 \
    && pip install -r requirements.txt

COPY .streamlit/ .streamlit/
COPY app.py serve.py ./
COPY lengen_core/ lengen_core/
COPY lengen/ lengen/
COPY ui/ ui/
COPY pages/ pages/
COPY assets/ assets/
COPY docs/ docs/
# readable by the runtime user whatever modes the build context had (a working tree, not only a clone)
RUN chmod -R a+rX /app

USER lengen
VOLUME ["/data"]
EXPOSE 8501
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["streamlit", "run", "serve.py", "--server.address=0.0.0.0", "--server.port=8501"]
