//! `GET /v1/contacts/{contact}/sessions?q=&limit=`: the contact's session records
//! (recall over earlier sessions, [`degrau::plan::recall`]), best match first for a query
//! `q`, newest first without one. The parameters are typed at the edge; a bad one
//! is 400 `invalid_request` with its documented message (`limit` first, then `q`).

use degrau::records::{RecallQuery, RecordLimit, Records};
use degrau::store::ContactKey;
use lambda_http::aws_lambda_events::query_map::QueryMap;
use lambda_http::{Body, Response};

use super::{HttpError, from_service, json_body};

/// The route's query parameters.
#[derive(Debug, PartialEq, Eq)]
struct SessionsQuery {
    query: Option<RecallQuery>,
    limit: RecordLimit,
}

impl TryFrom<Option<&QueryMap>> for SessionsQuery {
    type Error = HttpError;

    fn try_from(query: Option<&QueryMap>) -> Result<Self, HttpError> {
        let param = |name: &str| query.and_then(|q| q.first(name));
        let limit = param("limit")
            .map(RecordLimit::parse)
            .transpose()
            .map_err(from_service)?
            .unwrap_or_default();
        let query = param("q")
            .map(RecallQuery::parse)
            .transpose()
            .map_err(from_service)?;
        Ok(SessionsQuery { query, limit })
    }
}

/// Answers the route.
pub(super) async fn get_sessions(
    service: &Records,
    key: &ContactKey,
    query: Option<&QueryMap>,
) -> Result<Response<Body>, HttpError> {
    let query = SessionsQuery::try_from(query)?;
    let view = service
        .sessions(key, query.query.as_ref(), query.limit)
        .await
        .map_err(from_service)?;
    json_body(&view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<SessionsQuery, String> {
        let map: HashMap<String, Vec<String>> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
            .collect();
        SessionsQuery::try_from(Some(&QueryMap::from(map))).map_err(|e| e.message)
    }

    #[test]
    fn the_parameters_are_typed_at_the_edge_with_their_documented_errors() {
        let ok = parse(&[("q", "corte com o Bruno"), ("limit", "3")]).unwrap();
        assert_eq!(ok.limit, RecordLimit::parse("3").unwrap());
        assert!(ok.query.is_some());
        assert_eq!(parse(&[]).unwrap().limit, RecordLimit::default());
        for bad in ["0", "21", "x", "-1"] {
            let message = parse(&[("limit", bad)]).unwrap_err();
            assert_eq!(
                message, "`limit` must be a whole number from 1 to 20",
                "{bad}"
            );
        }
        assert!(
            parse(&[("q", " ")])
                .unwrap_err()
                .contains("`q`: the query must contain")
        );
        let long = "a".repeat(501);
        assert!(
            parse(&[("q", &long)])
                .unwrap_err()
                .contains("the limit is 500")
        );
    }
}
