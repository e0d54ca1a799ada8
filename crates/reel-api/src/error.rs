//! The body of every error answer: `{"error": {"code": "...", "message": "..."}}`.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Stable: bad_request, unauthenticated, forbidden, not_found, conflict, method_not_allowed,
    /// payload_too_large, too_many_requests, internal.
    pub code: String,
    pub message: String,
}
