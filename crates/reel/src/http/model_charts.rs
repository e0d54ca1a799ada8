//! The physical drive model's curves as SVG for the console's drive cards (issue 17):
//! `/model/{id}/record-size.svg` (throughput against record size) and
//! `/model/{id}/compressible.svg` (against the compressible share), computed once per drive
//! model by `reel model`'s chart code and kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

type Charts = Arc<(String, String)>;

fn cache() -> &'static Mutex<HashMap<&'static str, Charts>> {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, Charts>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn charts(spec: &'static reel_drivemodel::DriveSpec) -> Charts {
    if let Some(c) = cache().lock().ok().and_then(|c| c.get(spec.id).cloned()) {
        return c;
    }
    let c = Arc::new(reel_bench::model::curve_charts(spec));
    if let Ok(mut cache) = cache().lock() {
        cache.insert(spec.id, c.clone());
    }
    c
}

pub async fn chart(Path((id, file)): Path<(String, String)>) -> Response {
    let Some(spec) = reel_drivemodel::drive(&id) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no drive model {id:?} (`reel model drives` lists them)"),
        )
            .into_response();
    };
    let by_record_size = match file.as_str() {
        "record-size.svg" => true,
        "compressible.svg" => false,
        _ => {
            return (
                StatusCode::NOT_FOUND,
                "the charts are record-size.svg and compressible.svg",
            )
                .into_response();
        }
    };
    // Simulations: off the async workers.
    let Ok(c) = tokio::task::spawn_blocking(move || charts(spec)).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the chart failed").into_response();
    };
    let svg = if by_record_size {
        c.0.clone()
    } else {
        c.1.clone()
    };
    let mut response = svg.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("image/svg+xml"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response
}
