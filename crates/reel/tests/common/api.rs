//! The REST API of a test server, through the one client of `reel-api`: typed calls for what
//! a test does with the API, raw ones for what it checks about the API itself (status codes,
//! error codes, malformed bodies, other tokens). Every client here is strict: an answer with a
//! field its reel-api type does not keep fails the test.

use std::path::Path;

use reel_api::{Client, ClientOptions, RawAnswer};
use serde_json::Value;

use super::Server;

/// The client options of the tests: strict answers, a fresh connection per request (hyper
/// closes a connection it answered before reading the body, as a 401 does on purpose here).
pub fn options() -> ClientOptions {
    ClientOptions {
        timeout: None,
        fresh_connections: true,
        strict: true,
    }
}

/// The initial admin password `reel serve` wrote into its data directory.
pub fn admin_password(data: &Path) -> String {
    std::fs::read_to_string(data.join("initial-admin-password"))
        .unwrap()
        .trim()
        .to_string()
}

/// A typed client logged in as `admin`.
pub fn admin(server: &Server, data: &Path) -> Client {
    let base = server.http.clone().expect("the console runs");
    Client::log_in(&base, options(), "admin", &admin_password(data)).expect("admin login")
}

/// `reel ctl ARGS` against `server` as `admin`: (success, stdout, stderr).
pub fn ctl(server: &Server, data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_reel"))
        .args([
            "ctl",
            "--url",
            server.http.as_deref().expect("the console runs"),
        ])
        .args(["--user", "admin"])
        .args(args)
        .env("REEL_PASSWORD", admin_password(data))
        .env_remove("REEL_TOKEN")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A typed call's outcome: its answer, or the error status (no answer at all fails the test).
pub fn outcome<T>(r: Result<T, reel_api::Error>) -> Result<T, u16> {
    r.map_err(|e| e.status().unwrap_or_else(|| panic!("no answer: {e}")))
}

/// Raw requests, each with the token a test names.
#[derive(Clone)]
pub struct Api {
    pub client: Client,
}

impl Api {
    /// The API at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Api {
        Api {
            client: Client::new(base, options()).unwrap(),
        }
    }

    /// The API of `server`'s console.
    pub fn of(server: &Server) -> Api {
        Api::new(&server.http.clone().expect("the console runs"))
    }

    pub fn base(&self) -> &str {
        self.client.base()
    }

    /// A typed client with `token`.
    pub fn as_user(&self, token: &str) -> Client {
        self.client.with_token(token)
    }

    /// The answer as it came (status, Retry-After, text).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> RawAnswer {
        let client = match token {
            Some(t) => self.client.with_token(t),
            None => self.client.anonymous(),
        };
        client
            .raw(method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// (status, JSON body or Null).
    pub fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (u16, Value) {
        let answer = self.send(method, path, token, body);
        (answer.status, answer.json())
    }

    /// A 2xx answer's body.
    pub fn ok(&self, method: &str, path: &str, token: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string());
        let (status, v) = self.call(method, path, Some(token), body.as_deref());
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// Asserts an error answer with `status` and `code`; returns its message.
    pub fn err(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        status: u16,
        code: &str,
    ) -> String {
        let (got, v) = self.call(method, path, token, body);
        assert_eq!(got, status, "{method} {path}: {v}");
        assert_eq!(v["error"]["code"], code, "{method} {path}: {v}");
        let message = v["error"]["message"].as_str().unwrap_or("").to_string();
        assert!(!message.is_empty(), "{method} {path}: an error message");
        message
    }

    /// A session token of `user` (the login must succeed).
    pub fn login(&self, user: &str, password: &str) -> String {
        self.client
            .login(user, password)
            .unwrap_or_else(|e| panic!("login as {user}: {e}"))
            .token
    }
}
