//! The REST API of a test server: one admin session, JSON in and out, and a count of 5xx
//! answers (a race or bad input must end in a 4xx, never in a server error).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::Server;

#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub token: String,
    agent: ureq::Agent,
    /// 5xx answers seen (a race must end in a 4xx, never in a server error).
    pub server_errors: Arc<AtomicU64>,
}

impl Api {
    /// (status, JSON body or Null).
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let req = ureq::http::Request::builder()
            .method(method)
            .uri(&url)
            .header("Authorization", format!("Bearer {}", self.token));
        let response = match body {
            Some(b) => self.agent.run(
                req.header("Content-Type", "application/json")
                    .body(b.to_string())
                    .unwrap(),
            ),
            None => self.agent.run(req.body(()).unwrap()),
        }
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status().as_u16();
        let text = response.into_body().read_to_string().unwrap_or_default();
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 500 {
            eprintln!("{method} {path}: {status} {value}");
            self.server_errors.fetch_add(1, Ordering::Relaxed);
        }
        (status, value)
    }

    /// A 2xx answer's body.
    pub fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {v}"
        );
        v
    }

    /// Logged in as `admin` with the password the server wrote into its data directory.
    pub fn admin(server: &Server, data: &Path) -> Api {
        let password = std::fs::read_to_string(data.join("initial-admin-password")).unwrap();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections(0)
            .build()
            .into();
        let mut api = Api {
            base: server.http.clone().expect("the console runs"),
            token: String::new(),
            agent,
            server_errors: Arc::new(AtomicU64::new(0)),
        };
        let (status, v) = api.call(
            "POST",
            "/api/v1/login",
            Some(json!({"username": "admin", "password": password.trim()})),
        );
        assert_eq!(status, 200, "login: {v}");
        api.token = v["token"].as_str().unwrap().to_string();
        api
    }

    /// The raw text of a GET (e.g. `/metrics`): (status, body).
    pub fn text(&self, path: &str) -> (u16, String) {
        let response = self
            .agent
            .get(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {}", self.token))
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = response.status().as_u16();
        (
            status,
            response.into_body().read_to_string().unwrap_or_default(),
        )
    }
}
