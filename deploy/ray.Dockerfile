# The lab's image with Ray (requirements-ray.txt), for every container of deploy/compose.yaml: the Ray
# head, the Ray workers and the app replicas run the same code. Built FROM the single-machine image,
# which stays as it is (docker run still serves one machine without Ray):
#   docker build -t lengen .                                            # then, from deploy/:
#   docker compose build                                                # builds this on top of it
# The GPU worker builds it on the CUDA image instead (BASE_IMAGE=lengen-gpu, compose.yaml's gpu profile).
ARG BASE_IMAGE=lengen
FROM ${BASE_IMAGE}
USER root
COPY requirements-ray.txt /app/
RUN pip install -r /app/requirements-ray.txt
USER lengen
# Ray keeps its sockets and logs under /tmp/ray (the image's TMPDIR); the runs go to LENGEN_HOME=/data.
