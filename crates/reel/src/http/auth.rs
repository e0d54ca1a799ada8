//! Users, roles, tokens and the audit log, kept as records in the store.
//!
//! - `auth/user/<name>`: a [`User`] with an Argon2id PHC password hash.
//! - `auth/token/<id>`: a [`TokenRecord`]; the secret itself is never stored, only its
//!   BLAKE3 hash. A token is presented as `<id>.<secret>`.
//! - `audit/<seq, 20 digits>`: an [`AuditEvent`] per change; the newest [`AUDIT_KEEP`] are
//!   kept.
//!
//! Invariant: every change goes to the store before the in-memory copy changes, so a crash
//! never leaves a token valid that the store does not know. Changes that take rights away or
//! grant lasting ones (users, passwords, API tokens, revocations, logouts) are synced before
//! they are answered. Audit events, new login sessions and the purge of expired sessions are
//! queued and written in batches: a background thread writes the queue once a second and
//! makes it durable with [`ChunkStore::commit_records`], which never seals a tape writer's
//! open pack; while a writer streams, they become durable with its next sync (a filemark, a
//! rewind, an unload) or at shutdown. A crash can lose the last of them: an audit event, or a
//! session its user logs in again for. The queue is bounded; audit events beyond it are
//! counted and the count is recorded instead.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier, phc::PasswordHash};
use parking_lot::{Condvar, Mutex};
use reel_api::Role;
use reel_api::session::{AuditEvent, TokenView, UserView};
use reel_chunkstore::ChunkStore;
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ApiResult};

/// Session tokens from a login expire after this long.
pub const SESSION_SECONDS: u64 = 12 * 3600;

/// How often expired sessions are dropped from the store.
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// How often the queue of audit events and sessions is written to the store.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Audit events queued at most; more are counted, not kept, until the queue is written.
const QUEUE_MAX: usize = 10_000;

/// Characters of caller-supplied text kept in an audit event's fields.
pub const AUDIT_FIELD_MAX: usize = 200;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct User {
    username: String,
    role: Role,
    password_hash: String,
    created: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct TokenRecord {
    id: String,
    username: String,
    /// What the user called it (API tokens) or "session".
    name: String,
    secret_hash: String,
    created: u64,
    /// Session tokens expire; API tokens do not.
    expires: Option<u64>,
}

/// Who is calling.
#[derive(Clone, Debug)]
pub struct Caller {
    pub username: String,
    pub role: Role,
    pub token_id: String,
}

impl Caller {
    pub fn require(&self, role: Role) -> ApiResult<()> {
        if self.role >= role {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "this needs the {} role; {} is {}",
                role.as_str(),
                self.username,
                self.role.as_str()
            )))
        }
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the OS random number generator");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn secret_hash(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

fn valid_username(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Record changes waiting to be written, in order.
#[derive(Default)]
struct Queue {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    audit_events: usize,
    /// Audit events dropped because the queue was full.
    dropped: u64,
}

pub struct Auth {
    store: ChunkStore,
    users: Mutex<HashMap<String, User>>,
    tokens: Mutex<HashMap<String, TokenRecord>>,
    last_used: Mutex<HashMap<String, u64>>,
    next_seq: AtomicU64,
    /// Serialises changes (store write + memory update) against each other.
    write: Mutex<()>,
    queue: Mutex<Queue>,
    /// Held while writing to the store, so records reach it in the order they were made;
    /// true while written records may not be durable yet.
    store_order: Mutex<bool>,
    /// Wakes the flusher early (a full queue, shutdown).
    wake: Condvar,
    wake_lock: Mutex<bool>,
}

/// `text` cut to `max` characters, marked when cut; control characters replaced.
pub fn bounded(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push_str(&format!("… ({} bytes)", text.len()));
    }
    out
}

impl Auth {
    /// Loads users and tokens. Without any user, creates `admin` with a random password and
    /// returns it (shown once by the caller).
    pub fn open(store: ChunkStore) -> anyhow::Result<(Arc<Auth>, Option<String>)> {
        let mut users = HashMap::new();
        for (_, v) in store.records(b"auth/user/")? {
            let user: User = serde_json::from_slice(&v)?;
            users.insert(user.username.clone(), user);
        }
        let mut tokens = HashMap::new();
        for (_, v) in store.records(b"auth/token/")? {
            let token: TokenRecord = serde_json::from_slice(&v)?;
            tokens.insert(token.id.clone(), token);
        }
        let next_seq = store
            .records_rev(b"audit/", None, 1)?
            .first()
            .and_then(|(k, _)| std::str::from_utf8(&k[6..]).ok()?.parse::<u64>().ok())
            .map_or(1, |s| s + 1);
        let auth = Arc::new(Auth {
            store,
            users: Mutex::new(users),
            tokens: Mutex::new(tokens),
            last_used: Mutex::new(HashMap::new()),
            next_seq: AtomicU64::new(next_seq),
            write: Mutex::new(()),
            queue: Mutex::new(Queue::default()),
            store_order: Mutex::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(false),
        });
        auth.purge_expired();
        let mut initial = None;
        if auth.users.lock().is_empty() {
            let password = random_hex(12);
            auth.create_user("admin", &password, Role::Admin)
                .map_err(|e| anyhow::anyhow!("creating the first admin: {e}"))?;
            auth.audit("reel", "create user", "admin", "ok");
            initial = Some(password);
        }
        Ok((auth, initial))
    }

    /// Starts the background thread that writes the queue once a second and purges expired
    /// sessions once a minute; it ends when the last `Arc<Auth>` elsewhere is dropped.
    pub fn start(self: &Arc<Self>) {
        self.start_with(PURGE_EVERY);
    }

    fn start_with(self: &Arc<Self>, purge_every: std::time::Duration) {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("reel-auth".into())
            .spawn(move || {
                let mut last_purge = std::time::Instant::now();
                loop {
                    let Some(auth) = weak.upgrade() else { return };
                    {
                        let mut woken = auth.wake_lock.lock();
                        if !*woken {
                            auth.wake.wait_for(&mut woken, FLUSH_EVERY);
                        }
                        *woken = false;
                    }
                    if last_purge.elapsed() >= purge_every {
                        last_purge = std::time::Instant::now();
                        auth.purge_expired();
                    }
                    auth.flush_queue();
                }
            })
            .expect("spawning the auth thread");
    }

    fn encode<T: Serialize>(value: Option<&T>) -> ApiResult<Option<Vec<u8>>> {
        value
            .map(|v| serde_json::to_vec(v).map_err(|e| ApiError::internal(e.to_string())))
            .transpose()
    }

    /// Writes the queued changes, then `extra`, in one transaction. The caller holds
    /// `store_order`.
    fn write_queued(
        &self,
        dirty: &mut bool,
        extra: Option<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> ApiResult<()> {
        let mut ops = {
            let mut q = self.queue.lock();
            let mut ops = std::mem::take(&mut q.ops);
            q.audit_events = 0;
            let dropped = std::mem::take(&mut q.dropped);
            drop(q);
            if dropped > 0 {
                let event = self.event(
                    "reel",
                    "audit",
                    "audit log",
                    &format!("{dropped} audit events dropped: the queue was full"),
                );
                ops.push((
                    format!("audit/{:020}", event.seq).into_bytes(),
                    Self::encode(Some(&event))?,
                ));
            }
            ops
        };
        let queued = ops.len();
        ops.extend(extra);
        if ops.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.store.put_records(&ops) {
            // Nothing was written: the queued changes go back in front of newer ones.
            ops.truncate(queued);
            let mut q = self.queue.lock();
            ops.append(&mut q.ops);
            q.ops = ops;
            return Err(e.into());
        }
        *dirty = true;
        Ok(())
    }

    /// Writes the queue and makes it durable if that seals no pack (see the module docs).
    pub fn flush_queue(&self) {
        let mut dirty = self.store_order.lock();
        let result = self.write_queued(&mut dirty, None).and_then(|()| {
            if *dirty && self.store.commit_records()? {
                *dirty = false;
            }
            Ok(())
        });
        if let Err(e) = result {
            tracing::warn!(error = %e.message, "could not write the audit log and sessions");
        }
    }

    /// Queues a change for the next batch (audit events, sessions, purges).
    fn queue(&self, key: String, value: Option<Vec<u8>>, audit: bool) {
        let mut q = self.queue.lock();
        if audit && q.audit_events >= QUEUE_MAX {
            q.dropped += 1;
            return;
        }
        q.audit_events += usize::from(audit);
        q.ops.push((key.into_bytes(), value));
        if q.ops.len() >= QUEUE_MAX {
            *self.wake_lock.lock() = true;
            self.wake.notify_one();
        }
    }

    /// Writes a change (after everything queued before it) and syncs the store.
    fn put<T: Serialize>(&self, key: String, value: Option<&T>) -> ApiResult<()> {
        let bytes = Self::encode(value)?;
        let mut dirty = self.store_order.lock();
        self.write_queued(&mut dirty, Some((key.into_bytes(), bytes)))?;
        self.store.sync()?;
        *dirty = false;
        Ok(())
    }

    pub fn login(&self, username: &str, password: &str) -> ApiResult<(String, Caller, u64)> {
        let user = self.users.lock().get(username).cloned();
        // An unknown user costs the same Argon2 verification as a known one, so the answer's
        // timing does not tell which usernames exist.
        let hash = match &user {
            Some(u) => u.password_hash.clone(),
            None => unknown_user_hash().to_string(),
        };
        let verified = PasswordHash::new(&hash).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        });
        let ok = user.is_some() && verified;
        let Some(user) = user.filter(|_| ok) else {
            return Err(ApiError::unauthenticated("wrong username or password"));
        };
        let expires = now() + SESSION_SECONDS;
        let (token, caller) = self.issue(&user, "session", Some(expires))?;
        Ok((token, caller, expires))
    }

    /// Checks `password` against `username`'s (an Argon2 verification).
    pub fn verify_password(&self, username: &str, password: &str) -> bool {
        let Some(hash) = self
            .users
            .lock()
            .get(username)
            .map(|u| u.password_hash.clone())
        else {
            return false;
        };
        PasswordHash::new(&hash).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
    }

    /// A session token (`expires`: queued, see the module docs) or an API token (synced).
    fn issue(&self, user: &User, name: &str, expires: Option<u64>) -> ApiResult<(String, Caller)> {
        let id = random_hex(8);
        let secret = random_hex(32);
        let record = TokenRecord {
            id: id.clone(),
            username: user.username.clone(),
            name: name.to_string(),
            secret_hash: secret_hash(&secret),
            created: now(),
            expires,
        };
        let _w = self.write.lock();
        let key = format!("auth/token/{id}");
        if expires.is_some() {
            self.queue(key, Self::encode(Some(&record))?, false);
        } else {
            self.put(key, Some(&record))?;
        }
        self.tokens.lock().insert(id.clone(), record);
        Ok((
            format!("{id}.{secret}"),
            Caller {
                username: user.username.clone(),
                role: user.role,
                token_id: id,
            },
        ))
    }

    /// The caller a presented token stands for.
    pub fn authenticate(&self, presented: &str) -> ApiResult<Caller> {
        let invalid = || ApiError::unauthenticated("the token is unknown, expired or revoked");
        let (id, secret) = presented.split_once('.').ok_or_else(invalid)?;
        let record = self.tokens.lock().get(id).cloned().ok_or_else(invalid)?;
        // blake3::Hash compares in constant time.
        let expected = blake3::Hash::from_hex(&record.secret_hash).map_err(|_| invalid())?;
        if blake3::hash(secret.as_bytes()) != expected {
            return Err(invalid());
        }
        if record.expires.is_some_and(|e| e <= now()) {
            return Err(invalid());
        }
        let role = self
            .users
            .lock()
            .get(&record.username)
            .map(|u| u.role)
            .ok_or_else(invalid)?;
        self.last_used.lock().insert(id.to_string(), now());
        Ok(Caller {
            username: record.username,
            role,
            token_id: record.id,
        })
    }

    /// Whether the token `id` still stands (not revoked, not expired, its user still there):
    /// long-lived requests (the live stream) ask again as they go.
    pub fn still_valid(&self, id: &str) -> bool {
        let Some(record) = self.tokens.lock().get(id).cloned() else {
            return false;
        };
        record.expires.is_none_or(|e| e > now()) && self.users.lock().contains_key(&record.username)
    }

    pub fn create_user(&self, username: &str, password: &str, role: Role) -> ApiResult<UserView> {
        if !valid_username(username) {
            return Err(ApiError::bad_request(
                "username: 1 to 64 characters A-Z, a-z, 0-9, - _ . @",
            ));
        }
        check_password(password)?;
        let hash = Argon2::default()
            .hash_password(password.as_bytes())
            .map_err(|e| ApiError::internal(format!("hashing the password: {e}")))?
            .to_string();
        let _w = self.write.lock();
        if self.users.lock().contains_key(username) {
            return Err(ApiError::conflict(format!("user {username} exists")));
        }
        let user = User {
            username: username.to_string(),
            role,
            password_hash: hash,
            created: now(),
        };
        self.put(format!("auth/user/{username}"), Some(&user))?;
        self.users.lock().insert(username.to_string(), user.clone());
        Ok(UserView {
            username: user.username,
            role,
            created: user.created,
        })
    }

    pub fn users(&self) -> Vec<UserView> {
        let mut v: Vec<UserView> = self
            .users
            .lock()
            .values()
            .map(|u| UserView {
                username: u.username.clone(),
                role: u.role,
                created: u.created,
            })
            .collect();
        v.sort_by(|a, b| a.username.cmp(&b.username));
        v
    }

    pub fn delete_user(&self, username: &str) -> ApiResult<()> {
        let _w = self.write.lock();
        let role = self
            .users
            .lock()
            .get(username)
            .map(|u| u.role)
            .ok_or_else(|| ApiError::not_found(format!("no user {username}")))?;
        let admins = self
            .users
            .lock()
            .values()
            .filter(|u| u.role == Role::Admin)
            .count();
        if role == Role::Admin && admins == 1 {
            return Err(ApiError::conflict("the last admin cannot be deleted"));
        }
        let owned: Vec<String> = self
            .tokens
            .lock()
            .values()
            .filter(|t| t.username == username)
            .map(|t| t.id.clone())
            .collect();
        for id in &owned {
            self.put::<TokenRecord>(format!("auth/token/{id}"), None)?;
            self.tokens.lock().remove(id);
        }
        self.put::<User>(format!("auth/user/{username}"), None)?;
        self.users.lock().remove(username);
        Ok(())
    }

    /// Sets `username`'s password and revokes every session and API token of theirs except
    /// `keep` (the caller's own, when they change their own password).
    pub fn set_password(
        &self,
        username: &str,
        password: &str,
        keep: Option<&str>,
    ) -> ApiResult<()> {
        check_password(password)?;
        let hash = Argon2::default()
            .hash_password(password.as_bytes())
            .map_err(|e| ApiError::internal(format!("hashing the password: {e}")))?
            .to_string();
        let _w = self.write.lock();
        let mut user = self
            .users
            .lock()
            .get(username)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no user {username}")))?;
        user.password_hash = hash;
        // The revocations are queued, so `put` writes them in the same transaction as the new
        // hash: no crash leaves the new password beside the old sessions.
        let owned: Vec<String> = self
            .tokens
            .lock()
            .values()
            .filter(|t| t.username == username && Some(t.id.as_str()) != keep)
            .map(|t| t.id.clone())
            .collect();
        for id in &owned {
            self.queue(format!("auth/token/{id}"), None, false);
            self.tokens.lock().remove(id);
        }
        self.put(format!("auth/user/{username}"), Some(&user))?;
        self.users.lock().insert(username.to_string(), user);
        Ok(())
    }

    /// A new API token for `username` (no expiry).
    pub fn create_token(&self, username: &str, name: &str) -> ApiResult<(String, TokenView)> {
        if name.is_empty() || name.len() > 100 {
            return Err(ApiError::bad_request("name: 1 to 100 characters"));
        }
        let user = self
            .users
            .lock()
            .get(username)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no user {username}")))?;
        let (secret, caller) = self.issue(&user, name, None)?;
        let view = self
            .token_view(&caller.token_id)
            .ok_or_else(|| ApiError::internal("token vanished"))?;
        Ok((secret, view))
    }

    fn token_view(&self, id: &str) -> Option<TokenView> {
        let t = self.tokens.lock().get(id).cloned()?;
        Some(TokenView {
            last_used: self.last_used.lock().get(id).copied(),
            id: t.id,
            username: t.username,
            name: t.name,
            created: t.created,
            expires: t.expires,
        })
    }

    /// API tokens (not login sessions) of `username`, or of everyone.
    pub fn tokens(&self, username: Option<&str>) -> Vec<TokenView> {
        let ids: Vec<String> = self
            .tokens
            .lock()
            .values()
            .filter(|t| t.expires.is_none() && username.is_none_or(|u| t.username == u))
            .map(|t| t.id.clone())
            .collect();
        let mut v: Vec<TokenView> = ids.iter().filter_map(|id| self.token_view(id)).collect();
        v.sort_by(|a, b| (a.created, &a.id).cmp(&(b.created, &b.id)));
        v
    }

    pub fn token_owner(&self, id: &str) -> Option<String> {
        self.tokens.lock().get(id).map(|t| t.username.clone())
    }

    pub fn revoke(&self, id: &str) -> ApiResult<()> {
        let _w = self.write.lock();
        if !self.tokens.lock().contains_key(id) {
            return Err(ApiError::not_found(format!("no token {id}")));
        }
        self.put::<TokenRecord>(format!("auth/token/{id}"), None)?;
        self.tokens.lock().remove(id);
        Ok(())
    }

    /// Drops expired session tokens from the store.
    pub fn purge_expired(&self) {
        let t = now();
        let expired: Vec<String> = self
            .tokens
            .lock()
            .values()
            .filter(|r| r.expires.is_some_and(|e| e <= t))
            .map(|r| r.id.clone())
            .collect();
        // Queued, not synced: an expired token is refused whether or not its record is gone.
        let _w = self.write.lock();
        for id in expired {
            self.queue(format!("auth/token/{id}"), None, false);
            self.tokens.lock().remove(&id);
            self.last_used.lock().remove(&id);
        }
    }

    /// Appends to the audit log. A failure to record is logged, not fatal: the change
    /// itself already happened.
    /// Caller-supplied text (a username, a target) is kept to [`AUDIT_FIELD_MAX`] characters.
    pub fn audit(&self, user: &str, action: &str, target: &str, result: &str) {
        let event = self.event(user, action, target, result);
        let seq = event.seq;
        tracing::info!(
            user = event.user,
            action = event.action,
            target = event.target,
            result = event.result,
            "audit"
        );
        match Self::encode(Some(&event)) {
            Ok(bytes) => self.queue(format!("audit/{seq:020}"), bytes, true),
            Err(e) => tracing::warn!(error = %e.message, "could not record an audit event"),
        }
        if seq > AUDIT_KEEP && seq.is_multiple_of(AUDIT_TRIM_BATCH) {
            self.trim_audit(seq - AUDIT_KEEP);
        }
    }

    fn event(&self, user: &str, action: &str, target: &str, result: &str) -> AuditEvent {
        AuditEvent {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            time: now(),
            user: bounded(user, AUDIT_FIELD_MAX),
            action: bounded(action, AUDIT_FIELD_MAX),
            target: bounded(target, AUDIT_FIELD_MAX),
            result: bounded(result, 4 * AUDIT_FIELD_MAX),
        }
    }

    /// Queues the deletion of the audit events in the two batches below `keep_from`. Two,
    /// not one: a trim that was lost (or a sequence number skipped by a restart) is caught up
    /// by the next; deleting an absent record is harmless.
    fn trim_audit(&self, keep_from: u64) {
        let first = keep_from.saturating_sub(AUDIT_TRIM_BATCH * 2);
        for seq in first..keep_from {
            self.queue(format!("audit/{seq:020}"), None, false);
        }
    }

    /// Up to `limit` events older than `before` (a sequence number), newest first: a page of
    /// the log, read without the rest of it.
    pub fn events(&self, limit: usize, before: Option<u64>) -> ApiResult<Vec<AuditEvent>> {
        {
            // What is still queued shows too.
            let mut dirty = self.store_order.lock();
            self.write_queued(&mut dirty, None)?;
        }
        let before = before.map(|b| format!("audit/{b:020}"));
        let records =
            self.store
                .records_rev(b"audit/", before.as_deref().map(str::as_bytes), limit)?;
        Ok(records
            .iter()
            .filter_map(|(_, v)| serde_json::from_slice(v).ok())
            .collect())
    }
}

impl Drop for Auth {
    /// Writes what is still queued; the store's final sync makes it durable.
    fn drop(&mut self) {
        let mut dirty = self.store_order.lock();
        let mut flag = *dirty;
        if let Err(e) = self.write_queued(&mut flag, None) {
            tracing::warn!(error = %e.message, "could not write the audit log and sessions");
        }
        *dirty = flag;
    }
}

/// An Argon2id hash of a random password nobody knows, verified against when a login names
/// an unknown user.
fn unknown_user_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        Argon2::default()
            .hash_password(random_hex(16).as_bytes())
            .map(|h| h.to_string())
            .unwrap_or_default()
    })
}

/// Audit events kept: older ones are deleted in batches as new ones arrive.
pub const AUDIT_KEEP: u64 = 100_000;
const AUDIT_TRIM_BATCH: u64 = 1_000;

fn check_password(password: &str) -> ApiResult<()> {
    if password.len() < 8 || password.len() > 1024 {
        return Err(ApiError::bad_request("password: 8 to 1024 characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use reel_backend::{Backend, LocalBackend};
    use reel_chunkstore::{StoreConfig, StreamId};

    use super::*;

    fn store(dir: &Path) -> ChunkStore {
        let backend: Arc<dyn Backend> = Arc::new(LocalBackend::open(&dir.join("objects")).unwrap());
        ChunkStore::open(
            &dir.join(crate::data_dir::CATALOG_DIR),
            backend,
            StoreConfig::default(),
        )
        .unwrap()
    }

    fn packs(store: &ChunkStore) -> usize {
        store.backend().list("packs/").unwrap().len()
    }

    #[test]
    fn audit_events_and_sessions_never_seal_a_writers_pack() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let (auth, password) = Auth::open(store.clone()).unwrap();
        let password = password.unwrap();
        // A writer with flushed data in an open pack.
        let stream = store.open_stream(StreamId(1)).unwrap();
        let data: Vec<u8> = (0..1u32 << 20)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        stream.append(&data).unwrap();
        stream.flush().unwrap();
        let before = packs(&store);
        for i in 0..50 {
            auth.audit(
                "someone",
                "login",
                &format!("attempt {i}"),
                "wrong username or password",
            );
        }
        let (token, _, _) = auth.login("admin", &password).unwrap();
        auth.flush_queue();
        assert_eq!(packs(&store), before, "no pack was sealed");
        // Written (readable) even though not yet durable.
        assert!(auth.events(100, None).unwrap().len() >= 50);
        assert!(auth.authenticate(&token).is_ok());
        // After the writer's own sync, the next flush makes them durable without it.
        stream.sync().unwrap();
        auth.audit("someone", "login", "after", "ok");
        auth.flush_queue();
        assert!(!*auth.store_order.lock(), "durable");
    }

    #[test]
    fn expired_sessions_are_purged_periodically() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let (auth, _) = Auth::open(store.clone()).unwrap();
        let admin = auth.users.lock().get("admin").cloned().unwrap();
        let (_, caller) = auth.issue(&admin, "session", Some(now() - 1)).unwrap();
        let key = format!("auth/token/{}", caller.token_id);
        auth.flush_queue();
        assert!(store.record(key.as_bytes()).unwrap().is_some());
        auth.start_with(Duration::from_millis(100));
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.record(key.as_bytes()).unwrap().is_some() {
            assert!(
                Instant::now() < deadline,
                "the expired session is still stored"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!auth.still_valid(&caller.token_id));
    }

    #[test]
    fn audit_fields_are_bounded() {
        assert_eq!(bounded("admin", 64), "admin");
        let long = bounded(&"x".repeat(5000), 64);
        assert!(
            long.starts_with(&"x".repeat(64)) && long.ends_with("(5000 bytes)"),
            "{long}"
        );
        assert_eq!(bounded("a\nb", 10), "a\u{fffd}b");
    }
}
