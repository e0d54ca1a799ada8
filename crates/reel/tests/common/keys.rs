//! The `reel` binary run as a client of an S3 server (its credentials in the environment,
//! no store key from the test's own environment), and `reel key generate`.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

use reel_s3test::S3Server;
use reel_testkit::serve::reel_binary;

/// `reel ARGS` with the S3 server's credentials; `REEL_STORE_KEY` removed.
pub fn reel(args: &[&OsStr], s3: &S3Server) -> Output {
    Command::new(reel_binary())
        .args(args)
        .env("AWS_ACCESS_KEY_ID", s3.access_key())
        .env("AWS_SECRET_ACCESS_KEY", s3.secret_key())
        .env_remove("REEL_STORE_KEY")
        .output()
        .unwrap()
}

/// The standard output of a `reel` run that must have succeeded (`what` names it in the
/// failure, with both outputs).
pub fn succeeded(out: &Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `reel key generate FILE`, returning the new key's id.
pub fn generate_key(path: &Path, s3: &S3Server) -> String {
    let out = reel(&["key".as_ref(), "generate".as_ref(), path.as_os_str()], s3);
    let stdout = succeeded(&out, "reel key generate");
    assert!(stdout.contains("without the key"), "{stdout}");
    // "wrote store key <id> to …"
    stdout.split_whitespace().nth(3).unwrap().to_string()
}
