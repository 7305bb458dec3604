//! Generates the demo's gRPC service traits and servers (HttpArena's BenchmarkService, gRPC's
//! interop TestService) from linerate-grpc's .proto files with linerate-grpc's generator, as a
//! user's build script would. The messages are linerate-grpc's (extern paths): only the
//! services are written here, so no type exists twice. tests/grpc_generated.rs gets a user's
//! service with its own messages and descriptor set, from tests/proto/.
//!
//! Also names the commit the binary is built from (`LINERATE_COMMIT` for `linerate_build_info`
//! and `--version`): `$LINERATE_COMMIT` when set (a package build from a
//! tarball), else `git rev-parse --short=12 HEAD`, else `unknown`. It is built again when
//! HEAD or the branch it names moves, so it is never stale.

fn main() {
    commit();
    linerate_grpc::build::configure()
        .extern_path(".benchmark", "::linerate_grpc::proto::benchmark")
        .extern_path(".grpc.testing", "::linerate_grpc::proto::grpc::testing")
        .compile(
            &["benchmark.proto", "grpc/testing/test.proto"],
            &["../grpc/proto"],
        )
        .unwrap_or_else(fail);
    linerate_grpc::build::configure()
        .file_descriptor_set("greeter.bin")
        .compile(&["greeter.proto"], &["tests/proto"])
        .unwrap_or_else(fail);
}

/// One clear line (a .proto error names FILE:LINE:COLUMN), not a backtrace.
fn fail(e: linerate_grpc::build::Error) {
    eprintln!("linerate: {e}");
    std::process::exit(1);
}

/// `cargo:rustc-env=LINERATE_COMMIT=…`, and what makes it change.
fn commit() {
    println!("cargo:rerun-if-env-changed=LINERATE_COMMIT");
    if let Some(c) = std::env::var("LINERATE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        println!("cargo:rustc-env=LINERATE_COMMIT={}", c.trim());
        return;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // HEAD itself (a checkout of another branch or commit), the ref it names (a commit on
    // that branch) and packed-refs (where `git gc` moves refs), in this worktree's git
    // directory or the common one.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(r) = git(&["rev-parse", "--symbolic-full-name", "HEAD"]).filter(|r| r != "HEAD") {
        watched.push(r);
    }
    for w in watched {
        // A path that does not exist would run this script on every build.
        if let Some(path) =
            git(&["rev-parse", "--git-path", &w]).filter(|p| std::path::Path::new(p).exists())
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rustc-env=LINERATE_COMMIT={commit}");
}

/// `git ARGS` in this crate's directory: its first line, when git ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git").args(args).output().ok()?;
    let line = String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .next()?
        .trim()
        .to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}
