//! The routes the router serves, in one table ([`ROUTES`]): `template.yaml`
//! declares the same routes to API Gateway, and `docs/openapi.json` describes them
//! (the tests hold all three together).

/// An endpoint of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST` a message to answer, `GET` the transcript.
    Messages,
    /// The memory view.
    Memory,
    /// What the contact's next model request should carry, for a client's own loop.
    Context,
    /// A round the client ran itself, to commit.
    Rounds,
    /// The contact, to erase.
    Contact,
    /// This API's OpenAPI description (public: it holds no data).
    OpenApi,
    /// The tenant's contacts (operator).
    Contacts,
    /// A contact's facts (operator).
    Facts,
    /// One fact, to set or delete (operator).
    Fact,
    /// The tenant's configuration (operator).
    TenantConfig,
    /// The tenant's usage (operator).
    Usage,
    /// The memory inspector page (public: it holds no data).
    Inspector,
    /// The contact's session records, searched (recall; `handler/recall.rs`); `POST`
    /// closes the contact's session now.
    Sessions,
    /// `POST` a message to answer as it is written (`handler/stream.rs`).
    MessageStream,
    /// The platform's tenants with their usage (platform; `handler/platform.rs`).
    PlatformTenants,
    /// A tenant's policy, read or replaced (platform).
    PlatformPolicy,
    /// Who has the contact's WhatsApp conversation; `POST` hands it to a person
    /// (operator; `handler/handoff.rs`).
    Handoff,
    /// Gives the contact's conversation back to the agent (operator).
    Handback,
}

/// A route: its path as API Gateway writes it (`{contact}` is one path segment),
/// the endpoint, and the methods it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// The path template.
    pub path: &'static str,
    /// What it serves.
    pub endpoint: Endpoint,
    /// The methods it answers; any other is 405.
    pub methods: &'static [&'static str],
}

/// Every route the router serves, in one table (`template.yaml` declares the same
/// routes to API Gateway, and `docs/openapi.json` describes them).
pub const ROUTES: &[RouteSpec] = &[
    RouteSpec {
        path: "/v1/contacts/{contact}/messages",
        endpoint: Endpoint::Messages,
        methods: &["GET", "POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/messages/stream",
        endpoint: Endpoint::MessageStream,
        methods: &["POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/memory",
        endpoint: Endpoint::Memory,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/context",
        endpoint: Endpoint::Context,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/rounds",
        endpoint: Endpoint::Rounds,
        methods: &["POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}",
        endpoint: Endpoint::Contact,
        methods: &["DELETE"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/sessions",
        endpoint: Endpoint::Sessions,
        methods: &["GET", "POST"],
    },
    RouteSpec {
        path: "/v1/openapi.json",
        endpoint: Endpoint::OpenApi,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts",
        endpoint: Endpoint::Contacts,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/handoff",
        endpoint: Endpoint::Handoff,
        methods: &["GET", "POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/handback",
        endpoint: Endpoint::Handback,
        methods: &["POST"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/facts",
        endpoint: Endpoint::Facts,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/contacts/{contact}/facts/{key}",
        endpoint: Endpoint::Fact,
        methods: &["PUT", "DELETE"],
    },
    RouteSpec {
        path: "/v1/tenant/config",
        endpoint: Endpoint::TenantConfig,
        methods: &["GET", "PUT"],
    },
    RouteSpec {
        path: "/v1/usage",
        endpoint: Endpoint::Usage,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/inspector",
        endpoint: Endpoint::Inspector,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/platform/tenants",
        endpoint: Endpoint::PlatformTenants,
        methods: &["GET"],
    },
    RouteSpec {
        path: "/v1/platform/tenants/{tenant}/policy",
        endpoint: Endpoint::PlatformPolicy,
        methods: &["GET", "PUT"],
    },
];
