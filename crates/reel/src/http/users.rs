//! Login, logout, users and API tokens.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use reel_api::Role;
use reel_api::session::{
    CreatedToken, LoginAnswer, LoginRequest, Me, NewPassword, NewToken, NewUser, TokenView,
    UserView,
};

use super::auth::Caller;
use super::error::{ApiError, ApiResult, ErrorBody};
use super::{AppState, blocking};

#[utoipa::path(post, path = "/api/v1/login", tag = "session", request_body = LoginRequest,
    responses((status = 200, body = LoginAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody, description = "too many failed or concurrent logins from this client; see Retry-After")))]
pub async fn login(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<std::net::SocketAddr>,
    request: Request,
) -> Response {
    // The rate limit comes first: a client over its budget costs a header parse, no more.
    let ticket = match state.logins.admit(peer.ip()) {
        Ok(t) => t,
        Err(refused) => return refused.into_response(),
    };
    let bytes =
        match super::limits::read_body(request.into_body(), super::limits::LOGIN_BODY_MAX).await {
            Ok(b) => b,
            Err(e) => {
                ticket.failed();
                return e.into_response();
            }
        };
    let req: LoginRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => return ApiError::bad_request(format!("the login body: {e}")).into_response(),
    };
    let _slot = match ticket.hash_slot().await {
        Ok(slot) => slot,
        Err(refused) => return refused.into_response(),
    };
    let answer = blocking(state, move |s| {
        let result = s.auth.login(&req.username, &req.password);
        let outcome = match &result {
            Ok(_) => "ok".to_string(),
            Err(e) => {
                ticket.failed();
                e.message.clone()
            }
        };
        // A username is at most 64 characters: a longer one is cut (and marked) in the log.
        let name = super::auth::bounded(&req.username, 64);
        s.auth.audit(
            &name,
            "login",
            &format!("{name} from {}", peer.ip()),
            &outcome,
        );
        let (token, caller, expires_at) = result?;
        Ok(LoginAnswer {
            token,
            username: caller.username,
            role: caller.role,
            expires_at,
        })
    })
    .await;
    answer.map(Json).into_response()
}

#[utoipa::path(post, path = "/api/v1/logout", tag = "session",
    responses((status = 204), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
pub async fn logout(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    // Read so that a client's empty chunked body does not close the connection.
    _body: super::maintenance::IgnoredBody,
) -> ApiResult<StatusCode> {
    blocking(state, move |s| {
        let result = s.auth.revoke(&caller.token_id);
        s.audit(&caller, "logout", &caller.token_id, &result);
        result
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/me", tag = "session",
    responses((status = 200, body = Me), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
pub async fn me(caller: Caller) -> Json<Me> {
    Json(Me {
        username: caller.username,
        role: caller.role,
    })
}

#[utoipa::path(get, path = "/api/v1/users", tag = "users",
    responses((status = 200, body = [UserView]), (status = 403, body = ErrorBody)), security(("bearer" = [])))]
pub async fn list_users(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<Vec<UserView>>> {
    caller.require(Role::Admin)?;
    Ok(Json(state.auth.users()))
}

#[utoipa::path(post, path = "/api/v1/users", tag = "users", request_body = NewUser,
    responses((status = 201, body = UserView), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody)), security(("bearer" = [])))]
pub async fn create_user(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    body: Result<Json<NewUser>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<UserView>)> {
    caller.require(Role::Admin)?;
    let Json(req) = body?;
    blocking(state, move |s| {
        let result = s.auth.create_user(&req.username, &req.password, req.role);
        s.audit(
            &caller,
            &format!("create {} user", req.role.as_str()),
            &req.username,
            &result,
        );
        result
    })
    .await
    .map(|u| (StatusCode::CREATED, Json(u)))
}

#[utoipa::path(delete, path = "/api/v1/users/{username}", tag = "users", params(("username" = String, Path)),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)), security(("bearer" = [])))]
pub async fn delete_user(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    caller.require(Role::Admin)?;
    let Path(username) = path?;
    blocking(state, move |s| {
        let result = s.auth.delete_user(&username);
        s.audit(&caller, "delete user", &username, &result);
        result
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Changing one's own password needs the current one; an admin setting another user's does
/// not. Either way every other session and API token of that user is revoked (the caller's
/// own session stays).
#[utoipa::path(put, path = "/api/v1/users/{username}/password", tag = "users", params(("username" = String, Path)),
    request_body = NewPassword,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody)), security(("bearer" = [])))]
pub async fn set_password(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    body: Result<Json<NewPassword>, JsonRejection>,
) -> ApiResult<StatusCode> {
    let Path(username) = path?;
    let own = caller.username == username;
    if !own {
        caller.require(Role::Admin)?;
    }
    let Json(req) = body?;
    if own && req.current_password.is_none() {
        return Err(ApiError::bad_request(
            "current_password: changing your own password needs the current one",
        ));
    }
    blocking(state, move |s| {
        let result = match &req.current_password {
            Some(current) if own && !s.auth.verify_password(&username, current) => Err(
                ApiError::forbidden("current_password is not the current password"),
            ),
            _ => s.auth.set_password(
                &username,
                &req.password,
                own.then_some(caller.token_id.as_str()),
            ),
        };
        s.audit(&caller, "set password", &username, &result);
        result
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/api/v1/tokens", tag = "users",
    responses((status = 200, body = [TokenView]), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
pub async fn list_tokens(
    State(state): State<Arc<AppState>>,
    caller: Caller,
) -> ApiResult<Json<Vec<TokenView>>> {
    let only = (caller.role != Role::Admin).then_some(caller.username.as_str());
    Ok(Json(state.auth.tokens(only)))
}

#[utoipa::path(post, path = "/api/v1/tokens", tag = "users", request_body = NewToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = ErrorBody)), security(("bearer" = [])))]
pub async fn create_token(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    body: Result<Json<NewToken>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    let Json(req) = body?;
    blocking(state, move |s| {
        let result = s.auth.create_token(&caller.username, &req.name);
        s.audit(&caller, "create token", &req.name, &result);
        let (token, info) = result?;
        Ok(CreatedToken { token, info })
    })
    .await
    .map(|t| (StatusCode::CREATED, Json(t)))
}

#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "users", params(("id" = String, Path)),
    responses((status = 204), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn revoke_token(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(id) = path?;
    let owner = state
        .auth
        .token_owner(&id)
        .ok_or_else(|| ApiError::not_found(format!("no token {id}")))?;
    if owner != caller.username {
        caller.require(Role::Admin)?;
    }
    blocking(state, move |s| {
        let result = s.auth.revoke(&id);
        s.audit(&caller, "revoke token", &id, &result);
        result
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
