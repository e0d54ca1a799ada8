//! Login, logout, users and API tokens.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::{Caller, Role, TokenView, UserView};
use super::error::{ApiError, ApiResult, ErrorBody};
use super::{AppState, blocking};

#[derive(Deserialize, ToSchema)]
pub struct LoginRequest {
    pub username: String,
    pub password: String,
}

#[derive(Serialize, ToSchema)]
pub struct LoginAnswer {
    pub token: String,
    pub username: String,
    pub role: Role,
    pub expires_at: u64,
}

#[derive(Serialize, ToSchema)]
pub struct Me {
    pub username: String,
    pub role: Role,
}

#[derive(Deserialize, ToSchema)]
pub struct NewUser {
    pub username: String,
    pub password: String,
    pub role: Role,
}

#[derive(Deserialize, ToSchema)]
pub struct NewPassword {
    pub password: String,
}

#[derive(Deserialize, ToSchema)]
pub struct NewToken {
    pub name: String,
}

#[derive(Serialize, ToSchema)]
pub struct CreatedToken {
    /// The secret: shown only now.
    pub token: String,
    #[serde(flatten)]
    pub info: TokenView,
}

#[utoipa::path(post, path = "/api/v1/login", tag = "session", request_body = LoginRequest,
    responses((status = 200, body = LoginAnswer), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn login(
    State(state): State<Arc<AppState>>,
    body: Result<Json<LoginRequest>, JsonRejection>,
) -> ApiResult<Json<LoginAnswer>> {
    let Json(req) = body?;
    blocking(state, move |s| {
        let result = s.auth.login(&req.username, &req.password);
        let outcome = match &result {
            Ok(_) => "ok".to_string(),
            Err(e) => e.message.clone(),
        };
        s.auth
            .audit(&req.username, "login", &req.username, &outcome);
        let (token, caller, expires_at) = result?;
        Ok(LoginAnswer {
            token,
            username: caller.username,
            role: caller.role,
            expires_at,
        })
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/api/v1/logout", tag = "session",
    responses((status = 204), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
pub async fn logout(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    // Read so that a client's empty chunked body does not close the connection.
    _body: super::maintenance::IgnoredBody,
) -> ApiResult<StatusCode> {
    blocking(state, move |s| s.auth.revoke(&caller.token_id)).await?;
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
    if caller.username != username {
        caller.require(Role::Admin)?;
    }
    let Json(req) = body?;
    blocking(state, move |s| {
        let result = s.auth.set_password(&username, &req.password);
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
