#!/bin/sh
# Fill deploy/nginx.conf's placeholders and run nginx in the foreground (the proxy container's command).
#   LENGEN_REPLICAS="app-1:8501 app-2:8501"   one upstream server per replica, in this order
#   LENGEN_PROXY_LISTEN=0.0.0.0:8080           where the proxy listens
#   LENGEN_PROXY_TEMPLATE, LENGEN_PROXY_PREFIX the template and nginx's working folder
#   LENGEN_PROXY_RENDER_ONLY=1                 write $LENGEN_PROXY_PREFIX/nginx.conf and stop (the tests)
set -eu
template=${LENGEN_PROXY_TEMPLATE:-/etc/lengen/nginx.conf.template}
prefix=${LENGEN_PROXY_PREFIX:-/tmp/lengen-proxy}
[ -n "${LENGEN_REPLICAS:-}" ] || { echo "LENGEN_REPLICAS is empty: give host:port of each replica" >&2; exit 2; }
upstreams=""
for replica in $LENGEN_REPLICAS; do
    upstreams="$upstreams server $replica max_fails=1 fail_timeout=10s;"
done
mkdir -p "$prefix/temp"
sed -e "s|@LISTEN@|${LENGEN_PROXY_LISTEN:-0.0.0.0:8080}|" -e "s|@UPSTREAMS@|$upstreams|" "$template" > "$prefix/nginx.conf"
[ "${LENGEN_PROXY_RENDER_ONLY:-0}" = 1 ] && exit 0
exec nginx -p "$prefix" -c nginx.conf
