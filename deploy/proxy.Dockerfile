# The reverse proxy in front of the app replicas: Debian's nginx with deploy/nginx.conf, its upstreams
# filled at start from LENGEN_REPLICAS (host:port of each replica, space-separated) by proxy-start.sh.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx-light \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/nginx.conf /etc/lengen/nginx.conf.template
COPY deploy/proxy-start.sh /usr/local/bin/lengen-proxy
EXPOSE 8080
CMD ["/bin/sh", "/usr/local/bin/lengen-proxy"]
