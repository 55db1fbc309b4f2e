# Harness base image: Debian bookworm (debootstrap minbase, imported offline as rollgate/debian-base) with
# bash, git, curl, python3 + pytest, patch, Node 22 and the pinned harness CLIs of runner/harness/*.ts
# (copied from the runner host's install cache, linked into /usr/local/bin). Built by
# `npm run build:images` (scripts/build-images.ts); no registry, no network during the build.
ARG BASE=rollgate/debian-base:bookworm
FROM ${BASE}
COPY node /usr/local/bin/node
COPY harnesses /opt/rollgate/harnesses
COPY bin /usr/local/bin
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME=/root
WORKDIR /polar/session
CMD ["sleep", "infinity"]
