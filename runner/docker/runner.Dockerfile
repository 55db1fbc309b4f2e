# The runner itself: Node 22 and the repository's runner code with its production dependencies, on the same
# offline Debian base (bubblewrap included for `--runtime local`, which then needs `--privileged` or the
# namespace capabilities; `--runtime docker` needs the host's Docker socket mounted). Built by
# `npm run build:images` (scripts/build-images.ts).
#   docker run --network host -v /var/run/docker.sock:/var/run/docker.sock rollgate/runner:<version> \
#     runner --edge https://edge.example --runtime docker --upstream http://127.0.0.1:8000
ARG BASE=rollgate/debian-base:bookworm
FROM ${BASE}
COPY node /usr/local/bin/node
COPY app /opt/rollgate
WORKDIR /opt/rollgate
ENV NODE_ENV=production PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
ENTRYPOINT ["/usr/local/bin/node", "/opt/rollgate/cli/rollgate.ts"]
CMD ["runner", "--help"]
