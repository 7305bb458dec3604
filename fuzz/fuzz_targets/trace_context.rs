//! Fuzzes linerate-server's W3C Trace Context readers (`trace/context.rs`) over arbitrary
//! bytes: `traceparent`, `tracestate` and a trusted `X-Request-Id`, alone and on a request
//! that begins its trace with them; the checks live in `trace::context::fuzz_check`, which
//! also replays the seeds on stable.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    linerate_server::fuzzing::trace_context(data);
});
