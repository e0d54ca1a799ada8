//! What an unauthenticated client may cost: request bodies are bounded, and logins are
//! rate-limited and capped per client address, and capped overall (each is an Argon2 hash of
//! 19 MiB and tens of milliseconds of a core).
//!
//! Per client address (IPv6 by its /64, what one host usually has to itself): a budget of
//! [`LOGIN_BURST`] failed logins that refills by one every [`LOGIN_REFILL`]; with the budget
//! spent, logins get 429 with `Retry-After` before their body is read. At most
//! [`LOGIN_PER_CLIENT`] logins of one client run at once (more get 429 at once), and at most
//! [`LOGIN_HASHES`] hash at once in the whole server (the rest wait their turn, up to
//! [`LOGIN_QUEUE`] waiting; more get 429).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use parking_lot::Mutex;

use super::error::ApiError;

/// Largest request body of the API (no route takes more than a few hundred bytes).
pub const BODY_MAX: usize = 64 << 10;
/// Largest login body: a username (at most 64 characters) and a password (at most 1024).
pub const LOGIN_BODY_MAX: usize = 4 << 10;
/// An oversized body is read and dropped up to this much, so the client reads its 413
/// (closing on unread data resets the connection, and the answer with it); beyond, the
/// connection is closed.
const DRAIN_MAX: usize = 2 << 20;

pub const LOGIN_BURST: f64 = 10.0;
pub const LOGIN_REFILL: Duration = Duration::from_secs(6);
pub const LOGIN_PER_CLIENT: u32 = 2;
pub const LOGIN_HASHES: usize = 2;
pub const LOGIN_QUEUE: usize = 64;
/// Clients remembered at most; the longest idle is forgotten first (a forgotten client
/// starts again with a full budget, so this only bounds memory).
const CLIENTS_MAX: usize = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ClientKey(u128);

fn client_key(ip: IpAddr) -> ClientKey {
    match ip.to_canonical() {
        IpAddr::V4(v4) => ClientKey(u128::from(u32::from(v4))),
        // The /64: one host, or one customer's network.
        IpAddr::V6(v6) => ClientKey(u128::from(v6) & !((1u128 << 64) - 1) | (1 << 127)),
    }
}

struct Client {
    budget: f64,
    refilled: Instant,
    in_flight: u32,
}

impl Client {
    fn refill(&mut self, now: Instant) {
        let gained = now.duration_since(self.refilled).as_secs_f64() / LOGIN_REFILL.as_secs_f64();
        self.budget = (self.budget + gained).min(LOGIN_BURST);
        self.refilled = now;
    }
}

pub struct LoginLimits {
    clients: Mutex<HashMap<ClientKey, Client>>,
    hashes: Arc<tokio::sync::Semaphore>,
    waiting: std::sync::atomic::AtomicUsize,
}

/// A login turned away: 429 with `Retry-After`.
#[derive(Debug)]
pub struct Refused {
    pub message: String,
    pub retry_after: u64,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        ApiError::too_many_requests(self.message, self.retry_after)
    }
}

/// One admitted login: releases its client's slot when dropped.
pub struct LoginTicket {
    limits: Arc<LoginLimits>,
    key: ClientKey,
}

impl Drop for LoginTicket {
    fn drop(&mut self) {
        if let Some(c) = self.limits.clients.lock().get_mut(&self.key) {
            c.in_flight = c.in_flight.saturating_sub(1);
        }
    }
}

impl LoginTicket {
    /// Counts a failed login (a wrong password, an oversized body) against the client.
    pub fn failed(&self) {
        if let Some(c) = self.limits.clients.lock().get_mut(&self.key) {
            c.budget -= 1.0;
        }
    }

    /// Waits for a hash slot (the server-wide cap); 429 when too many already wait.
    pub async fn hash_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Refused> {
        use std::sync::atomic::Ordering;
        let waiting = self.limits.waiting.fetch_add(1, Ordering::AcqRel);
        let result = if waiting >= LOGIN_QUEUE {
            Err(Refused {
                message: "too many logins at once; try again shortly".into(),
                retry_after: 1,
            })
        } else {
            self.limits
                .hashes
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| Refused {
                    message: "reel is shutting down".into(),
                    retry_after: 5,
                })
        };
        self.limits.waiting.fetch_sub(1, Ordering::AcqRel);
        result
    }
}

impl LoginLimits {
    pub fn new() -> Arc<LoginLimits> {
        Arc::new(LoginLimits {
            clients: Mutex::new(HashMap::new()),
            hashes: Arc::new(tokio::sync::Semaphore::new(LOGIN_HASHES)),
            waiting: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Admits a login from `ip`, or answers 429 with how long to wait.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<LoginTicket, Refused> {
        let key = client_key(ip);
        let now = Instant::now();
        let mut clients = self.clients.lock();
        if clients.len() >= CLIENTS_MAX && !clients.contains_key(&key) {
            // Forget idle clients with a full budget first, then the longest idle.
            clients.retain(|_, c| {
                c.refill(now);
                c.in_flight > 0 || c.budget < LOGIN_BURST
            });
            if clients.len() >= CLIENTS_MAX
                && let Some(oldest) = clients
                    .iter()
                    .filter(|(_, c)| c.in_flight == 0)
                    .min_by_key(|(_, c)| c.refilled)
                    .map(|(k, _)| *k)
            {
                clients.remove(&oldest);
            }
        }
        let client = clients.entry(key).or_insert(Client {
            budget: LOGIN_BURST,
            refilled: now,
            in_flight: 0,
        });
        client.refill(now);
        if client.budget < 1.0 {
            let wait = (1.0 - client.budget) * LOGIN_REFILL.as_secs_f64();
            return Err(Refused {
                message: format!(
                    "too many failed logins from {ip}; try again in {} s",
                    wait.ceil()
                ),
                retry_after: wait.ceil() as u64,
            });
        }
        if client.in_flight >= LOGIN_PER_CLIENT {
            return Err(Refused {
                message: format!("{LOGIN_PER_CLIENT} logins from {ip} are already running"),
                retry_after: 1,
            });
        }
        client.in_flight += 1;
        Ok(LoginTicket {
            limits: self.clone(),
            key,
        })
    }
}

/// Reads a body of at most `max` bytes. Larger: the rest is read and dropped up to
/// [`DRAIN_MAX`], then 413.
pub async fn read_body(body: Body, max: usize) -> Result<Vec<u8>, ApiError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
        total += chunk.len();
        if total <= max {
            out.extend_from_slice(&chunk);
        } else if total > DRAIN_MAX {
            break;
        }
    }
    if total > max {
        return Err(too_large(max));
    }
    Ok(out)
}

fn too_large(max: usize) -> ApiError {
    ApiError::payload_too_large(format!(
        "the request body is larger than this route takes ({max} bytes)"
    ))
}

/// Middleware: refuses a declared body larger than [`BODY_MAX`] with 413 (after draining
/// it, see [`DRAIN_MAX`]); a chunked one is cut by the body limit layer. The login route
/// bounds its own body after its rate limit, so it is left alone here.
pub async fn bounded_body(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > BODY_MAX as u64) && !request.uri().path().ends_with("/login") {
        let _ = read_body(request.into_body(), BODY_MAX).await;
        return too_large(BODY_MAX).into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_logins_spend_the_budget_and_it_refills() {
        let limits = LoginLimits::new();
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        for _ in 0..LOGIN_BURST as u32 {
            limits.admit(ip).ok().unwrap().failed();
        }
        let refused = limits.admit(ip).err().unwrap();
        assert_eq!(refused.retry_after, LOGIN_REFILL.as_secs());
        let response = refused.into_response();
        assert_eq!(response.status(), 429);
        assert_eq!(
            response.headers()[header::RETRY_AFTER],
            LOGIN_REFILL.as_secs().to_string().as_str()
        );
        // Another client is not affected; neither is another host of the same /64 spared.
        assert!(limits.admit("192.0.2.8".parse().unwrap()).is_ok());
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2".parse().unwrap();
        for _ in 0..LOGIN_BURST as u32 {
            limits.admit(a).ok().unwrap().failed();
        }
        assert!(limits.admit(b).is_err());
        // Refill: pretend time passed.
        limits
            .clients
            .lock()
            .get_mut(&client_key(ip))
            .unwrap()
            .refilled -= LOGIN_REFILL;
        assert!(limits.admit(ip).is_ok());
    }

    #[test]
    fn concurrent_logins_per_client_are_capped() {
        let limits = LoginLimits::new();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let held: Vec<_> = (0..LOGIN_PER_CLIENT)
            .map(|_| limits.admit(ip).ok().unwrap())
            .collect();
        assert_eq!(limits.admit(ip).err().unwrap().retry_after, 1);
        drop(held);
        assert!(limits.admit(ip).is_ok());
    }
}
