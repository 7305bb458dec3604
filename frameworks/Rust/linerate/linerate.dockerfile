# linerate's TechEmpower entry, built from source (TechEmpower builds this file with the entry's
# directory as the context).
#
# The entry's crate (this directory) depends on the linerate-server and linerate-postgres
# libraries by path, inside linerate's workspace, until they are published: so the build
# takes linerate's sources at LINERATE_REF, puts this directory's sources in the entry's place
# there, and builds the entry's binary alone (no `linerate` product binary, none of its
# features). LINERATE_REF must be the revision this directory was taken from: its Cargo.lock
# is used as it is (--locked). A `linerate-src/` directory beside this file (a copy of the
# workspace: scripts/tfb-verify.sh puts the checkout's there) is used instead of the clone.
FROM rust:1.95-bookworm AS build
ARG LINERATE_GIT=https://github.com/linerate/linerate.git
ARG LINERATE_REF=main
COPY . /entry/
RUN if [ -d /entry/linerate-src ]; then mv /entry/linerate-src /linerate; \
    else git clone --depth 1 --branch "$LINERATE_REF" "$LINERATE_GIT" /linerate; fi \
    && rm -rf /linerate/frameworks/Rust/linerate \
    && cp -r /entry /linerate/frameworks/Rust/linerate
WORKDIR /linerate
# A benchmark build for the machine it runs on (TechEmpower builds and runs on the same
# server); the libraries themselves never set it.
ENV RUSTFLAGS="-C target-cpu=native"
RUN cargo build --release --locked -p linerate-techempower

FROM debian:bookworm-slim
COPY --from=build /linerate/target/release/linerate-techempower /usr/local/bin/linerate-techempower
# The database is TechEmpower's (postgres://benchmarkdbuser:benchmarkdbpass@tfb-database/
# hello_world) unless DATABASE_URL says otherwise; one connection per worker, one worker per
# CPU.
EXPOSE 8080
CMD ["linerate-techempower", "--addr", "0.0.0.0:8080"]
