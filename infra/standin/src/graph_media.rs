//! The Graph API double's media, for the WhatsApp worker's voice notes
//! (`GRAPH_API_BASE_URL` pointed here):
//!
//! | endpoint | does |
//! |---|---|
//! | `POST /stand-in/graph/media` | keeps the body as a media (its type from `Content-Type`), answers `{"id"}` (digits, as Meta's media ids), to name in a webhook's `audio.id` |
//! | `GET /{version}/{media-id}` | checks the bearer token; answers the media's `url` (on this stand-in), `mime_type`, `sha256` (hex), `file_size` and `id`, as the Graph API does; an unknown id is the Graph API's 400 |
//! | `GET /stand-in/graph/media/{id}` | the bytes (the bearer token checked), as Meta's CDN URL serves them; counted |
//! | `GET /stand-in/graph/media-downloads` | how many downloads were served |
//!
//! A version segment that does not read as one (`/v1/nothing`) is no Graph API
//! path: the Messages API stand-in's 404 envelope answers it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::graph::{digits, graph_error, version_ok};

/// Largest media kept, in bytes (WhatsApp's own audio limit).
pub const MAX_MEDIA_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Default)]
struct Inner {
    media: HashMap<String, (String, Vec<u8>)>,
    next_id: u64,
    downloads: u64,
}

/// The media kept (cheap to clone; clones share it).
#[derive(Debug, Clone, Default)]
pub struct GraphMedia {
    inner: Arc<Mutex<Inner>>,
}

impl GraphMedia {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Keeps `bytes` of type `mime`; answers its id.
    pub fn put(&self, mime: &str, bytes: Vec<u8>) -> String {
        self.with(|inner| {
            inner.next_id += 1;
            let id = format!("{}", 900_000_000_000_000 + inner.next_id);
            inner.media.insert(id.clone(), (mime.to_owned(), bytes));
            id
        })
    }
}

/// The media routes.
pub fn router(media: GraphMedia) -> Router {
    Router::new()
        .route("/stand-in/graph/media", post(upload))
        .route("/stand-in/graph/media/{id}", get(download))
        .route("/stand-in/graph/media-downloads", get(downloads))
        .route("/{version}/{id}", get(locate))
        .with_state(media)
}

fn bearer(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|token| !token.trim().is_empty())
}

async fn upload(State(media): State<GraphMedia>, headers: HeaderMap, body: Bytes) -> Response {
    if body.is_empty() || body.len() > MAX_MEDIA_BYTES {
        return graph_error(400, 100, "the media must be 1 byte to 16 MB");
    }
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/octet-stream");
    let id = media.put(mime, body.to_vec());
    axum::Json(json!({"id": id})).into_response()
}

async fn locate(
    State(media): State<GraphMedia>,
    Path((version, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if !version_ok(&version) {
        let path = format!("/{version}/{id}");
        return crate::error::ApiError::new(404, format!("Not found: {path}"))
            .into_response("req_standin_graph");
    }
    if !bearer(&headers) {
        return graph_error(401, 190, "An access token is required");
    }
    let found = media.with(|inner| inner.media.get(&id).cloned());
    let (Some((mime, bytes)), true) = (found, digits(&id, 32)) else {
        return graph_error(
            400,
            100,
            "Unsupported get request. Object with ID does not exist",
        );
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("127.0.0.1");
    axum::Json(json!({
        "messaging_product": "whatsapp",
        "url": format!("http://{host}/stand-in/graph/media/{id}"),
        "mime_type": mime,
        "sha256": hex::encode(Sha256::digest(&bytes)),
        "file_size": bytes.len(),
        "id": id,
    }))
    .into_response()
}

async fn download(
    State(media): State<GraphMedia>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if !bearer(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let found = media.with(|inner| {
        let found = inner.media.get(&id).cloned();
        inner.downloads += u64::from(found.is_some());
        found
    });
    match found {
        Some((mime, bytes)) => ([(header::CONTENT_TYPE, mime)], bytes).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn downloads(State(media): State<GraphMedia>) -> Response {
    axum::Json(json!({"downloads": media.with(|inner| inner.downloads)})).into_response()
}
